//! What the text report says around its numbers, on small hand-made traces whose answers are
//! known: copies inside idle gaps, the requested window, a window outside the trace, shared
//! correlation ids, a trace without API calls, the JSON schema version.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A Kineto trace file `name` of these events, in a temporary directory removed with it.
struct Trace {
    path: PathBuf,
    _dir: cutrace_testkit::Dir,
}

impl std::ops::Deref for Trace {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.path
    }
}

fn trace(name: &str, events: &str) -> Trace {
    let dir = cutrace_testkit::Dir::new("report-text");
    let p = dir.join(name);
    std::fs::write(&p, format!(r#"{{"traceEvents":[{events}]}}"#)).unwrap();
    Trace { path: p, _dir: dir }
}

/// The report's long form (`--wide`): the sentences these tests read on one line each; the
/// 120-column form is the same text wrapped (crates/cutrace/tests/golden.rs checks its width).
fn report(p: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("report")
        .arg("--wide")
        .arg(p)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

const KERNEL: &str = r#"{"ph":"X","cat":"kernel","name":"NAME","pid":0,"tid":7,"ts":TS,"dur":DUR,"args":{"device":0,"stream":7,"correlation":CORR}}"#;
const LAUNCH: &str = r#"{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":TS,"dur":1,"args":{"correlation":CORR}}"#;

fn ev(t: &str, name: &str, ts: u64, dur: u64, corr: u64) -> String {
    t.replace("NAME", name)
        .replace("TS", &ts.to_string())
        .replace("DUR", &dur.to_string())
        .replace("CORR", &corr.to_string())
}

#[test]
fn a_gap_filled_by_a_copy_says_so() {
    let copy = r#"{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":7,"ts":120,"dur":60,"args":{"device":0,"stream":7,"correlation":2,"bytes":8}}"#;
    let p = trace(
        "g.json",
        &[
            ev(KERNEL, "a", 100, 10, 1),
            copy.into(),
            ev(KERNEL, "b", 190, 10, 3),
        ]
        .join(","),
    );
    let t = text(&report(&p, &[]));
    // Times are offsets from the trace's start (100 µs), to its resolution (1 µs).
    assert!(t.contains("80 µs at +10 µs"), "{t}");
    assert!(t.contains("[copies ran 60 µs of it]"), "{t}");
    assert!(t.contains("resolution 1 µs"), "{t}");
    assert!(
        t.contains("idle: 80 µs = 80.0 % in 1 gap\n"),
        "singular: {t}"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&report(&p, &["--format", "json"]).stdout).unwrap();
    assert_eq!(j["schema_version"], 1);
    assert_eq!(j["devices"][0]["largest_gaps"][0]["copy_ns"], 60_000);
}

#[test]
fn a_requested_window_gets_its_own_percentages_and_one_outside_the_trace_a_warning() {
    let p = trace(
        "w.json",
        &[
            ev(LAUNCH, "", 1, 1, 1),
            ev(KERNEL, "a", 100, 10, 1),
            ev(LAUNCH, "", 150, 1, 2),
            ev(KERNEL, "b", 190, 10, 2),
            ev(LAUNCH, "", 400, 1, 3),
        ]
        .join(","),
    );
    // The trace runs 1 → 401 µs; kernels 100–110 and 190–200. Window 50 → 350 µs.
    let t = text(&report(&p, &["--from", "49us", "--to", "349us"]));
    assert!(
        t.contains("of the requested window (+49 µs → +349 µs, 300 µs, clipped to the trace): busy 6.7 %, idle 93.3 %"),
        "{t}"
    );
    // Without a window: the idle time before the first kernel and after the last is named.
    let t = text(&report(&p, &[]));
    assert!(
        t.contains("99 µs before the first kernel (from the trace's first record) and 201 µs after the last"),
        "{t}"
    );
    // A plain number is absolute on the trace's clock: far before this trace.
    let o = report(&p, &["--from", "1", "--to", "2"]);
    let t = text(&o);
    assert!(
        t.contains("WARNING: the time window lies outside the trace"),
        "{t}"
    );
    let o = report(&p, &["--from", "1", "--to", "2", "--format", "json"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("lies outside the trace"));
    let o = report(&p, &["--from", "49us"]);
    assert!(!text(&o).contains("WARNING"));
}

#[test]
fn shared_correlation_ids_and_missing_api_calls_are_explained() {
    let p = trace(
        "dup.json",
        &[
            ev(LAUNCH, "", 1, 1, 10),
            ev(LAUNCH, "", 5, 1, 10),
            ev(KERNEL, "a", 100, 10, 10),
        ]
        .join(","),
    );
    let t = text(&report(&p, &[]));
    assert!(
        t.contains("1 API calls share a correlation id with an earlier call")
            || t.contains("share a correlation id"),
        "{t}"
    );
    let p = trace("noapi.json", &ev(KERNEL, "a", 100, 10, 10));
    let t = text(&report(&p, &[]));
    assert!(t.contains("orphans 1"), "{t}");
    assert!(t.contains("the trace holds no API calls at all"), "{t}");
}

#[test]
fn an_error_names_its_cause_once() {
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["report", "/nonexistent/cutrace-test.json"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// Real H200 traces: one recorded with `--api lean` (now record's default) says under its API
/// table that the state queries are absent by choice and how to get them; one recorded with
/// every call says nothing of the kind.
#[test]
fn the_api_table_says_when_state_queries_were_left_out() {
    let fixtures = cutrace_testkit::fixture("native");
    let lean = text(&report(&fixtures.join("steps_lean"), &[]));
    let table = &lean[lean.find("CUDA API calls by total time").unwrap()..];
    let line = table
        .lines()
        .find(|l| l.contains("were not recorded"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.contains("--api lean") && line.contains("--api all"),
        "{line}"
    );
    assert!(line.contains("cudaGetDevice"), "{line}");
    let all = text(&report(&fixtures.join("two_streams"), &[]));
    assert!(all.contains("CUDA API calls by total time"), "{all}");
    assert!(!all.contains("were not recorded"), "{all}");
}

/// A real PyTorch trace (H200, run 7): the largest gaps say the GPU waited for the host, and
/// that the host was loading modules (lazy loading) — with the hint to report past warm-up; the
/// JSON carries the same as each device gap's `host`.
#[test]
fn device_gaps_say_what_the_host_was_doing() {
    let fixtures = cutrace_testkit::fixture("native");
    let t = text(&report(&fixtures.join("steps_lean"), &[]));
    let gaps = &t[t.find("largest idle gaps").unwrap()..];
    let first_host = gaps
        .lines()
        .nth(2)
        .filter(|l| l.trim_start().starts_with("host: "))
        .unwrap_or_else(|| panic!("{gaps}"));
    assert!(
        first_host.contains("the next kernel's cudaLaunchKernel returned 49.327 ms into the gap")
            && first_host.contains("(the GPU waited for the host)")
            && first_host.contains("cuLibraryLoadData 14.645 ms")
            && first_host.contains("none ran for 33.424 ms"),
        "{first_host}"
    );
    // The second gap is 27.2 ms of module loading in 30.3: the note says what that is.
    assert!(
        gaps.contains("Module loading") && gaps.contains("lazy loading"),
        "{gaps}"
    );
    // A trace whose gaps hold no module loading says nothing of it.
    let two = text(&report(&fixtures.join("two_streams"), &[]));
    assert!(
        two.contains("      host: ") && !two.contains("Module loading"),
        "{two}"
    );
    let j = report(&fixtures.join("steps_lean"), &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let g = &v["devices"][0]["largest_gaps"][0];
    assert_eq!(g["length_ns"], 49_324_990);
    let h = &g["host"];
    assert_eq!(h["next_launch"]["name"], "cudaLaunchKernel");
    // The launch returned 2 µs after the kernel began: the GPU started it before the call came
    // back.
    assert_eq!(h["next_launch"]["returned_into_gap_ns"], 49_327_034);
    assert_eq!(h["in_calls_ns"], 15_900_877);
    assert_eq!(h["calls"][0]["name"], "cuLibraryLoadData");
    assert_eq!(h["calls"][0]["ns"], 14_645_156);
    assert_eq!(h["ranges"], serde_json::json!([]));
    // A stream's gaps carry no host side.
    let s = &v["devices"][0]["streams"][0]["largest_gaps"][0];
    assert!(s.is_object() && s.get("host").is_none(), "{s}");
}

/// The same trace's idle time, every gap split where its next kernel's launch returned: almost
/// all of it before (PyTorch's first steps: module loading and Python between launches).
#[test]
fn idle_time_is_split_at_each_launch() {
    let fixtures = cutrace_testkit::fixture("native");
    let t = text(&report(&fixtures.join("steps_lean"), &[]));
    assert!(
        t.contains(
            "  idle, split where each gap's next kernel was launched: 239.574 ms (99.8 %) before \
             the launch returned (the GPU waited for the host), 457.894 µs (0.2 %) after it"
        ),
        "{t}"
    );
    let j = report(&fixtures.join("steps_lean"), &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let d = &v["devices"][0];
    let x = &d["idle_split"];
    let sum = ["before_launch_ns", "after_launch_ns", "unknown_ns"]
        .iter()
        .map(|k| x[k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(sum, d["idle_ns"].as_u64().unwrap());
    assert_eq!(
        x["unknown_ns"], 0,
        "every kernel of this trace joins its launch"
    );
}
