//! The CUPTI entry points the injection library exports when `cutrace record` preloads it: a
//! CUPTI tool started inside the program (torch.profiler's Kineto) gets libcupti's own answers,
//! the program's output and exit status do not change, and a conflict with cutrace is named in
//! one line. The program is tests/fake_cupti/host.c, its tool tool.c, both over the fake
//! libcupti; no GPU needed. Tests that need them skip themselves, loudly, without a C compiler.

use cutrace_settings::var;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod util;

use util::{cutrace_lines, inject_lib, programs};

struct Run<'a> {
    /// `local` or `global`: how the host dlopens the tool library.
    scope: &'a str,
    steps: &'a str,
    preload: bool,
    env: &'a [(&'a str, &'a str)],
}

/// A path for the trace that does not exist yet, in a temporary directory removed on drop.
fn out_dir(name: &str) -> cutrace_testkit::Dir {
    let d = cutrace_testkit::Dir::new(&format!("interpose-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn host(r: &Run<'_>, tool: Option<&Path>, dir: &Path) -> Output {
    let p = programs().expect("checked by the caller");
    let inject = inject_lib();
    let mut c = Command::new(&p.host);
    c.arg(tool.map(Path::as_os_str).unwrap_or("-".as_ref()))
        .args([r.scope, r.steps])
        .env("CUDA_INJECTION64_PATH", &inject)
        .env(var::OUTPUT_DIR, dir)
        .env_remove(var::CUPTI_LIB)
        .env_remove(var::SUBSCRIBE)
        .env_remove("LD_PRELOAD")
        .env("FAKE_CUPTI_MODE", "0");
    if r.preload {
        c.env("LD_PRELOAD", &inject);
    }
    for (k, v) in r.env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The one part the run wrote, read back: (raw bytes, trace, header).
fn the_part(
    dir: &Path,
) -> (
    Vec<u8>,
    cutrace_trace::model::Trace,
    cutrace_trace::native::Header,
) {
    let parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    let (t, h) = cutrace_trace::native::read_file(&parts[0], &mut |_, _| {}).unwrap();
    (std::fs::read(&parts[0]).unwrap(), t, h)
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The torch.profiler case: cutrace subscribed first (at cuInit), then the program's tool
/// subscribes, twice. Whether the tool's library was loaded RTLD_LOCAL (libcupti only in its
/// local scope, as Python loads torch) or RTLD_GLOBAL, its calls reach our functions, which hand
/// back libcupti's CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) unchanged and say so once.
#[test]
fn a_second_subscriber_gets_cuptis_answer_and_one_line() {
    let Some(p) = programs() else { return };
    for scope in ["local", "global"] {
        let dir = out_dir(&format!("sub-{scope}"));
        let o = host(
            &Run {
                scope,
                steps: "iss",
                preload: true,
                env: &[],
            },
            Some(&p.tool),
            &dir,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{scope}: {err}");
        assert_eq!(
            stdout(&o),
            "init 1\nsubscribe 39\nsubscribe 39\n\
             libcupti saw 3 cuptiSubscribe, 1 cuptiActivityRegisterCallbacks, 0 cuptiUnsubscribe\n",
            "{scope}: {err}"
        );
        let lines = cutrace_lines(&o.stderr);
        assert_eq!(lines.len(), 1, "{scope}: {lines:?}");
        for want in [
            "another CUPTI tool",
            "torch.profiler",
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
            "cutrace's trace is unaffected",
            "Fix: to use that tool, run the program without `cutrace record`",
        ] {
            assert!(
                lines[0].contains(want),
                "{scope}: no '{want}' in {}",
                lines[0]
            );
        }
        let (raw, t, h) = the_part(&dir);
        assert!(t.meta.complete, "{scope}: {:?}", t.meta.incomplete_reason);
        // The libcupti the program had loaded is the one cutrace used.
        assert_eq!(
            h.cupti_path.as_deref(),
            Some(p.fake_cupti.to_str().unwrap())
        );
        assert!(
            h.notes.iter().any(|n| n.contains("already loaded")),
            "{:?}",
            h.notes
        );
        // The conflict came after the header: its note is in a META chunk.
        assert!(
            contains(
                &raw,
                "tried to subscribe and got CUPTI_ERROR_MULTIPLE_SUBSCRIBERS"
            ),
            "{scope}: the conflict note is not in the part"
        );
        // And the reader hands it on (for `cutrace report` and `convert`), after the header's,
        // tagged with the process.
        let notes: Vec<&str> = t.meta.notes.iter().map(|n| n.text.as_str()).collect();
        assert!(
            notes[0].contains("already loaded")
                && notes.last().is_some_and(|n| n.contains(
                    "tried to subscribe and got CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                ))
                && notes
                    .iter()
                    .filter(|n| n.contains("tried to subscribe"))
                    .count()
                    == 1,
            "{scope}: {notes:?}"
        );
        assert!(t
            .meta
            .notes
            .iter()
            .all(|n| n.pid == h.pid && n.pid.is_some()));
        assert_eq!(
            t.kernels.len(),
            3,
            "{scope}: cutrace's own records are intact"
        );
    }
}

/// Without the preload (`cutrace record --no-preload`) the same program gets the same answers and
/// no cutrace line: the tool fails silently, which is what the interposer is for.
#[test]
fn without_the_preload_the_conflict_is_silent() {
    let Some(p) = programs() else { return };
    let dir = out_dir("nopreload");
    let o = host(
        &Run {
            scope: "local",
            steps: "iss",
            preload: false,
            env: &[],
        },
        Some(&p.tool),
        &dir,
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        stdout(&o),
        "init 1\nsubscribe 39\nsubscribe 39\n\
         libcupti saw 3 cuptiSubscribe, 1 cuptiActivityRegisterCallbacks, 0 cuptiUnsubscribe\n"
    );
    assert!(
        cutrace_lines(&o.stderr).is_empty(),
        "{:?}",
        cutrace_lines(&o.stderr)
    );
}

/// When cutrace does not hold CUPTI (the injection never started), the tool's calls are only
/// forwarded: its own second subscribe still gets 39 from libcupti, and nothing is said.
#[test]
fn without_cutrace_holding_cupti_nothing_is_said() {
    let Some(p) = programs() else { return };
    let dir = out_dir("alone");
    let o = host(
        &Run {
            scope: "local",
            steps: "ssr",
            preload: true,
            env: &[],
        },
        Some(&p.tool),
        &dir,
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        stdout(&o),
        "subscribe 0\nsubscribe 39\nregister 0\n\
         libcupti saw 2 cuptiSubscribe, 1 cuptiActivityRegisterCallbacks, 0 cuptiUnsubscribe\n"
    );
    assert!(
        cutrace_lines(&o.stderr).is_empty(),
        "{:?}",
        cutrace_lines(&o.stderr)
    );
    assert!(!dir.exists(), "no injection, no trace");
}

/// A tool that gets the slot (cutrace did not subscribe) and then registers its own activity
/// buffer callbacks takes CUPTI's records away from cutrace. Before forwarding that call cutrace
/// turns off every record it enabled (whole kinds, and in `--api lean` the callback ids it
/// enabled one by one) and has CUPTI flush what it holds to cutrace's callbacks, so the records
/// made before the takeover are in the trace and the tool gets none of cutrace's. Then it
/// forwards, says so once, and notes it in the trace. cutrace's own registration (through
/// libcupti's handle) is not mistaken for it, and the tool's second registration hands nothing
/// over again.
#[test]
fn taking_over_the_activity_buffers_is_said_once() {
    let Some(p) = programs() else { return };
    for api in ["all", "lean"] {
        let dir = out_dir(&format!("takeover-{api}"));
        let log_dir = cutrace_testkit::Dir::new(&format!("interpose-takeover-{api}-log"));
        let log = log_dir.path("cupti.log");
        let o = host(
            &Run {
                scope: "local",
                steps: "isrr",
                preload: true,
                env: &[
                    (var::SUBSCRIBE, "0"),
                    (var::API, api),
                    ("FAKE_CUPTI_LOG", log.to_str().unwrap()),
                ],
            },
            Some(&p.tool),
            &dir,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{api}: {err}");
        assert_eq!(
            stdout(&o),
            "init 1\nsubscribe 0\nregister 0\nregister 0\n\
             libcupti saw 1 cuptiSubscribe, 3 cuptiActivityRegisterCallbacks, 0 cuptiUnsubscribe\n",
            "{api}: {err}"
        );
        let lines = cutrace_lines(&o.stderr);
        assert_eq!(lines.len(), 1, "{api}: {lines:?}");
        assert!(
            lines[0].contains("registered its own activity buffer callbacks")
                && lines[0].contains("cutrace's trace ends here")
                && lines[0].contains("flushed what it had recorded so far into its trace")
                && lines[0].contains("Fix:"),
            "{api}: {}",
            lines[0]
        );

        // What libcupti saw, in order.
        let text = std::fs::read_to_string(&log).unwrap();
        // The writer's periodic flushes (flag 0) come at any time; they are not at issue.
        let calls: Vec<&str> = text.lines().filter(|c| *c != "flush 0").collect();
        let at = |l: &str| calls.iter().position(|c| *c == l);
        let foreign = at("register 2").unwrap_or_else(|| panic!("{api}: {calls:?}"));
        assert_eq!(
            at("register 1"),
            Some(0),
            "{api}: cutrace's own first: {calls:?}"
        );
        let (before, after) = calls.split_at(foreign);
        // What cutrace turned on, as the call that turns it off.
        let mut want: Vec<String> = before
            .iter()
            .filter_map(|c| match c.strip_prefix("enable ") {
                Some(k) => Some(format!("disable {k}")),
                None => c
                    .strip_suffix(" 1")
                    .filter(|c| c.contains("_api "))
                    .map(|c| format!("{c} 0")),
            })
            .collect();
        let is_off =
            |c: &str| c.starts_with("disable ") || c.contains("_api ") && c.ends_with(" 0");
        let mut off: Vec<String> = before
            .iter()
            .filter(|c| is_off(c))
            .map(|c| c.to_string())
            .collect();
        // All of them turned off together, right before the flush that ends `before`.
        let n = before.len();
        assert!(
            n > off.len() && before[n - 1 - off.len()..n - 1].iter().all(|c| is_off(c)),
            "{api}: {calls:?}"
        );
        off.sort();
        want.sort();
        assert_eq!(
            off, want,
            "{api}: every record cutrace enabled is off: {calls:?}"
        );
        assert!(
            off.iter().any(|w| w == "disable 10") && off.iter().any(|w| w == "disable 8"),
            "{api}: kernels and devices among them: {calls:?}"
        );
        if api == "lean" {
            assert!(
                off.iter().any(|w| w == "runtime_api 211 0")
                    && off.iter().any(|w| w == "driver_api 307 0"),
                "{api}: the per-callback-id records among them: {calls:?}"
            );
        } else {
            assert!(!calls.iter().any(|c| c.contains("_api ")), "{calls:?}");
        }
        // Then the forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1), the last call before the
        // tool's registration.
        assert_eq!(before.last(), Some(&"flush 1"), "{api}: {calls:?}");
        // After it: the tool's two registrations, and nothing of cutrace's (no flush at exit,
        // nothing turned on or off again).
        assert_eq!(after, ["register 2", "register 3"], "{api}: {calls:?}");

        let (raw, t, _) = the_part(&dir);
        assert!(t.meta.complete, "{api}: {:?}", t.meta.incomplete_reason);
        assert!(contains(
            &raw,
            "replaced cutrace's activity buffer callbacks at CUPTI time"
        ));
        assert!(
            t.meta.notes.iter().any(|n| n
                .text
                .contains("replaced cutrace's activity buffer callbacks")
                && n.text.contains("flushed the records CUPTI held for it")),
            "{api}: {:?}",
            t.meta.notes
        );
        // The records CUPTI held for cutrace at the takeover (the fake delivers its one buffer
        // at the first flush, here the forced one) reached cutrace's trace.
        assert_eq!(
            t.kernels.len(),
            3,
            "{api}: records before the takeover are kept"
        );
    }
}

/// A start that fails after cutrace subscribed (its cuptiActivityRegisterCallbacks refused, or
/// a fatal cuptiActivityEnable) gives the subscriber slot back: the program's own tool then
/// subscribes and registers as it would without cutrace. The one cutrace line says it runs
/// untraced and that the slot was given back; no conflict line, no trace.
#[test]
fn a_start_that_fails_after_subscribing_gives_the_slot_back() {
    let Some(p) = programs() else { return };
    for (mode, refusal) in [
        (
            "3",
            "cuptiActivityRegisterCallbacks returned CUPTI_ERROR_UNKNOWN",
        ),
        (
            "4",
            "cuptiActivityEnable returned CUPTI_ERROR_NOT_INITIALIZED",
        ),
    ] {
        let dir = out_dir(&format!("failed-start-{mode}"));
        let o = host(
            &Run {
                scope: "local",
                steps: "isr",
                preload: true,
                env: &[("FAKE_CUPTI_MODE", mode)],
            },
            Some(&p.tool),
            &dir,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "mode {mode}: {err}");
        assert_eq!(
            stdout(&o),
            "init 1\nsubscribe 0\nregister 0\n\
             libcupti saw 2 cuptiSubscribe, 2 cuptiActivityRegisterCallbacks, 1 cuptiUnsubscribe\n",
            "mode {mode}: {err}"
        );
        let lines = cutrace_lines(&o.stderr);
        assert_eq!(lines.len(), 1, "mode {mode}: {lines:?}");
        for want in [
            "runs untraced",
            refusal,
            "cutrace gave its CUPTI subscription back",
        ] {
            assert!(
                lines[0].contains(want),
                "mode {mode}: no '{want}' in {}",
                lines[0]
            );
        }
        assert!(!dir.exists(), "mode {mode}: no trace when untraced");
    }
}

/// If CUPTI will not take the slot back (cuptiUnsubscribe fails), cutrace says so, and the
/// program's tool, refused, is told why: cutrace holds CUPTI though it does not trace.
#[test]
fn a_slot_that_cannot_be_given_back_is_named() {
    let Some(p) = programs() else { return };
    let dir = out_dir("failed-release");
    let o = host(
        &Run {
            scope: "local",
            steps: "is",
            preload: true,
            env: &[("FAKE_CUPTI_MODE", "5")],
        },
        Some(&p.tool),
        &dir,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(
        stdout(&o),
        "init 1\nsubscribe 39\n\
         libcupti saw 2 cuptiSubscribe, 1 cuptiActivityRegisterCallbacks, 1 cuptiUnsubscribe\n",
        "{err}"
    );
    let lines = cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("runs untraced")
            && lines[0].contains("could not give its CUPTI subscription back"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("while cutrace holds CUPTI")
            && lines[1].contains("cutrace is not tracing either"),
        "{}",
        lines[1]
    );
}

/// `cuptiSubscribe` found in the global scope of a process with no libcupti at all resolves to
/// nothing but our own function: it answers CUPTI_ERROR_NOT_INITIALIZED (15) instead of calling
/// itself.
#[test]
fn with_no_libcupti_loaded_the_answer_is_not_initialized() {
    let Some(_) = programs() else { return };
    let dir = out_dir("bare");
    let o = host(
        &Run {
            scope: "local",
            steps: "b",
            preload: true,
            env: &[],
        },
        None,
        &dir,
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(stdout(&o), "bare subscribe 15\n");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every process `cutrace record` starts carries the preload, most of them never touching CUDA:
/// their output, error output and exit status are exactly their own. Needs no C compiler.
#[test]
fn programs_without_cuda_are_untouched_by_the_preload() {
    let inject = inject_lib();
    let o = Command::new("sh")
        .args(["-c", "echo out; echo err >&2; exit 4"])
        .env("LD_PRELOAD", &inject)
        .env("CUDA_INJECTION64_PATH", &inject)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(stdout(&o), "out\n");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "err\n");
    let o = Command::new("true")
        .env("LD_PRELOAD", &inject)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
}

/// A child forked (without exec) from a traced process inherits cutrace's subscription, and
/// cutrace records nothing there: a tool that subscribes in the child is told that, not that
/// "cutrace is tracing". The parent's trace is still written, complete.
#[test]
fn a_forked_child_is_told_the_slot_is_the_parents() {
    let Some(p) = programs() else { return };
    let dir = out_dir("forked");
    let o = host(
        &Run {
            scope: "local",
            steps: "ifs",
            preload: true,
            env: &[],
        },
        Some(&p.tool),
        &dir,
    );
    assert_eq!(o.status.code(), Some(3));
    let out = stdout(&o);
    assert!(out.starts_with("init 1\nsubscribe 39\n"), "{out}");
    assert!(out.contains("child exited 3\n"), "{out}");
    let lines = cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("forked from a traced one"),
        "{}",
        lines[0]
    );
    assert!(!lines[0].contains("is tracing"), "{}", lines[0]);
    let (_, t, _) = the_part(&dir);
    assert!(t.meta.complete, "the parent's trace is complete");
}
