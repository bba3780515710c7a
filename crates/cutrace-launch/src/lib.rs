//! Starting a program under cutrace's CUPTI injection library, without the CLI around it: the
//! program looked up as `execvp` will, the environment the injection reads, `LD_PRELOAD`,
//! finding the library, and the trace directory checked before anything runs.
//!
//! Nothing here reads the environment: `PATH`, `LD_PRELOAD`, the user's injection library
//! ([`cutrace_settings::var::INJECT_LIB`]) and the current directory are the caller's to pass, so every function can be tested with any value.

pub mod cache;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use cutrace_settings::{var, Settings};

/// The injection library's file name, installed next to the `cutrace` binary.
pub const INJECT_LIB_NAME: &str = "libcutrace_inject.so";

/// Why the injection library was not found, or the trace directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{var}={} is not a file; point it at {INJECT_LIB_NAME}", .0.display(), var = var::INJECT_LIB)]
    InjectNotFile(PathBuf),
    #[error(
        "{var}={} is not a shared library (no ELF header); point it at {INJECT_LIB_NAME}",
        .0.display(), var = var::INJECT_LIB
    )]
    InjectNotElf(PathBuf),
    #[error(
        "cannot find {INJECT_LIB_NAME} (tried {}); install it next to the cutrace binary or set \
         {var}", .tried.join(", "), var = var::INJECT_LIB
    )]
    InjectMissing { tried: Vec<String> },
    #[error("resolving {}", .path.display())]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "-o {} exists and is {what}: the trace is a directory (one part per process); \
         pass -o a new or existing directory", .dir.display()
    )]
    OutputNotDir { dir: PathBuf, what: &'static str },
    #[error("creating the trace directory {}", .dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    // The cause is part of the sentence (the advice follows it), so it is no `source`.
    #[error(
        "cannot create trace parts in {} ({cause}); choose a directory you can write with -o",
        .dir.display()
    )]
    NotWritable { dir: PathBuf, cause: std::io::Error },
}

fn canonical(p: &Path) -> Result<PathBuf, LaunchError> {
    std::fs::canonicalize(p).map_err(|source| LaunchError::Resolve {
        path: p.to_path_buf(),
        source,
    })
}

/// Finds the injection library: `env_value` (the user's [`var::INJECT_LIB`]), else next to the cutrace binary, else in
/// `../lib` or `../lib/cutrace` beside it. The result is absolute.
pub fn find_inject_lib(
    env_value: Option<OsString>,
    exe: Option<&Path>,
) -> Result<PathBuf, LaunchError> {
    if let Some(p) = env_value.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(LaunchError::InjectNotFile(p));
        }
        if !is_elf(&p) {
            return Err(LaunchError::InjectNotElf(p));
        }
        return canonical(&p);
    }
    let mut tried = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        let uid = cache::euid();
        for cand in [
            dir.join(INJECT_LIB_NAME),
            dir.join("../lib").join(INJECT_LIB_NAME),
            dir.join("../lib/cutrace").join(INJECT_LIB_NAME),
        ] {
            if cand.is_file() {
                // A library someone else could have put there (the binary run from a shared
                // directory) is passed over: loading it runs its code as this user.
                match uid.and_then(|u| cache::others_can_replace(&cand, u)) {
                    None if uid.is_some() => return canonical(&cand),
                    None => tried.push(format!(
                        "{} (whose owner cannot be checked)",
                        cand.display()
                    )),
                    Some((p, why)) => tried.push(format!(
                        "{} (passed over: {} {why})",
                        cand.display(),
                        p.display()
                    )),
                }
                continue;
            }
            tried.push(cand.display().to_string());
        }
    }
    Err(LaunchError::InjectMissing { tried })
}

