//! Which libcupti `cutrace record` would load, predicted with record's own search
//! (`cutrace_cupti::locate::candidates`) over the files under a root and the caller's
//! environment as that root records it (`/proc/self/environ`).
//!
//! Two inputs of the real search cannot be known before the program runs, and are taken as the
//! common case: the program has loaded no libcupti of its own before CUDA starts, and it is not
//! a Python with nvidia wheels beside it. The last candidate, the bare soname, is resolved the
//! way the dynamic loader would: `LD_LIBRARY_PATH`, then the directories of the loader's cache
//! (`/etc/ld.so.conf.d/*.conf`), then the default directories.

use cutrace_settings::var;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cutrace_cupti::locate::{self, Candidate, SearchInputs, CUPTI_SONAME};

use crate::root::Root;

/// The loader's default directories, after its cache (x86-64 and aarch64 Linux).
pub const LOADER_DEFAULT_DIRS: [&str; 8] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The libcupti record would load, and why it is on the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicted {
    /// As an admin would type it (absolute, not under the root).
    pub path: String,
    /// The search step that found it (`CUDA_HOME`, `/usr/local/cuda`, `LD_LIBRARY_PATH`, ...).
    pub source: String,
}

/// Directories taken from `LD_LIBRARY_PATH` and the loader's cache files together, at most
/// (distinct ones; the default directories come after them whatever the count). A real machine
/// names tens.
pub const LOADER_DIRS_MAX: usize = 1024;
/// `/etc/ld.so.conf.d/*.conf` files read, at most (in name order).
pub const LOADER_CONFS_MAX: usize = 256;

/// The directories the dynamic loader searches for a bare soname, in order, each once:
/// `LD_LIBRARY_PATH`, the directories of `/etc/ld.so.conf.d/*.conf`, then the default ones. Read
/// once per search; taking them is linear in what is read.
#[derive(Debug, Clone, Default)]
pub struct LoaderDirs {
    pub dirs: Vec<String>,
    /// The directories that came from `LD_LIBRARY_PATH` (for naming the step that found a file).
    from_env: HashSet<String>,
    /// What was left out because of [`LOADER_DIRS_MAX`] or [`LOADER_CONFS_MAX`], in words.
    pub left_out: Vec<String>,
}

impl LoaderDirs {
    pub fn read(root: &Root) -> LoaderDirs {
        let mut out = LoaderDirs::default();
        let mut seen: HashSet<String> = HashSet::new();
        // A distinct directory met past the cap: the list is cut.
        let mut cut = false;
        let mut take = |out: &mut LoaderDirs, d: &str, env: bool| -> bool {
            if !seen.contains(d) {
                if out.dirs.len() == LOADER_DIRS_MAX {
                    return false;
                }
                seen.insert(d.to_string());
                out.dirs.push(d.to_string());
                if env {
                    out.from_env.insert(d.to_string());
                }
            }
            true
        };
        let ld_path = env_var(root, "LD_LIBRARY_PATH").unwrap_or_default();
        for d in ld_path.split(':').filter(|d| !d.is_empty()) {
            if !take(&mut out, d, true) {
                cut = true;
                break;
            }
        }
        let confs: Vec<String> = root
            .list("/etc/ld.so.conf.d")
            .into_iter()
            .filter(|c| c.ends_with(".conf"))
            .collect();
        for conf in confs.iter().take(LOADER_CONFS_MAX) {
            if cut {
                break;
            }
            let text = root
                .read(&format!("/etc/ld.so.conf.d/{conf}"))
                .unwrap_or_default();
            for l in text.lines().map(str::trim).filter(|l| l.starts_with('/')) {
                if !take(&mut out, l, false) {
                    cut = true;
                    break;
                }
            }
        }
        if cut {
            out.left_out.push(format!(
                "LD_LIBRARY_PATH and /etc/ld.so.conf.d name more than {LOADER_DIRS_MAX} directories: only the first {LOADER_DIRS_MAX} (and the default ones) are searched"
            ));
        }
        if confs.len() > LOADER_CONFS_MAX && !cut {
            out.left_out.push(format!(
                "{} .conf files in /etc/ld.so.conf.d: only the first {LOADER_CONFS_MAX} are read",
                confs.len()
            ));
        }
        for d in LOADER_DEFAULT_DIRS {
            if seen.insert(d.to_string()) {
                out.dirs.push(d.to_string());
            }
        }
        out
    }
}

