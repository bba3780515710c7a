//! `cutrace diff A B --critical-path --html`: the page says how the path changed with the diff
//! JSON's numbers (each part's length on both sides, marked), and each side's timeline opens
//! with its own path's lane and lists its path under it.

use cutrace_testkit::{Dir, Run};
use serde_json::Value;

use crate::util::{bin, cutrace_json};

const BASE: &str = "tests/fixtures/kineto/profiler_steps.json.gz";
const NEW: &str = "tests/fixtures/kineto/train_step.json.gz";

/// `(data-check, data-part, data-value)` of every mark whose check starts with `cp_part_`.
fn part_marks(page: &str) -> Vec<(String, String, String)> {
    let attr = |tag: &str, name: &str| {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_owned())
    };
    page.match_indices("data-check=\"cp_part_")
        .map(|(i, _)| {
            let start = page[..i].rfind('<').unwrap();
            let tag = &page[start..start + page[start..].find('>').unwrap()];
            (
                attr(tag, "data-check").unwrap(),
                attr(tag, "data-part").unwrap(),
                attr(tag, "data-value").unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_diff_page_shows_how_the_path_changed_and_draws_each_sides_path() {
    let dir = Dir::new("path-diff-page");
    let out = dir.path("diff.html");
    bin()
        .current_dir(cutrace_testkit::repo())
        .args(["diff", BASE, NEW, "--critical-path", "--html"])
        .arg(&out)
        .run_ok();
    let page = std::fs::read_to_string(&out).unwrap();
    let json = cutrace_json(&["diff", BASE, NEW, "--critical-path"]);
    let parts = json["critical_path"]["parts"].as_array().unwrap();
    let marks = part_marks(&page);
    let mut n = 0;
    for p in parts {
        let name = p["part"].as_str().unwrap();
        if name != "length" && p["base_ns"].as_u64() == Some(0) && p["new_ns"].as_u64() == Some(0) {
            continue;
        }
        for side in ["base", "new"] {
            let want = p[format!("{side}_ns")].to_string();
            let got: Vec<&(String, String, String)> = marks
                .iter()
                .filter(|m| m.0 == format!("cp_part_{side}_ns") && m.1 == name)
                .collect();
            assert_eq!(got.len(), 1, "{side} {name}: {got:?}");
            assert_eq!(got[0].2, want, "{side} {name}");
            n += 1;
        }
    }
    assert_eq!(n, marks.len());
    assert!(n >= 4, "{marks:?}");
    // Each side: its timeline's first lane is its path, and its steps' paths are listed.
    let open = "id=\"cutrace-data\">";
    let from = page.find(open).unwrap() + open.len();
    let to = from + page[from..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&page[from..to]).unwrap();
    for t in data["timelines"].as_array().unwrap() {
        assert_eq!(t["lod"]["lanes"][0]["role"], "path", "{}", t["id"]);
    }
    assert_eq!(data["timelines"].as_array().unwrap().len(), 2);
    assert_eq!(page.matches("<h2 class=\"critical-path\">").count(), 3);
    assert!(
        page.contains("data-timeline=\"tl-base\"") && page.contains("data-timeline=\"tl-new\"")
    );
}

/// Steps on both sides, 4 against 3: the text and the page give each side's mean path per step
/// beside the sums (the JSON's length over its step count).
#[test]
fn unequal_step_counts_give_the_mean_path_per_step() {
    let new = "tests/fixtures/kineto/torch211_sync_events.json.gz";
    let json = cutrace_json(&["diff", BASE, new, "--critical-path"]);
    let cp = &json["critical_path"];
    assert_eq!(
        (cp["steps_base"].as_u64(), cp["steps_new"].as_u64()),
        (Some(4), Some(3))
    );
    let length = cp["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "length")
        .unwrap();
    let mean = |k: &str, n: u64| cutrace_analysis::fmt_ns(length[k].as_u64().unwrap() / n);
    let (b, n) = (mean("base_ns", 4), mean("new_ns", 3));
    // Host time in each step's own range is one `(step)` row, not a row per step name.
    let changed = cp["changed"].as_array().unwrap();
    assert!(changed.iter().any(|c| c["name"] == "(step)"), "{changed:?}");
    assert!(
        !changed
            .iter()
            .any(|c| c["name"].as_str().unwrap().starts_with("ProfilerStep#")),
        "{changed:?}"
    );
    let out = crate::util::cutrace(&["diff", BASE, new, "--critical-path", "--wide"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "per step the path is {b} in the base and {n} in the new"
        )),
        "{b} {n}: {text}"
    );
    let dir = Dir::new("path-diff-means");
    let page = dir.path("d.html");
    bin()
        .current_dir(cutrace_testkit::repo())
        .args(["diff", BASE, new, "--critical-path", "--html"])
        .arg(&page)
        .run_ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!(
        "per step the path is {b} in the base and {n} in the new"
    )));
}
