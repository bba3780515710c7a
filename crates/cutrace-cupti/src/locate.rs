//! Where libcupti is looked for, in order, without loading anything (pure over its inputs).
//!
//! Order: `CUTRACE_CUPTI_LIB`; a libcupti the process has already loaded (two copies in one
//! process would fight; torch loads its wheel's copy at import, before CUDA starts): seen in
//! `/proc/self/maps`, or, where that cannot be read, by asking the dynamic loader for the known
//! sonames without loading anything; `CUDA_HOME` / `CUDA_PATH`; `/usr/local/cuda`; the `nvidia`
//! pip wheels beside the running Python; finally the bare soname, which the dynamic loader
//! resolves through `LD_LIBRARY_PATH` and the `ldconfig` cache.

use cutrace_settings::var;
use std::path::{Path, PathBuf};

/// The soname this build's record layouts were written for (CUPTI 13, CUDA 13.x).
pub const CUPTI_SONAME: &str = "libcupti.so.13";

/// Sonames a program's own libcupti may carry, newest first. Only [`CUPTI_SONAME`] can be
/// traced with; the others matter for finding a copy that is already loaded.
pub const KNOWN_SONAMES: &[&str] = &[CUPTI_SONAME, "libcupti.so.12", "libcupti.so"];

/// Subdirectories of `CUDA_HOME` / `CUDA_PATH` searched, in order.
pub const CUDA_HOME_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "lib"];
/// Toolkit installs searched when no variable names one, and their subdirectories, in order.
pub const TOOLKIT_ROOTS: [&str; 2] = ["/usr/local/cuda", "/usr/local/cuda-13"];
pub const TOOLKIT_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"];

/// The [`Candidate::source`] of a libcupti the process had loaded before cutrace looked.
pub const ALREADY_LOADED: &str = "already loaded by the program";

/// One place to try, with why it is on the list (shown when nothing loads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// A path, or a bare soname for the dynamic loader's own search.
    pub path: PathBuf,
    pub source: &'static str,
}

/// The inputs of the search, so tests can supply their own.
pub struct SearchInputs<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Text of `/proc/self/maps`, when readable.
    pub maps: Option<&'a str>,
    /// The running executable (`/proc/self/exe`), for Python's pip wheels.
    pub exe: Option<&'a Path>,
    /// Whether a path exists (the real filesystem outside tests).
    pub exists: &'a dyn Fn(&Path) -> bool,
    /// Lists a directory's entries (for `lib/python3*/site-packages`).
    pub list_dir: &'a dyn Fn(&Path) -> Vec<PathBuf>,
    /// Whether the dynamic loader has a library of this soname loaded (asked only when `maps`
    /// is unreadable).
    pub is_loaded: &'a dyn Fn(&str) -> bool,
}

/// libcupti files already mapped into the process, from `/proc/self/maps` text.
pub fn loaded_from_maps(maps: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or("");
        if name.starts_with("libcupti.so") && !out.iter().any(|p| p == Path::new(path)) {
            out.push(PathBuf::from(path));
        }
    }
    out
}

/// Every candidate, in the order they should be tried.
pub fn candidates(inp: &SearchInputs<'_>) -> Vec<Candidate> {
    let mut out = Vec::new();
    let push = |path: PathBuf, source: &'static str, out: &mut Vec<Candidate>| {
        if !out.iter().any(|c: &Candidate| c.path == path) {
            out.push(Candidate { path, source });
        }
    };
    if let Some(p) = (inp.env)(var::CUPTI_LIB).filter(|s| !s.is_empty()) {
        push(PathBuf::from(p), var::CUPTI_LIB, &mut out);
        // An explicit choice is not second-guessed.
        return out;
    }
    match inp.maps {
        Some(maps) => {
            for p in loaded_from_maps(maps) {
                push(p, ALREADY_LOADED, &mut out);
            }
        }
        None => {
            // Loading the soname again returns the copy already in the process.
            if let Some(s) = KNOWN_SONAMES.iter().find(|s| (inp.is_loaded)(s)) {
                push(PathBuf::from(s), ALREADY_LOADED, &mut out);
            }
        }
    }
    if !out.is_empty() {
        return out;
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = (inp.env)(var).filter(|s| !s.is_empty()) {
            for sub in CUDA_HOME_SUBDIRS {
                let p = Path::new(&root).join(sub).join(CUPTI_SONAME);
                if (inp.exists)(&p) {
                    push(
                        p,
                        if var == "CUDA_HOME" {
                            "CUDA_HOME"
                        } else {
                            "CUDA_PATH"
                        },
                        &mut out,
                    );
                }
            }
        }
    }
    for root in TOOLKIT_ROOTS {
        for sub in TOOLKIT_SUBDIRS {
            let p = Path::new(root).join(sub).join(CUPTI_SONAME);
            if (inp.exists)(&p) {
                push(p, "/usr/local/cuda", &mut out);
            }
        }
    }
    if let Some(exe) = inp.exe {
        for p in pip_wheel_candidates(exe, inp) {
            push(p, "nvidia pip wheel beside the Python", &mut out);
        }
    }
    push(
        PathBuf::from(CUPTI_SONAME),
        "dynamic loader search (LD_LIBRARY_PATH, ldconfig)",
        &mut out,
    );
    out
}

