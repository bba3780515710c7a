//! Real traces recorded on the H200 (tests/fixtures/native): each is read and checked against
//! the workload's own account (counts exact, 0 orphans, per-stream busy within 2 % of its
//! cudaEvent timing), then truncated at every chunk boundary and at random offsets: never a
//! panic, always "incomplete" with what was recoverable.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cutrace_trace::native;
use cutrace_trace::Trace;

fn fixtures() -> PathBuf {
    cutrace_testkit::fixture("native")
}

fn read(p: &Path) -> Trace {
    native::read(p, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn union_ns(mut iv: Vec<(u64, u64)>) -> u64 {
    iv.sort();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in iv {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

const MODES: &[&str] = &[
    "two_streams",
    "copy_overlap",
    "graph",
    "threads8",
    "nvtx",
    "tiny_5000",
];

/// Each workload twice: recorded with every API call (`--api all`, the default before 8e260b2;
/// folder `MODE`) and with the shipped default, `--api lean` (run 22; folder `lean/MODE`).
fn recordings() -> Vec<(String, &'static str)> {
    MODES
        .iter()
        .flat_map(|m| [(m.to_string(), *m), (format!("lean/{m}"), *m)])
        .collect()
}

#[test]
fn real_traces_match_what_the_programs_launched() {
    for (rec, mode) in recordings() {
        let dir = fixtures().join(&rec);
        let t = read(&dir);
        let exp: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{mode}.json"))).unwrap())
                .unwrap();
        let mode = rec.as_str();
        let n = |k: &str| exp[k].as_u64().unwrap() as usize;
        assert!(t.meta.complete, "{mode}: {:?}", t.meta.incomplete_reason);
        assert_eq!(t.kernels.len(), n("kernels"), "{mode} kernels");
        assert_eq!(t.memcpys.len(), n("memcpys"), "{mode} memcpys");
        assert_eq!(t.memsets.len(), n("memsets"), "{mode} memsets");
        assert_eq!(t.ranges.len(), n("nvtx_ranges"), "{mode} ranges");
        assert_eq!(t.marks.len(), n("nvtx_marks"), "{mode} marks");
        assert_eq!(
            (t.meta.dropped_by_cupti, t.meta.dropped_by_recorder),
            (0, 0)
        );
        let corr: HashSet<u64> = t.api_calls.iter().map(|a| a.correlation_id).collect();
        let orphans = t
            .kernels
            .iter()
            .filter(|k| !corr.contains(&k.correlation_id))
            .count()
            + t.memcpys
                .iter()
                .filter(|m| !corr.contains(&m.correlation_id))
                .count()
            + t.memsets
                .iter()
                .filter(|m| !corr.contains(&m.correlation_id))
                .count();
        assert_eq!(orphans, 0, "{mode} orphans");
        // API calls by name, as the program counted them.
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for a in &t.api_calls {
            let mut name = t.str(a.name).trim_start_matches('_').to_string();
            if name.contains("LaunchKernel") {
                name = "cudaLaunchKernel".into();
            }
            *by_name.entry(name).or_default() += 1;
        }
        for (name, want) in exp["api"].as_object().unwrap() {
            assert_eq!(
                by_name.get(name).copied().unwrap_or(0),
                want.as_u64().unwrap() as usize,
                "{mode}: API {name}"
            );
        }
        // Per-stream busy against the program's cudaEvent span (CUPTI stream = id - 1).
        for s in exp["streams"].as_array().unwrap() {
            let sid = s["stream_id"].as_u64().unwrap() - 1;
            let iv: Vec<(u64, u64)> = t
                .kernels
                .iter()
                .filter(|k| k.stream == sid)
                .map(|k| (k.start_ns, k.end_ns))
                .collect();
            assert_eq!(
                iv.len(),
                s["kernels"].as_u64().unwrap() as usize,
                "{mode} stream {sid}"
            );
            let busy = union_ns(iv) as f64;
            let ev = s["event_ms"].as_f64().unwrap() * 1e6;
            let err = (busy - ev).abs() / ev;
            assert!(
                err <= 0.02,
                "{mode} stream {sid}: busy {busy} ns vs event {ev} ns"
            );
        }
        // The recording mode shows: `lean` says what it left out and has none of it (not even the
        // cuKernelGetName cudart makes inside every launch call), `all` has those queries.
        let lean = mode.starts_with("lean/");
        assert_eq!(
            t.meta
                .notes
                .iter()
                .any(|n| n.text.starts_with("api records: lean")),
            lean,
            "{mode}: {:?}",
            t.meta.notes
        );
        assert_eq!(
            by_name.get("cuKernelGetName").copied().unwrap_or(0),
            // one per launch call (a graph's kernels have none of their own)
            if lean { 0 } else { by_name["cudaLaunchKernel"] },
            "{mode}: cuKernelGetName"
        );
        if mode.ends_with("nvtx") {
            let names: HashSet<&str> = t.ranges.iter().map(|r| t.str(r.name)).collect();
            assert_eq!(names, HashSet::from(["step", "forward", "backward"]));
        }
    }
}

#[test]
fn sigkilled_recording_reads_as_incomplete_with_its_chunks() {
    let t = read(&fixtures().join("sigkill"));
    assert!(!t.meta.complete);
    let reason = t.meta.incomplete_reason.as_deref().unwrap();
    assert!(
        reason.contains("no TAIL chunk") || reason.contains("ends inside"),
        "{reason}"
    );
    assert_eq!(t.kernels.len(), 27_700);
    let corr: HashSet<u64> = t.api_calls.iter().map(|a| a.correlation_id).collect();
    assert!(t.kernels.iter().all(|k| corr.contains(&k.correlation_id)));
}

/// Offsets where chunks end, from the framing alone.
fn chunk_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = vec![12];
    let mut off = 12;
    while off + native::CHUNK_HEADER_LEN <= bytes.len() {
        let len = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += native::CHUNK_HEADER_LEN + len;
        if off > bytes.len() {
            break;
        }
        ends.push(off);
    }
    ends
}

#[test]
fn real_traces_truncated_anywhere_never_panic() {
    let tmp = cutrace_testkit::Dir::new("fixture-trunc");
    let mut x = 0x853c49e6748fea9bu64;
    for (mode, _) in recordings().into_iter().chain(
        ["sigkill", "conflict", "steps_lean"]
            .iter()
            .map(|m| (m.to_string(), *m)),
    ) {
        let dir = fixtures().join(&mode);
        let part = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "cutrace"))
            .unwrap();
        let bytes = std::fs::read(&part).unwrap();
        let full = read(&part);
        let ends = chunk_ends(&bytes);
        assert!(ends.len() > 2, "{mode}: {} chunks", ends.len());
        let p = tmp.join("t.cutrace");
        let mut last = 0;
        for (i, &end) in ends.iter().enumerate() {
            std::fs::write(&p, &bytes[..end]).unwrap();
            let t = read(&p);
            let whole = i == ends.len() - 1 && full.meta.complete;
            assert_eq!(t.meta.complete, whole, "{mode} cut at {end}");
            assert!(t.kernels.len() >= last);
            last = t.kernels.len();
        }
        assert_eq!(last, full.kernels.len());
        for _ in 0..60 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cut = 8 + (x as usize) % (bytes.len() - 8);
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let t = read(&p);
            assert!(!t.meta.complete, "{mode} cut at {cut}");
            assert!(t.kernels.len() <= full.kernels.len());
        }
    }
}