/// One prediction of `record`'s search over a root: the loader's directories read once, for
/// [`Search::places_searched`], [`Search::record_would_load`] and [`Search::other_sonames`].
#[derive(Debug, Clone)]
pub struct Search<'r> {
    root: &'r Root,
    pub loader: LoaderDirs,
}

impl<'r> Search<'r> {
    pub fn new(root: &'r Root) -> Search<'r> {
        Search {
            root,
            loader: LoaderDirs::read(root),
        }
    }

    /// The directories the search looked in, in order (for "nothing found").
    pub fn places_searched(&self) -> Vec<String> {
        let env = |k: &str| env_var(self.root, k);
        let mut out = Vec::new();
        if let Some(p) = env(var::CUPTI_LIB).filter(|s| !s.is_empty()) {
            out.push(p);
        }
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            if let Some(base) = env(var).filter(|s| !s.is_empty()) {
                for sub in locate::CUDA_HOME_SUBDIRS {
                    out.push(format!("{}/{sub}", base.trim_end_matches('/')));
                }
            }
        }
        for base in locate::TOOLKIT_ROOTS {
            for sub in locate::TOOLKIT_SUBDIRS {
                out.push(format!("{base}/{sub}"));
            }
        }
        out.extend(self.loader.dirs.iter().cloned());
        out
    }

    /// The libcupti `cutrace record` would load on the machine under the root, if any.
    pub fn record_would_load(&self) -> Option<Predicted> {
        let root = self.root;
        for c in candidates(root) {
            let path = c.path.display().to_string();
            if c.path.is_absolute() {
                // An explicit choice of libcupti is tried even when absent (record would fail on
                // it).
                if root.exists(&path) || c.source == var::CUPTI_LIB {
                    return Some(Predicted {
                        path,
                        source: c.source.to_string(),
                    });
                }
                continue;
            }
            // A bare soname: what the dynamic loader would resolve it to.
            for dir in &self.loader.dirs {
                let p = format!("{}/{path}", dir.trim_end_matches('/'));
                if root.exists(&p) {
                    let from_env = self.loader.from_env.contains(dir)
                        || self
                            .loader
                            .from_env
                            .iter()
                            .any(|d| d.trim_end_matches('/') == dir);
                    return Some(Predicted {
                        path: p,
                        source: if from_env {
                            "LD_LIBRARY_PATH"
                        } else {
                            "dynamic loader search (ldconfig)"
                        }
                        .to_string(),
                    });
                }
            }
        }
        None
    }

    /// libcupti files of another soname (`libcupti.so.12`) in the usual places: record cannot
    /// use them, but an admin who installed one should hear why it is not taken.
    pub fn other_sonames(&self) -> Vec<String> {
        let toolkit = locate::TOOLKIT_ROOTS.iter().flat_map(|base| {
            locate::TOOLKIT_SUBDIRS
                .iter()
                .map(move |sub| format!("{base}/{sub}"))
        });
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for d in self.loader.dirs.iter().cloned().chain(toolkit) {
            for n in self.root.list(&d) {
                if n.starts_with("libcupti.so.") && n != CUPTI_SONAME {
                    let p = format!("{}/{n}", d.trim_end_matches('/'));
                    if seen.insert(p.clone()) {
                        out.push(p);
                    }
                }
            }
        }
        out
    }
}

/// The directories the search looked in, in order (for "nothing found").
pub fn places_searched(root: &Root) -> Vec<String> {
    Search::new(root).places_searched()
}

