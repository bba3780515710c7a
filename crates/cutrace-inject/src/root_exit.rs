//! The end of a `cutrace record` run that traced nothing. The library is preloaded into every
//! process of the run, but writes a part only for a process that initialized CUDA; a program
//! that never did (a script whose GPU code did not run, a machine without a driver) would
//! otherwise end in silence with an empty directory. `cutrace record` names the process it
//! becomes ([`var::ROOT_PID`]); at that process's exit, when the output directory holds no more
//! parts than before the run, one line says so with `cutrace doctor`'s hint, and the directory
//! goes if record made it (an empty directory only: `rmdir`, which never follows a link).
//!
//! At load this reads one environment variable and, in the named process alone (its pid in its
//! pid namespace; never a setuid or otherwise privileged process), registers an exit handler;
//! every other process pays that lookup and nothing else, and prints nothing.

use std::panic::catch_unwind;
use std::path::Path;

use cutrace_settings::var;

// SAFETY (for the linker section): a plain extern "C" function with no arguments, as the
// dynamic loader calls the entries of .init_array.
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

/// Whether this process is the one `cutrace record` became: its pid and pid namespace
/// ([`var::ROOT_PID`] holds `PID NAMESPACE`). A forked child inherits the exit handler, not the
/// pid; a process in a namespace of its own may have the pid, not the namespace.
fn is_root() -> bool {
    let Ok(v) = std::env::var(var::ROOT_PID) else {
        return false;
    };
    let (pid, ns) = v.split_once(' ').unwrap_or((v.as_str(), ""));
    pid.parse::<u32>().ok() == Some(std::process::id()) && ns == cutrace_settings::pid_namespace()
}

/// A process whose privileges are not its user's (setuid, setgid, capabilities: the loader's
/// secure mode) trusts nothing of its environment, so does nothing here.
fn secure_mode() -> bool {
    // SAFETY: getauxval reads the process's auxiliary vector; AT_SECURE is always defined.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// `s` with its control characters written as `\u{1b}`: a directory's name reaches a terminal.
fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

extern "C" fn at_load() {
    let _ = catch_unwind(|| {
        if !secure_mode() && is_root() {
            // SAFETY: registers a plain extern "C" function with no arguments.
            unsafe {
                libc::atexit(at_exit);
            }
        }
    });
}

/// Writes `line` to stderr with SIGPIPE ignored for the while: a stderr whose reader has gone
/// (`… 2>&1 | head`) must not turn the program's exit status into a death by SIGPIPE.
fn say(line: &str) {
    use std::io::Write as _;
    // SAFETY: sigaction with a valid, zeroed struct; the old action is restored after.
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, &ignore, &mut old) != 0 {
            return;
        }
        let _ = std::io::stderr().write_all(line.as_bytes());
        libc::sigaction(libc::SIGPIPE, &old, std::ptr::null_mut());
    }
}

/// The parts (`*.cutrace`) in `dir`.
fn parts_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "cutrace"))
                .count()
        })
        .unwrap_or(0)
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if !is_root() {
            return;
        }
        let Some(dir) = std::env::var_os(var::OUTPUT_DIR) else {
            return;
        };
        let dir = Path::new(&dir);
        let before = std::env::var(var::ROOT_PARTS)
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        if parts_in(dir) > before {
            return;
        }
        let created = std::env::var(var::ROOT_CREATED).as_deref() == Ok("1");
        let removed = created && std::fs::remove_dir(dir).is_ok();
        let line = format!(
            "cutrace: nothing was traced: no process of this run initialized CUDA with cutrace's \
             injection, so {} {}. If the program uses the GPU, `cutrace doctor` checks the \
             driver, CUPTI and the GPUs here (a program that links CUDA statically, or a \
             container without the driver, is not traced)\n",
            escaped(&dir.to_string_lossy()),
            if removed {
                "held no part and was removed"
            } else {
                "holds no new part"
            }
        );
        say(&line);
    });
}