/// `gpu/workloads multiproc 4` on the H200 (run 7): two fork+exec and two fork-only children,
/// each its own part. Merged, every child's kernels join launch calls of that child alone (parts
/// share CUPTI's per-process correlation ids; the reader keeps them apart).
#[test]
fn multiprocess_trace_joins_each_kernel_to_its_own_process() {
    let dir = fixtures().join("multiproc");
    let t = read(&dir);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    let parts = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "cutrace")
        })
        .count();
    assert_eq!(parts, 4);
    let pid_of: HashMap<u64, u32> = t
        .api_calls
        .iter()
        .map(|a| (a.correlation_id, a.process))
        .collect();
    let mut total = 0;
    let mut hows = Vec::new();
    for i in 0..4 {
        let exp: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("mp.{i}.json"))).unwrap())
                .unwrap();
        let pid = exp["pid"].as_u64().unwrap() as u32;
        hows.push(exp["how"].as_str().unwrap_or("exec").to_owned());
        let mine = t
            .kernels
            .iter()
            .filter(|k| pid_of.get(&k.correlation_id) == Some(&pid))
            .count();
        assert_eq!(mine, exp["kernels"].as_u64().unwrap() as usize, "pid {pid}");
        let launches = t
            .api_calls
            .iter()
            .filter(|a| a.process == pid && t.str(a.name).contains("cudaLaunchKernel"))
            .count();
        assert_eq!(
            launches,
            exp["api"]["cudaLaunchKernel"].as_u64().unwrap() as usize
        );
        total += mine;
    }
    hows.sort();
    assert_eq!(hows, ["exec", "exec", "fork", "fork"]);
    // Every kernel is accounted for by exactly one child: none joined a stranger's call.
    assert_eq!(total, t.kernels.len());
    assert_eq!(t.kernels.len(), 4 * 1003);
}

