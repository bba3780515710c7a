//! Fuzz targets: each makes inputs for one reader from the committed fixtures, and says how
//! cutrace is run on them. A new reader (an ELF file for the audit, a root for the doctor) is a
//! new module with a [`Target`] and a line in [`all`].

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::rng::Rng;

pub mod kineto;
pub mod large;
pub mod mutate;
pub mod native;
pub mod shapes;

/// One run of cutrace: its arguments, how its input reaches it, and the paths it writes (whose
/// size is allowed on top of the memory ceiling).
#[derive(Debug, Clone)]
pub struct Case {
    pub args: Vec<OsString>,
    pub feed: Feed,
    pub outputs: Vec<PathBuf>,
    /// The input's bytes and its file name, kept as a regression input when the case fails.
    pub input: Vec<u8>,
    pub input_name: String,
    /// What was done to the input, for the failure message.
    pub what: String,
    /// Variables added to cutrace's environment.
    pub env: Vec<(OsString, OsString)>,
}

#[derive(Debug, Clone)]
pub enum Feed {
    /// The input is a file (or a symlink to one) the arguments name.
    File,
    /// The input is a FIFO at `path`, written with `bytes` once cutrace opens it.
    Fifo { path: PathBuf, bytes: Vec<u8> },
}

pub trait Target {
    fn name(&self) -> &'static str;
    /// Makes one input in `dir` (a fresh scratch directory) and the case that runs it.
    fn generate(&self, rng: &mut Rng, dir: &Path) -> io::Result<Case>;
}

/// Every target, in the order a run cycles through them.
pub fn all(repo: &Path) -> io::Result<Vec<Box<dyn Target>>> {
    Ok(vec![
        Box::new(kineto::KinetoJson::load(repo, false)?),
        Box::new(kineto::KinetoJson::load(repo, true)?),
        Box::new(native::NativePart::load(repo)?),
    ])
}

/// The case for an input of `bytes` named `name`: written to `dir` as a file, a symlink to one,
/// or a FIFO, and run with `report` or `convert`.
pub fn case_for(
    rng: &mut Rng,
    dir: &Path,
    name: &str,
    bytes: Vec<u8>,
    what: String,
) -> io::Result<Case> {
    let file = dir.join(name);
    let (input_path, feed, how) = match rng.below(10) {
        0 | 1 => {
            let p = dir.join(format!("fifo-{name}"));
            (
                p.clone(),
                Feed::Fifo {
                    path: p,
                    bytes: bytes.clone(),
                },
                "through a FIFO",
            )
        }
        2 => {
            std::fs::write(&file, &bytes)?;
            let link = dir.join(format!("link-{name}"));
            std::os::unix::fs::symlink(&file, &link)?;
            (link, Feed::File, "through a symlink")
        }
        _ => {
            std::fs::write(&file, &bytes)?;
            (file, Feed::File, "as a file")
        }
    };
    let mut args: Vec<OsString> = Vec::new();
    let mut outputs = Vec::new();
    match rng.below(4) {
        0 => {
            args.extend(["report".into(), input_path.into_os_string()]);
        }
        1 => {
            args.extend(["report".into(), input_path.into_os_string()]);
            args.extend(["--format".into(), "json".into()]);
        }
        2 => {
            let out = dir.join("out.json");
            args.extend(["convert".into(), input_path.into_os_string()]);
            args.extend(["--chrome".into(), out.clone().into_os_string()]);
            outputs.push(out);
        }
        _ => {
            let out = dir.join("csv");
            args.extend(["convert".into(), input_path.into_os_string()]);
            args.extend(["--csv".into(), out.clone().into_os_string()]);
            if rng.chance(0.5) {
                args.push("--allow-damaged".into());
            }
            outputs.push(out);
        }
    }
    Ok(Case {
        args,
        feed,
        outputs,
        input: bytes,
        input_name: name.to_string(),
        what: format!("{what}, {how}"),
        env: Vec::new(),
    })
}

/// A committed regression input replayed as `report` and as `convert --chrome`.
pub fn replay_cases(input: &Path, dir: &Path) -> io::Result<Vec<Case>> {
    let bytes = std::fs::read(input)?;
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".into());
    let file = dir.join(&name);
    std::fs::write(&file, &bytes)?;
    let out = dir.join("out.json");
    let what = format!("regression input {}", input.display());
    let base = Case {
        args: vec!["report".into(), file.clone().into_os_string()],
        feed: Feed::File,
        outputs: Vec::new(),
        input: bytes,
        input_name: name,
        what,
        env: Vec::new(),
    };
    let mut convert = base.clone();
    convert.args = vec![
        "convert".into(),
        file.into_os_string(),
        "--allow-damaged".into(),
        "--chrome".into(),
        out.clone().into_os_string(),
    ];
    convert.outputs = vec![out];
    Ok(vec![base, convert])
}

/// Reads the committed fixtures under `repo/rel` whose names end in `suffix`.
pub fn fixtures(repo: &Path, rel: &str, suffix: &str) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut stack = vec![repo.join(rel)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                out.push((name, std::fs::read(&p)?));
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no *{suffix} fixtures under {}", repo.join(rel).display()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_is_the_same_from_the_same_seed() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = std::env::temp_dir().join(format!("cutrace-fuzz-test-{}", std::process::id()));
        for t in all(&repo).unwrap() {
            for seed in 0..6 {
                let (a, b) = (root.join("a"), root.join("b"));
                std::fs::create_dir_all(&a).unwrap();
                std::fs::create_dir_all(&b).unwrap();
                let x = t.generate(&mut Rng::new(seed), &a).unwrap();
                let y = t.generate(&mut Rng::new(seed), &b).unwrap();
                assert_eq!((&x.input, &x.what), (&y.input, &y.what), "{}", t.name());
                assert!(x.input.len() <= mutate::MAX_INPUT + (1 << 20));
                std::fs::remove_dir_all(&root).unwrap();
            }
        }
    }
}
