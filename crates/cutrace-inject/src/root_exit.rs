//! The end of a `cutrace record` run that traced nothing. The library is preloaded into every
//! process of the run, but writes a part only for a process that initialized CUDA; a program
//! that never did (a script whose GPU code did not run, a machine without a driver) would
//! otherwise end in silence with an empty directory. `cutrace record` names the process it
//! becomes ([`var::ROOT_PID`]); at that process's exit, when the output directory holds no more
//! parts than before the run, one line says so with `cutrace doctor`'s hint, and the directory
//! goes if record made it (an empty directory only: `rmdir`, which never follows a link).
//!
//! At load this reads one environment variable and, in the named process alone, registers an
//! exit handler; every other process pays that lookup and nothing else, and prints nothing.

use std::panic::catch_unwind;
use std::path::Path;

use cutrace_settings::var;

// SAFETY (for the linker section): a plain extern "C" function with no arguments, as the
// dynamic loader calls the entries of .init_array.
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

/// Whether this process is the one `cutrace record` became (a forked child inherits the exit
/// handler, not the pid).
fn is_root() -> bool {
    std::env::var(var::ROOT_PID)
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        == Some(std::process::id())
}

extern "C" fn at_load() {
    let _ = catch_unwind(|| {
        if is_root() {
            // SAFETY: registers a plain extern "C" function with no arguments.
            unsafe {
                libc::atexit(at_exit);
            }
        }
    });
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
        eprintln!(
            "cutrace: nothing was traced: no process of this run initialized CUDA with cutrace's \
             injection, so {} {}. If the program uses the GPU, `cutrace doctor` checks the \
             driver, CUPTI and the GPUs here (a program that links CUDA statically, or a \
             container without the driver, is not traced)",
            dir.display(),
            if removed {
                "held no part and was removed"
            } else {
                "holds no new part"
            }
        );
    });
}
