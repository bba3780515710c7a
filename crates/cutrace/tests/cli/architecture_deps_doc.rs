//! `docs/ARCHITECTURE.md`'s crate table says its `depends on` column is each crate's
//! `Cargo.toml`, exactly: the table is parsed, and each row's names are compared with the
//! `[dependencies]` of the crate it names (a cutrace crate may be written without its `cutrace-`
//! prefix, and a note in parentheses after a name is ignored). Every crate under `crates/` must
//! have a row. No TOML crate is a dependency of the workspace, so the manifests are read by a
//! small line parser that knows only the dependency sections.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cutrace_testkit::repo as root;

/// The section names whose keys are dependencies of the kind `kind` (`dependencies`,
/// `dev-dependencies`, `build-dependencies`), plain or under `[target.'cfg(…)'.…]`.
fn dependency_kind(header: &str) -> Option<(&'static str, Option<String>)> {
    let inner = header.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    let inner = match inner.strip_prefix("target.") {
        // `target.'cfg(unix)'.dependencies`: the kind is after the quoted predicate.
        Some(rest) => rest.rsplit_once(['\'', '"']).map_or(rest, |(_, k)| k),
        None => inner,
    };
    let inner = inner.trim_start_matches('.');
    for kind in ["dev-dependencies", "build-dependencies", "dependencies"] {
        if inner == kind {
            return Some((kind, None));
        }
        // `[dependencies.foo]`: one dependency as its own table.
        if let Some(name) = inner.strip_prefix(kind).and_then(|r| r.strip_prefix('.')) {
            return Some((kind, Some(name.trim_matches(['"', '\'']).to_string())));
        }
    }
    None
}