/// torch_steps under `cutrace record --api lean` on the H200 (run 7): torch.profiler counted 150
/// kernels in the profiled steps; the whole run has 253, every one still joined to its launch
/// while the state queries (cudaGetDevice & co.) were left out and said so.
#[test]
fn lean_api_trace_keeps_every_join_and_drops_the_state_queries() {
    let t = read(&fixtures().join("steps_lean"));
    assert!(t.meta.complete);
    assert_eq!(t.kernels.len(), 253);
    assert_eq!(t.api_calls.len(), 451);
    let corr: HashSet<u64> = t.api_calls.iter().map(|a| a.correlation_id).collect();
    assert!(t.kernels.iter().all(|k| corr.contains(&k.correlation_id)));
    assert!(t.memcpys.iter().all(|m| corr.contains(&m.correlation_id)));
    let names: HashSet<&str> = t.api_calls.iter().map(|a| t.str(a.name)).collect();
    for gone in [
        "cudaGetDevice",
        "cudaGetLastError",
        "cuDevicePrimaryCtxGetState",
    ] {
        assert!(
            !names.iter().any(|n| n.trim_start_matches('_') == gone),
            "{gone}"
        );
    }
    assert!(names.iter().any(|n| n.contains("cuLaunchKernel")));
    assert!(
        t.meta
            .notes
            .iter()
            .any(|n| n.text.contains("api records: lean")),
        "{:?}",
        t.meta.notes
    );
}

/// A part's header says which API calls were kept, typed: recorded on the H200 with the
/// shipped default (`--api lean`, 2026-12-02), the header's `api_records` holds the mode and
/// the 36 runtime and 47 driver callback ids left out, as its note words them. A part written
/// before the header said it (`lean/copy_overlap`, 2026-11-30) gets the mode from its note,
/// without the counts; one recorded with `--api all` (`copy_overlap`) has no such note and
/// reads as keeping every call.
#[test]
fn the_header_says_which_api_calls_were_kept() {
    let mode = |rel: &str| {
        let t = read(&fixtures().join(rel));
        assert_eq!(t.meta.parts.len(), 1, "{rel}");
        t.meta.parts[0].header.api_records.clone()
    };
    let typed = mode("api_header/copy_overlap").expect("a typed api_records");
    assert_eq!(
        (
            typed.mode.as_str(),
            typed.runtime_left_out,
            typed.driver_left_out
        ),
        ("lean", Some(36), Some(47))
    );
    let t = read(&fixtures().join("api_header/copy_overlap"));
    assert!(t.meta.notes[0]
        .text
        .starts_with("api records: lean — 36 runtime and 47 driver"));
    assert_eq!((t.kernels.len(), t.memcpys.len()), (19, 16));
    let old = mode("lean/copy_overlap").expect("the mode from the old part's note");
    assert_eq!(
        (old.mode.as_str(), old.runtime_left_out, old.driver_left_out),
        ("lean", None, None)
    );
    assert_eq!(mode("copy_overlap"), None);
}