/// A variable of the caller's environment, from `/proc/self/environ` under the root.
pub fn env_var(root: &Root, key: &str) -> Option<String> {
    let raw = root.read_bytes("/proc/self/environ")?;
    raw.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn candidates(root: &Root) -> Vec<Candidate> {
    let env = |k: &str| env_var(root, k);
    let exists = |p: &Path| root.exists(&p.display().to_string());
    let list_dir = |p: &Path| -> Vec<PathBuf> {
        root.list(&p.display().to_string())
            .into_iter()
            .map(|n| p.join(n))
            .collect()
    };
    locate::candidates(&SearchInputs {
        env: &env,
        // The program's own mappings are unknown here: assume it loaded no libcupti.
        maps: Some(""),
        exe: None,
        exists: &exists,
        list_dir: &list_dir,
        is_loaded: &|_| false,
    })
}

/// The libcupti `cutrace record` would load on the machine under `root`, if any.
pub fn record_would_load(root: &Root) -> Option<Predicted> {
    Search::new(root).record_would_load()
}

/// libcupti files of another soname (`libcupti.so.12`) in the usual places (see
/// [`Search::other_sonames`]).
pub fn other_sonames(root: &Root) -> Vec<String> {
    Search::new(root).other_sonames()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(PathBuf);

    impl Tree {
        fn new(files: &[(&str, &str)]) -> Tree {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let base = std::env::temp_dir()
                .join(format!("cutrace-cupti-search-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            for (p, text) in files {
                let full = base.join(p.trim_start_matches('/'));
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(full, text).unwrap();
            }
            std::fs::create_dir_all(&base).unwrap();
            Tree(base)
        }
        fn root(&self) -> Root {
            Root::new(&self.0)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn honours_cutrace_cupti_lib_and_cuda_home_like_record() {
        let t = Tree::new(&[
            (
                "/proc/self/environ",
                "CUDA_HOME=/opt/cuda\0LD_LIBRARY_PATH=/usr/local/cuda/lib64\0",
            ),
            ("/opt/cuda/lib64/libcupti.so.13", ""),
            ("/usr/local/cuda/lib64/libcupti.so.13", ""),
        ]);
        let p = record_would_load(&t.root()).unwrap();
        assert_eq!(p.path, "/opt/cuda/lib64/libcupti.so.13");
        assert_eq!(p.source, "CUDA_HOME");

        let t = Tree::new(&[
            (
                "/proc/self/environ",
                concat!(
                    cutrace_settings::cupti_lib_var!(),
                    "=/x/libcupti.so.13\0CUDA_HOME=/opt/cuda\0"
                ),
            ),
            ("/opt/cuda/lib64/libcupti.so.13", ""),
        ]);
        let p = record_would_load(&t.root()).unwrap();
        assert_eq!(
            (p.path.as_str(), p.source.as_str()),
            ("/x/libcupti.so.13", var::CUPTI_LIB)
        );
    }

    #[test]
    fn the_bare_soname_resolves_through_ld_library_path_then_the_cache() {
        let t = Tree::new(&[
            ("/proc/self/environ", "LD_LIBRARY_PATH=/venv/lib\0"),
            ("/venv/lib/libcupti.so.13", ""),
            ("/etc/ld.so.conf.d/cuda.conf", "/opt/c/lib\n"),
            ("/opt/c/lib/libcupti.so.13", ""),
        ]);
        let p = record_would_load(&t.root()).unwrap();
        assert_eq!(
            (p.path.as_str(), p.source.as_str()),
            ("/venv/lib/libcupti.so.13", "LD_LIBRARY_PATH")
        );

        let t = Tree::new(&[
            ("/etc/ld.so.conf.d/cuda.conf", "# cuda\n/opt/c/lib\n"),
            ("/opt/c/lib/libcupti.so.13", ""),
            ("/usr/lib/x86_64-linux-gnu/libcupti.so.12", ""),
        ]);
        let root = t.root();
        let p = record_would_load(&root).unwrap();
        assert_eq!(p.path, "/opt/c/lib/libcupti.so.13");
        assert_eq!(
            other_sonames(&root),
            vec!["/usr/lib/x86_64-linux-gnu/libcupti.so.12"]
        );
    }

    #[test]
    fn only_another_soname_is_not_a_find() {
        let t = Tree::new(&[("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12", "")]);
        assert_eq!(record_would_load(&t.root()), None);
        assert!(places_searched(&t.root())
            .iter()
            .any(|p| p == "/usr/lib/x86_64-linux-gnu"));
    }
}