/// How much `line` opens (`[`, `{`) minus what it closes, outside strings and comments.
fn bracket_depth_change(line: &str) -> i32 {
    let (mut depth, mut quote) = (0, None);
    for c in line.chars() {
        match (quote, c) {
            (None, '#') => break,
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// A manifest read for what the table needs: the package name and its dependencies by kind.
struct Manifest {
    name: String,
    deps: BTreeMap<&'static str, BTreeSet<String>>,
}

fn read_manifest(path: &Path) -> Manifest {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut section, mut kind) = (String::new(), None);
    let (mut name, mut deps) = (None, BTreeMap::<&'static str, BTreeSet<String>>::new());
    let mut depth = 0;
    for line in text.lines() {
        let trimmed = line.trim();
        if depth == 0 && trimmed.starts_with('[') && !trimmed.starts_with("[[") {
            section = trimmed.to_string();
            // `[dependencies.foo]` names its one dependency; its keys are foo's settings.
            kind = dependency_kind(trimmed).map(|(k, one)| {
                let table_of_one = one.is_some();
                if let Some(one) = one {
                    deps.entry(k).or_default().insert(one);
                }
                (k, table_of_one)
            });
            continue;
        }
        if depth == 0 && trimmed.starts_with("[[") {
            (section, kind) = (trimmed.to_string(), None);
            continue;
        }
        let at_top = depth == 0;
        depth += bracket_depth_change(line);
        if !at_top || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some(eq) = trimmed.find('=') else {
            continue;
        };
        // `serde.workspace = true` and `serde = …` both name `serde`.
        let key = trimmed[..eq].trim();
        let key = key
            .split('.')
            .next()
            .unwrap_or(key)
            .trim_matches(['"', '\'']);
        match kind {
            Some((k, false)) => {
                deps.entry(k).or_default().insert(key.to_string());
            }
            Some((_, true)) => {}
            None if section == "[package]" && key == "name" => {
                name = Some(trimmed[eq + 1..].trim().trim_matches('"').to_string());
            }
            None => {}
        }
    }
    Manifest {
        name: name.unwrap_or_else(|| panic!("{}: no [package] name", path.display())),
        deps,
    }
}

/// Every crate of the workspace by name: its manifest.
fn workspace_crates() -> BTreeMap<String, Manifest> {
    let dir = root().join("crates");
    let mut crates = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        if manifest.is_file() {
            let m = read_manifest(&manifest);
            crates.insert(m.name.clone(), m);
        }
    }
    crates
}

/// The rows of the table whose header has a `depends on` column: crate name and the names in
/// that column, in the table's order.
fn table_rows(doc: &str) -> Vec<(String, Vec<String>)> {
    let cells = |line: &str| -> Vec<String> {
        let line = line.trim().trim_start_matches('|').trim_end_matches('|');
        line.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut lines = doc.lines();
    let header = lines
        .find(|l| l.starts_with('|') && cells(l).iter().any(|c| c == "depends on"))
        .expect("docs/ARCHITECTURE.md has no table with a `depends on` column");
    let header = cells(header);
    let col = header.iter().position(|c| c == "depends on").unwrap();
    let mut rows = Vec::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let row = cells(line);
        assert_eq!(
            row.len(),
            header.len(),
            "docs/ARCHITECTURE.md: a row of the crate table has {} cells, not {}: {line}",
            row.len(),
            header.len()
        );
        let krate = row[0].replace('`', "");
        let krate = krate.trim_end_matches(" (bin)").trim().to_string();
        let names = row[col]
            .split(',')
            // `libc (constants)`: the note is for the reader.
            .map(|n| n.split('(').next().unwrap_or(n).trim().replace('`', ""))
            // `–`: a crate with no dependencies.
            .filter(|n| !n.is_empty() && n != "–")
            .collect();
        rows.push((krate, names));
    }
    rows
}

/// `what` for a message: the names, or "nothing".
fn list(names: &BTreeSet<String>) -> String {
    if names.is_empty() {
        "nothing".to_string()
    } else {
        names.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[test]
fn architecture_crate_table_matches_each_cargo_toml() {
    let doc_path = root().join("docs/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("{}: {e}", doc_path.display()));
    let crates = workspace_crates();
    assert!(crates.len() > 10, "only {} crates found", crates.len());
    let rows = table_rows(&doc);

    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for (krate, names) in &rows {
        let Some(m) = crates.get(krate) else {
            wrong.push(format!("{krate}: a row for a crate that is not in crates/"));
            continue;
        };
        if !seen.insert(krate.clone()) {
            wrong.push(format!("{krate}: two rows"));
        }
        // A cutrace crate may be written without its prefix: `cupti` is `cutrace-cupti`.
        let listed: BTreeSet<String> = names
            .iter()
            .map(|n| {
                let full = format!("cutrace-{n}");
                if crates.contains_key(&full) {
                    full
                } else {
                    n.clone()
                }
            })
            .collect();
        let actual = m.deps.get("dependencies").cloned().unwrap_or_default();
        let missing: BTreeSet<String> = actual.difference(&listed).cloned().collect();
        let extra: BTreeSet<String> = listed.difference(&actual).cloned().collect();
        if !missing.is_empty() {
            wrong.push(format!(
                "{krate}: its Cargo.toml [dependencies] has {}, which the table leaves out",
                list(&missing)
            ));
        }
        if !extra.is_empty() {
            wrong.push(format!(
                "{krate}: the table lists {}, which its Cargo.toml [dependencies] does not have",
                list(&extra)
            ));
        }
    }
    for krate in crates.keys().filter(|k| !seen.contains(*k)) {
        wrong.push(format!("{krate}: no row in the table"));
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's crate table (\"depends on\" is each crate's Cargo.toml, \
         exactly) differs from the manifests in {} place(s):\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
}

#[test]
fn the_manifest_reader_knows_the_dependency_sections() {
    let d = cutrace_testkit::Dir::new("architecture-deps-doc");
    let path = d.join("Cargo.toml");
    let text = "[package]\nname = \"demo\"\nversion.workspace = true\n\n\
                [dependencies]\n# a comment = no\nserde.workspace = true\n\
                object = { version = \"0.36\", features = [\"elf\"] }\n\
                nix = { version = \"0.32\", features = [\n  \"process\",\n  \"x = y\",\n] }\n\
                \"quoted\" = \"1\"\n\n\
                [dependencies.tabled]\nversion = \"1\"\n\n\
                [dev-dependencies]\nproptest = \"1\"\n\n\
                [target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n\n\
                [build-dependencies]\ncc = \"1\"\n\n\
                [[test]]\nname = \"t\"\nharness = false\n\n\
                [lints]\nworkspace = true\n";
    std::fs::write(&path, text).unwrap();
    let m = read_manifest(&path);
    assert_eq!(m.name, "demo");
    let names = |k: &str| m.deps.get(k).map(list).unwrap_or_default();
    assert_eq!(
        names("dependencies"),
        "libc, nix, object, quoted, serde, tabled"
    );
    assert_eq!(names("dev-dependencies"), "proptest");
    assert_eq!(names("build-dependencies"), "cc");
}