fn is_elf(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Why a program cannot be started, found before anything is created: the exit status a shell
/// would give (126 found but not runnable, 127 not found) and the message.
#[derive(Debug)]
pub struct CannotRun {
    pub code: i32,
    pub message: String,
}

/// Finds `prog` as `execvp` will: a name with a `/` is a path; any other name is looked up in
/// `path` (`PATH`'s value). The checks `exec` would fail on are made here, so that a failed
/// start leaves no trace directory and says why in the user's terms.
pub fn resolve_program(
    prog: &OsStr,
    path: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, CannotRun> {
    use std::os::unix::fs::PermissionsExt;
    let shown = Path::new(prog).display().to_string();
    let runnable = |p: &Path| -> Result<(), CannotRun> {
        let md = std::fs::metadata(p).map_err(|e| CannotRun {
            code: 127,
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!("{shown}: No such file or directory")
            } else {
                format!("{shown}: {e}")
            },
        })?;
        if md.is_dir() {
            return Err(CannotRun {
                code: 126,
                message: format!("{shown}: a directory, not a program"),
            });
        }
        if md.permissions().mode() & 0o111 == 0 {
            return Err(CannotRun {
                code: 126,
                message: format!(
                    "{shown}: Permission denied: not executable; `chmod +x {shown}`, or run it \
                     through its interpreter (e.g. `python3 {shown}`)"
                ),
            });
        }
        if let Some(interp) = missing_interpreter(p) {
            if interp.starts_with('/') && !Path::new(&interp).exists() {
                return Err(CannotRun {
                    code: 126,
                    message: format!(
                        "{shown}: its interpreter {interp} (the #! line) does not exist; install \
                         it or fix the #! line"
                    ),
                });
            }
        }
        Ok(())
    };
    let bytes = prog.as_bytes();
    if bytes.is_empty() {
        return Err(CannotRun {
            code: 127,
            message: "the program's name is empty".into(),
        });
    }
    if bytes.contains(&b'/') {
        runnable(Path::new(prog))?;
        return Ok(PathBuf::from(prog));
    }
    let mut cannot = None;
    for dir in path
        .map(OsStr::as_bytes)
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin")
        .split(|&b| b == b':')
    {
        // An empty PATH entry means the current directory.
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            PathBuf::from(OsStr::from_bytes(dir))
        };
        let cand = dir.join(prog);
        if cand.is_file() {
            match runnable(&cand) {
                Ok(()) => return Ok(cand),
                // As a shell: the first match that cannot run is the answer if none can.
                Err(e) => {
                    cannot.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = cannot {
        return Err(e);
    }
    let here = cwd.join(prog);
    let message = if here.is_file() {
        format!(
            "{shown}: command not found in PATH; there is a file {shown} here: run it as \
             ./{shown}, or through its interpreter (e.g. `python3 {shown}`)"
        )
    } else {
        format!("{shown}: command not found in PATH")
    };
    Err(CannotRun { code: 127, message })
}

/// Why `exec` of a file that exists failed with ENOENT: its `#!` interpreter is missing.
pub fn missing_interpreter(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interp = String::from_utf8_lossy(line)
        .split_whitespace()
        .next()?
        .to_string();
    Some(interp)
}

/// `p` as it can be pasted into a shell.
pub fn shell_quote(p: &str) -> String {
    let plain = !p.is_empty()
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./-+:,@%=".contains(&b));
    if plain {
        p.to_string()
    } else {
        format!("'{}'", p.replace('\'', "'\\''"))
    }
}

/// A new id for one `cutrace record` run: the wall clock in nanoseconds and the recorder's pid,
/// in hex (`18c1f3a2b4c5d6e7-2f1`). Two runs on one host cannot share it; runs on different
/// hosts are told apart by their parts' host names as well.
pub fn new_run_id() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("{ns:x}-{:x}", std::process::id())
}

/// The environment `record` gives the program: the injection library for CUDA to load, and the
/// settings it reads (`settings.to_env()`). The program's environment should hold these and none
/// of the library's other variables ([`cleared_vars`]).
pub fn injection_env(inject: &Path, settings: &Settings) -> Vec<(String, OsString)> {
    let mut env = vec![(
        "CUDA_INJECTION64_PATH".to_string(),
        inject.as_os_str().to_owned(),
    )];
    env.extend(
        settings
            .to_env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    env
}

/// The injected library's variables that `env` does not set: removed from the program's
/// environment, so one left there from elsewhere (a `CUTRACE_COUNTERS` from an earlier shell)
/// does not turn a plain trace into a profile.
pub fn cleared_vars(env: &[(String, OsString)]) -> Vec<&'static str> {
    var::INJECTION
        .into_iter()
        .filter(|v| !env.iter().any(|(k, _)| k == v))
        .collect()
}

/// `LD_PRELOAD` for the program: the injection library first, then the entries already there
/// (the dynamic loader splits on spaces and colons). `None` when the library's path holds a
/// space or colon, which `LD_PRELOAD` cannot carry.
pub fn preload_value(inject: &Path, existing: Option<&OsStr>) -> Option<OsString> {
    let lib = inject.as_os_str().as_bytes();
    if lib.is_empty() || lib.iter().any(|&b| b == b' ' || b == b':') {
        return None;
    }
    let mut value = lib.to_vec();
    let rest = existing.map(OsStr::as_bytes).unwrap_or_default();
    for entry in rest.split(|&b| b == b' ' || b == b':') {
        // A nested `cutrace record` does not preload the library twice.
        if !entry.is_empty() && entry != lib {
            value.push(b':');
            value.extend_from_slice(entry);
        }
    }
    Some(OsString::from_vec(value))
}

/// Creates (or reuses) the trace directory and checks, before the program starts, that parts
/// can be created in it: a failure found later would only show once the program starts CUDA,
/// perhaps hours into a run.
/// The directory, and whether this call created it.
pub fn prepare_output(dir: &Path) -> Result<(PathBuf, bool), LaunchError> {
    if let Ok(md) = std::fs::symlink_metadata(dir) {
        let what = if md.file_type().is_symlink() && std::fs::metadata(dir).is_err() {
            Some("a link to nothing")
        } else if !dir.is_dir() {
            Some("not a directory")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(LaunchError::OutputNotDir {
                dir: dir.to_path_buf(),
                what,
            });
        }
    }
    let existed = dir.is_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| LaunchError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    let out_dir = canonical(dir)?;
    let probe = out_dir.join(format!(".cutrace-probe-{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match made {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
        }
        Err(e) => {
            if !existed {
                let _ = std::fs::remove_dir(&out_dir);
            }
            return Err(LaunchError::NotWritable {
                dir: out_dir,
                cause: e,
            });
        }
    }
    Ok((out_dir, !existed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_holds_absolute_paths_and_settings() {
        let settings = Settings {
            output_dir: Some("/tmp/t".into()),
            kinds: Some(vec!["kernel".into(), "runtime".into()]),
            buffer_bytes: Some(4 << 20),
            record_cmdline: true,
            run_id: Some(new_run_id()),
            ..Settings::default()
        };
        let env = injection_env(Path::new("/opt/cutrace/libcutrace_inject.so"), &settings);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("CUDA_INJECTION64_PATH").unwrap(),
            "/opt/cutrace/libcutrace_inject.so"
        );
        // The library reads back exactly what was meant.
        let (back, problems) = Settings::from_env(&|k| get(k));
        assert!(problems.is_empty());
        assert_eq!(back, settings);
        let id = back.run_id.unwrap();
        let (ns, pid) = id.split_once('-').unwrap();
        assert!(u64::from_str_radix(ns, 16).unwrap() > 0);
        assert_eq!(u32::from_str_radix(pid, 16).unwrap(), std::process::id());
        // Everything else of the library's is cleared, the counters' and sampling's included.
        let cleared = cleared_vars(&env);
        assert_eq!(cleared.len(), var::INJECTION.len() - 5);
        for v in [var::COUNTERS, var::PM_METRICS, var::DISCARD, var::API] {
            assert!(cleared.contains(&v), "{v}");
        }
        assert!(!cleared.contains(&var::KINDS));
    }

    #[test]
    fn preload_puts_the_library_first_and_keeps_the_rest() {
        let lib = Path::new("/opt/cutrace/libcutrace_inject.so");
        let v = |e: Option<&str>| preload_value(lib, e.map(OsStr::new));
        assert_eq!(v(None).unwrap(), "/opt/cutrace/libcutrace_inject.so");
        assert_eq!(v(Some("")).unwrap(), "/opt/cutrace/libcutrace_inject.so");
        assert_eq!(
            v(Some("libjemalloc.so.2 /x/libfoo.so:/y/libbar.so")).unwrap(),
            "/opt/cutrace/libcutrace_inject.so:libjemalloc.so.2:/x/libfoo.so:/y/libbar.so"
        );
        assert_eq!(
            v(Some("/opt/cutrace/libcutrace_inject.so:/x/libfoo.so")).unwrap(),
            "/opt/cutrace/libcutrace_inject.so:/x/libfoo.so"
        );
        assert!(preload_value(Path::new("/my tools/libcutrace_inject.so"), None).is_none());
        assert!(preload_value(Path::new("/a:b/libcutrace_inject.so"), None).is_none());
    }

    #[test]
    fn inject_lib_is_found_next_to_the_binary_or_refused() {
        let dir = std::env::temp_dir().join(format!("cutrace-rec-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let exe = dir.join("bin/cutrace");
        assert!(find_inject_lib(None, Some(&exe)).is_err());
        std::fs::write(dir.join("bin").join(INJECT_LIB_NAME), b"").unwrap();
        let p = find_inject_lib(None, Some(&exe)).unwrap();
        assert!(p.is_absolute());
        assert!(find_inject_lib(Some("/nonexistent.so".into()), Some(&exe)).is_err());
        // Beside a binary in a directory others can write (not sticky), or written by others
        // itself, the library is passed over, and the error says why.
        use std::os::unix::fs::PermissionsExt;
        let lib = dir.join("bin").join(INJECT_LIB_NAME);
        for (d, f) in [(0o777, 0o644), (0o755, 0o666)] {
            std::fs::set_permissions(dir.join("bin"), std::fs::Permissions::from_mode(d)).unwrap();
            std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(f)).unwrap();
            let e = find_inject_lib(None, Some(&exe)).unwrap_err().to_string();
            assert!(
                e.contains("passed over") && e.contains("can be written by others"),
                "{e}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn paths_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(shell_quote("/tmp/run1"), "/tmp/run1");
        assert_eq!(shell_quote("/tmp/my run"), "'/tmp/my run'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn programs_are_found_as_execvp_finds_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cutrace-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let tool = dir.join("bin/tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", dir.join("bin").display()));
        assert_eq!(
            resolve_program(OsStr::new("tool"), Some(&path), &dir).unwrap(),
            tool
        );
        // An empty PATH entry is the current directory.
        let here = OsString::from("/nonexistent:");
        assert_eq!(
            resolve_program(OsStr::new("tool"), Some(&here), &dir.join("bin")).unwrap(),
            tool
        );
        let e = resolve_program(OsStr::new("tool"), Some(OsStr::new("/nonexistent")), &dir)
            .unwrap_err();
        assert_eq!(e.code, 127);
        assert!(resolve_program(OsStr::new(""), None, &dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
