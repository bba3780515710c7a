//! The CUPTI entry points the injection library exports when `cutrace record` preloads it: a
//! CUPTI tool started inside the program (torch.profiler's Kineto) gets libcupti's own answers,
//! the program's output and exit status do not change, and a conflict with cutrace is named in
//! one line. The program is tests/fake_cupti/host.c, its tool tool.c, both over the fake
//! libcupti; no GPU needed. Tests that need them skip themselves, loudly, without a C compiler.

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

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cutrace-interpose-{name}-{}", std::process::id()));
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
        .env("CUTRACE_OUTPUT_DIR", dir)
        .env_remove("CUTRACE_CUPTI_LIB")
        .env_remove("CUTRACE_SUBSCRIBE")
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
/// buffer callbacks takes CUPTI's records away from cutrace: forwarded, said once, noted in the
/// trace. cutrace's own registration (through libcupti's handle) is not mistaken for it.
#[test]
fn taking_over_the_activity_buffers_is_said_once() {
    let Some(p) = programs() else { return };
    let dir = out_dir("takeover");
    let o = host(
        &Run {
            scope: "local",
            steps: "isrr",
            preload: true,
            env: &[("CUTRACE_SUBSCRIBE", "0")],
        },
        Some(&p.tool),
        &dir,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(
        stdout(&o),
        "init 1\nsubscribe 0\nregister 0\nregister 0\n\
         libcupti saw 1 cuptiSubscribe, 3 cuptiActivityRegisterCallbacks, 0 cuptiUnsubscribe\n",
        "{err}"
    );
    let lines = cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("registered its own activity buffer callbacks")
            && lines[0].contains("cutrace's trace ends here")
            && lines[0].contains("Fix:"),
        "{}",
        lines[0]
    );
    let (raw, t, _) = the_part(&dir);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert!(contains(
        &raw,
        "replaced cutrace's activity buffer callbacks at CUPTI time"
    ));
    assert!(
        t.meta.notes.iter().any(|n| n
            .text
            .contains("replaced cutrace's activity buffer callbacks")),
        "{:?}",
        t.meta.notes
    );
    // Once its buffers are taken cutrace stops asking CUPTI to flush them: no records here.
    assert!(t.kernels.is_empty());
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