/// `<prefix>/lib/python3.*/site-packages/nvidia/*/lib/libcupti.so.13` for a Python executable.
fn pip_wheel_candidates(exe: &Path, inp: &SearchInputs<'_>) -> Vec<PathBuf> {
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !name.starts_with("python") {
        return Vec::new();
    }
    let Some(prefix) = exe.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for libdir in [prefix.join("lib"), prefix.join("lib64")] {
        for py in (inp.list_dir)(&libdir) {
            let pyname = py.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !pyname.starts_with("python3") {
                continue;
            }
            let nvidia = py.join("site-packages").join("nvidia");
            for pkg in (inp.list_dir)(&nvidia) {
                let p = pkg.join("lib").join(CUPTI_SONAME);
                if (inp.exists)(&p) {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Whether a library of this soname (or path) is loaded in this process; loads nothing.
pub fn is_loaded_here(soname: &str) -> bool {
    let Ok(name) = std::ffi::CString::new(soname) else {
        return false;
    };
    // SAFETY: RTLD_NOLOAD only looks the name up among loaded objects; the reference it takes
    // on a hit is given back at once.
    unsafe {
        let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
    }
    true
}

/// The search over the real process and filesystem, with the caller's environment (`env`: a
/// variable's value; the library reads none itself).
pub fn candidates_here(env: &dyn Fn(&str) -> Option<String>) -> Vec<Candidate> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok();
    let exe = std::fs::read_link("/proc/self/exe").ok();
    let exists = |p: &Path| p.exists();
    let list_dir = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    candidates(&SearchInputs {
        env,
        maps: maps.as_deref(),
        exe: exe.as_deref(),
        exists: &exists,
        list_dir: &list_dir,
        is_loaded: &is_loaded_here,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(
        env: &[(&str, &str)],
        maps: Option<&str>,
        files: &[&str],
        exe: Option<&str>,
    ) -> Vec<Candidate> {
        run_loaded(env, maps, files, exe, &[])
    }

    fn run_loaded(
        env: &[(&str, &str)],
        maps: Option<&str>,
        files: &[&str],
        exe: Option<&str>,
        loaded: &[&str],
    ) -> Vec<Candidate> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        let envf = |k: &str| env.get(k).cloned();
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let list_dir = |p: &Path| -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = files
                .iter()
                .filter_map(|f| {
                    let rest = f.strip_prefix(p).ok()?;
                    let first = rest.components().next()?;
                    Some(p.join(first))
                })
                .collect();
            v.dedup();
            v
        };
        let exe = exe.map(PathBuf::from);
        candidates(&SearchInputs {
            env: &envf,
            maps,
            exe: exe.as_deref(),
            exists: &exists,
            list_dir: &list_dir,
            is_loaded: &|s| loaded.contains(&s),
        })
    }

    #[test]
    fn explicit_path_wins_alone() {
        let c = run(
            &[(var::CUPTI_LIB, "/x/libcupti.so.13"), ("CUDA_HOME", "/c")],
            None,
            &[],
            None,
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].source, var::CUPTI_LIB);
    }

    #[test]
    fn already_loaded_copy_is_reused() {
        let maps = "7f00-7f01 r-xp 00000000 08:01 1 /venv/nvidia/cu13/lib/libcupti.so.13\n\
                    7f01-7f02 r--p 00000000 08:01 1 /venv/nvidia/cu13/lib/libcupti.so.13\n";
        let c = run(
            &[("CUDA_HOME", "/c")],
            Some(maps),
            &["/c/lib64/libcupti.so.13"],
            None,
        );
        assert_eq!(
            c,
            vec![Candidate {
                path: "/venv/nvidia/cu13/lib/libcupti.so.13".into(),
                source: "already loaded by the program"
            }]
        );
    }

    #[test]
    fn without_maps_the_loader_is_asked_for_a_loaded_soname() {
        let c = run_loaded(
            &[("CUDA_HOME", "/c")],
            None,
            &["/c/lib64/libcupti.so.13"],
            None,
            &["libcupti.so.13"],
        );
        assert_eq!(
            c,
            vec![Candidate {
                path: "libcupti.so.13".into(),
                source: ALREADY_LOADED
            }]
        );
        // Readable maps are the whole truth: the loader is not asked.
        let c = run_loaded(&[], Some(""), &[], None, &["libcupti.so.13"]);
        assert_eq!(
            c[0].source,
            "dynamic loader search (LD_LIBRARY_PATH, ldconfig)"
        );
    }

    #[test]
    fn explicit_path_beats_a_loaded_copy() {
        let maps = "7f00-7f01 r-xp 00000000 08:01 1 /venv/libcupti.so.13\n";
        let c = run(
            &[(var::CUPTI_LIB, "/x/libcupti.so.13")],
            Some(maps),
            &[],
            None,
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].source, var::CUPTI_LIB);
    }

    #[test]
    fn is_loaded_here_loads_nothing() {
        assert!(!is_loaded_here("libcutrace-no-such-library.so.1"));
        #[cfg(target_env = "gnu")]
        assert!(is_loaded_here("libc.so.6"));
    }

    #[test]
    fn order_is_cuda_home_then_usr_local_then_wheels_then_soname() {
        let c = run(
            &[("CUDA_HOME", "/c")],
            Some(""),
            &[
                "/c/extras/CUPTI/lib64/libcupti.so.13",
                "/usr/local/cuda/lib64/libcupti.so.13",
                "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13",
            ],
            Some("/venv/bin/python3.12"),
        );
        let paths: Vec<String> = c.iter().map(|c| c.path.display().to_string()).collect();
        assert_eq!(
            paths,
            vec![
                "/c/extras/CUPTI/lib64/libcupti.so.13",
                "/usr/local/cuda/lib64/libcupti.so.13",
                "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13",
                "libcupti.so.13",
            ]
        );
    }

    #[test]
    fn nothing_installed_still_tries_the_loader() {
        let c = run(&[], None, &[], Some("/usr/bin/app"));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].path, PathBuf::from(CUPTI_SONAME));
    }
}
