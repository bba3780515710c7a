//! `chrome::write_trace` on every real native fixture and every real Kineto fixture: the export
//! is read back with cutrace's own Kineto importer and must give the same records and the same
//! analysis (the JSON report's numbers) to the nanosecond. The file's structure is checked as
//! Perfetto and chrome://tracing need it (flows that pair up, named lanes, events that nest on
//! every lane). The command's own behaviour (file names, gzip, --force) is tested with the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_analysis::{analyze, Options, StepMatch};
use cutrace_export::chrome::{self, Written};
use cutrace_trace::{ReadOptions, Trace};
use serde_json::value::RawValue;
use serde_json::Value;

use cutrace_testkit::{loud, native_fixtures, repo, Dir};

const NATIVE: [&str; 25] = [
    "api_header/copy_overlap",
    "sigkill",
    "multiproc",
    "steps_lean",
    "two_streams",
    "copy_overlap",
    "graph",
    "tiny_5000",
    "lean/copy_overlap",
    "threads8",
    "nvtx",
    "conflict",
    "lean/two_streams",
    "lean/graph",
    "lean/tiny_5000",
    "lean/threads8",
    "lean/nvtx",
    "counters_basic",
    "spawn",
    "spawn_run_id",
    "sample_pm",
    "torchrun_gloo",
    "pc_kernels",
    "pc_torch",
    "pools_h100",
];

/// Exports `src` to `out` as `cutrace convert --chrome` does, in process.
fn export(src: &Path, out: &Path) -> Written {
    let mut t = load(src);
    let mut f = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let w = chrome::write_trace(&mut f, &mut t).unwrap();
    f.flush().unwrap();
    w
}

/// The analysis `cutrace report --format json` prints, with long lists (every kernel name, the
/// 1,000 largest gaps, every orphan), less what names the source itself
/// (its format, path, and the part files read with what they say about separate runs: an
/// export is one file) and what the source had but did not model (`skipped_events`: the export
/// adds metadata and flow events, which the importer counts there).
fn report(trace: &Path) -> Value {
    let t = load(trace);
    let opts = Options {
        window: None,
        top: 1000,
        orphan_list: 1_000_000,
        steps: Some(StepMatch::profiler_steps()),
    };
    let r = analyze(&t, &opts).unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    let t = v["trace"].as_object_mut().unwrap();
    t.remove("source");
    t.remove("paths");
    t.remove("parts");
    t.remove("separate_runs");
    v["data_loss"]
        .as_object_mut()
        .unwrap()
        .remove("skipped_events");
    v
}

/// The first place two JSON values differ, for a readable failure.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(u), Some(v)) => first_difference(u, v, &format!("{at}.{k}")),
                _ => Some(format!("{at}.{k}: present on one side only")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, &format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

fn load(path: &Path) -> Trace {
    cutrace_export::input::load(path, &ReadOptions::default(), &mut |_, _| {}).unwrap()
}

/// Every record as text with its names resolved, per kind, in the trace's order. What Kineto's
/// shape cannot carry is normalised: its single "shared memory" figure (static + dynamic), and
/// a memset's value and an API call's return value, which the importer does not read.
fn records(t: &Trace) -> BTreeMap<&'static str, Vec<String>> {
    let mut m = BTreeMap::new();
    m.insert(
        "kernels",
        t.kernels
            .iter()
            .map(|k| {
                let l = t.launch(k);
                format!(
                    "{} {} {} {} {} {} {:?} {:?} {:?} {} {} {}",
                    k.device,
                    k.context,
                    k.stream,
                    k.correlation_id,
                    k.start_ns,
                    k.end_ns,
                    t.str(k.name),
                    l.grid,
                    l.block,
                    l.registers_per_thread,
                    l.static_shared_bytes + l.dynamic_shared_bytes,
                    l.graph_id
                )
            })
            .collect(),
    );
    m.insert(
        "api_calls",
        t.api_calls
            .iter()
            .map(|a| {
                format!(
                    "{:?} {:?} {} {} {} {} {} {}",
                    a.kind,
                    t.str(a.name),
                    a.cbid,
                    a.process,
                    a.thread,
                    a.correlation_id,
                    a.start_ns,
                    a.end_ns
                )
            })
            .collect(),
    );
    m.insert(
        "memcpys",
        t.memcpys.iter().map(|c| format!("{c:?}")).collect(),
    );
    m.insert(
        "memsets",
        t.memsets
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.value = 0;
                format!("{s:?}")
            })
            .collect(),
    );
    m.insert("syncs", t.syncs.iter().map(|s| format!("{s:?}")).collect());
    m.insert(
        "ranges",
        t.ranges
            .iter()
            .map(|r| {
                format!(
                    "{:?} {:?} {} {} {:?} {:?} {} {}",
                    r.domain,
                    t.str(r.name),
                    r.process,
                    r.thread,
                    r.device,
                    r.stream,
                    r.start_ns,
                    r.end_ns
                )
            })
            .collect(),
    );
    m.insert(
        "marks",
        t.marks
            .iter()
            .map(|k| format!("{:?} {} {} {}", t.str(k.name), k.process, k.thread, k.ts_ns))
            .collect(),
    );
    m.insert(
        "overheads",
        t.overheads
            .iter()
            .map(|o| {
                let kind = t.str(o.kind);
                format!(
                    "{kind:?} {} {} {} {}",
                    o.process, o.thread, o.start_ns, o.end_ns
                )
            })
            .collect(),
    );
    m.insert(
        "host_ops",
        t.host_ops
            .iter()
            .map(|o| {
                format!(
                    "{:?} {:?} {} {} {} {} {}",
                    o.kind,
                    t.str(o.name),
                    o.process,
                    o.thread,
                    o.start_ns,
                    o.end_ns,
                    o.external_id
                )
            })
            .collect(),
    );
    m
}

/// The source and its export hold the same records, the same facts about data loss, and give the
/// same report (returned).
fn assert_round_trip(src: &Path, exported: &Path) -> Value {
    let a = load(src);
    let b = load(exported);
    // `no_gpu_records` holds launch calls only, on purpose.
    assert!(
        !a.kernels.is_empty() || !a.api_calls.is_empty(),
        "{}: no kernels or API calls",
        src.display()
    );
    assert_eq!(a.kernels.len(), b.kernels.len(), "{}", src.display());
    let (ra, rb) = (records(&a), records(&b));
    for (kind, list) in &ra {
        let other = &rb[kind];
        assert_eq!(list.len(), other.len(), "{}: {kind} count", src.display());
        if let Some(i) = (0..list.len()).find(|&i| list[i] != other[i]) {
            panic!(
                "{}: {kind}[{i}] differs:\n  source: {}\n  export: {}",
                src.display(),
                list[i],
                other[i]
            );
        }
    }
    assert_eq!(a.meta.complete, b.meta.complete);
    assert_eq!(a.meta.incomplete_reason, b.meta.incomplete_reason);
    assert_eq!(a.meta.dropped_by_recorder, b.meta.dropped_by_recorder);
    assert_eq!(a.meta.dropped_by_cupti, b.meta.dropped_by_cupti);
    assert_eq!(a.meta.notes, b.meta.notes);
    assert_eq!(a.meta.devices.len(), b.meta.devices.len());

    let (mut x, y) = (report(src), report(exported));
    // Hardware counters (`cutrace profile`'s kernel_metric records) are drawn as "ph":"C"
    // counter events, which the Kineto importer skips (the CSV and Parquet tables carry the
    // values to read back): the export's report has no counter section.
    if let Some(counters) = x.as_object_mut().and_then(|o| o.remove("counters")) {
        assert!(counters["by_kernel"]
            .as_array()
            .is_some_and(|k| !k.is_empty()));
        assert!(y.get("counters").is_none(), "{}", src.display());
    }
    // PM samples (`cutrace sample`'s pm_sample records) are drawn as "ph":"C" events too, which
    // the importer skips likewise.
    if let Some(pm) = x.as_object_mut().and_then(|o| o.remove("pm_samples")) {
        assert!(pm["samples"].as_u64() > Some(0), "{}", src.display());
        assert!(y.get("pm_samples").is_none(), "{}", src.display());
    }
    // PC samples have no time: the timeline exports leave them out (the pc_samples table and
    // --pprof carry them), so the export's report has no pc_samples section.
    if let Some(pc) = x.as_object_mut().and_then(|o| o.remove("pc_samples")) {
        assert!(pc["samples"].as_u64() > Some(0), "{}", src.display());
        assert!(y.get("pc_samples").is_none(), "{}", src.display());
    }
    // CUDA's memory pools (the native trace's table 12) are not drawn in the timeline exports
    // yet (docs/EXPORTS.md): the export's report has no cuda_pools. The allocations themselves
    // (table 11) do come back.
    if let Some(pools) = x
        .get_mut("memory")
        .and_then(|m| m.as_object_mut())
        .and_then(|m| m.remove("cuda_pools"))
    {
        assert!(pools.as_array().is_some_and(|p| !p.is_empty()));
        assert!(y["memory"].get("cuda_pools").is_none(), "{}", src.display());
    }
    if let Some(d) = first_difference(&x, &y, "report") {
        panic!("{}: the reports differ at {d}", src.display());
    }
    // The numbers the report exists for, named (the whole report is equal already).
    for dev in x["devices"].as_array().unwrap() {
        for key in ["busy_ns", "idle_ns", "gaps", "window_ns"] {
            assert!(dev[key].is_u64(), "{}: {key}", src.display());
        }
    }
    assert!(x["correlation"]["orphans"].is_u64());
    let summary = if a.kernels.is_empty() {
        "api_summary"
    } else {
        "kernel_summary"
    };
    assert!(x[summary].as_array().is_some_and(|r| !r.is_empty()));
    x
}

#[test]
fn every_native_fixture_round_trips_exactly() {
    let dir = Dir::new("chrome-native");
    let found: BTreeSet<String> = native_fixtures(&repo()).into_iter().collect();
    assert_eq!(
        found,
        NATIVE.iter().map(|s| s.to_string()).collect(),
        "a new native fixture: add it to NATIVE"
    );
    // Two at a time (CI has two cores); sigkill and tiny_5000 are the large ones.
    std::thread::scope(|scope| {
        let dir = &dir;
        let workers: Vec<_> = [&NATIVE[..8], &NATIVE[8..]]
            .into_iter()
            .map(|names| {
                scope.spawn(move || {
                    for name in names {
                        native_round_trip(dir, name);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    });
}

fn native_round_trip(dir: &Dir, name: &str) {
    let src = repo().join("tests/fixtures/native").join(name);
    let out = dir.path(&format!("{}.json", name.replace('/', "-")));
    export(&src, &out);
    let bytes = std::fs::read(&out).unwrap();
    assert_nesting(&bytes, name);
    let report = assert_round_trip(&src, &out);
    let member = cutrace_member(&bytes);
    let complete = member["complete"].as_bool().unwrap();
    if name == "sigkill" {
        // Killed recorder: what was recovered is exported, and said to be incomplete in the
        // file and by a report on the file (equal to the source's report).
        assert!(!complete);
        let reason = member["incomplete_reason"].as_str().unwrap();
        assert!(reason.contains("TAIL"), "{reason}");
        assert_eq!(report["data_loss"]["complete"], false);
    } else {
        assert!(complete, "{name}");
    }
}

/// The top-level "cutrace" member, without building the events.
fn cutrace_member(bytes: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Top {
        cutrace: Value,
    }
    serde_json::from_slice::<Top>(bytes).unwrap().cutrace
}

#[test]
fn every_kineto_fixture_round_trips_exactly() {
    let dir = Dir::new("chrome-kineto");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/fixtures/kineto"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    sources.sort();
    assert!(sources.len() >= 5);
    sources.push(repo().join("examples/two_streams.json.gz"));
    for (i, src) in sources.iter().enumerate() {
        let out = dir.path(&format!("{i}.json"));
        export(src, &out);
        let member = cutrace_member(&std::fs::read(&out).unwrap());
        assert_eq!(member["source"], "kineto");
        // The events the importer does not model (cpu_op, …) are said to be left out; metadata
        // and flows are written anew.
        let notes = member["export_notes"].to_string();
        let skipped = load(src).meta.skipped_events;
        let lost = skipped
            .iter()
            .any(|(c, _)| !matches!(c.as_str(), "ph=M" | "ph=s" | "ph=f"));
        assert_eq!(
            notes.contains("not in this file"),
            lost,
            "{}: {notes}",
            src.display()
        );
        let has_cpu_ops = skipped.iter().any(|(c, _)| c == "cpu_op");
        assert_eq!(notes.contains("cpu_op: "), has_cpu_ops, "{notes}");
        assert_round_trip(src, &out);
    }
}

/// The export as a JSON value (gzip or plain).
fn parse(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The events of an export, each as a JSON value plus its `ts` and `dur` as written (serde_json's
/// f64 cannot hold these times).
struct Ev {
    v: Value,
    ts: String,
    dur: String,
}

impl std::ops::Index<&str> for Ev {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        &self.v[key]
    }
}

fn events(bytes: &[u8]) -> Vec<Ev> {
    let raw: RawTrace = serde_json::from_slice(bytes).unwrap();
    raw.events
        .iter()
        .map(|e| {
            let text = |k: &str| e.get(k).map(|r| r.get().to_owned()).unwrap_or_default();
            let v: Value = e
                .iter()
                .map(|(k, r)| (k.to_string(), serde_json::from_str(r.get()).unwrap()))
                .collect::<serde_json::Map<String, Value>>()
                .into();
            Ev {
                v,
                ts: text("ts"),
                dur: text("dur"),
            }
        })
        .collect()
}

fn lane(e: &Value) -> (i64, i64) {
    (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap())
}

/// µs text → ns, independently of the exporter: split at the point.
fn ns(text: &str) -> u64 {
    let (i, f) = text.split_once('.').unwrap();
    assert_eq!(f.len(), 3, "{text}");
    i.parse::<u64>().unwrap() * 1000 + f.parse::<u64>().unwrap()
}

/// No two complete events on one lane overlap without nesting: Perfetto drops such events.
fn assert_nesting(bytes: &[u8], name: &str) {
    #[derive(serde::Deserialize)]
    struct Slim<'a> {
        ph: &'a str,
        pid: Option<i64>,
        tid: Option<i64>,
        #[serde(borrow)]
        ts: Option<&'a RawValue>,
        #[serde(borrow)]
        dur: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct File<'a> {
        #[serde(rename = "traceEvents", borrow)]
        events: Vec<Slim<'a>>,
    }
    let file: File = serde_json::from_slice(bytes).unwrap();
    let mut lanes: BTreeMap<(i64, i64), Vec<(u64, u64)>> = BTreeMap::new();
    for e in file.events.iter().filter(|e| e.ph == "X") {
        let s = ns(e.ts.unwrap().get());
        let end = s + ns(e.dur.unwrap().get());
        let lane = (e.pid.unwrap(), e.tid.unwrap());
        lanes.entry(lane).or_default().push((s, end));
    }
    for (l, mut evs) in lanes {
        evs.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
        let mut open: Vec<u64> = Vec::new();
        for (s, e) in evs {
            while open.last().is_some_and(|&end| end <= s) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(
                    e <= end,
                    "{name}: lane {l:?}: [{s}, {e}) crosses the end {end}"
                );
            }
            open.push(e);
        }
    }
}

#[derive(serde::Deserialize)]
struct RawTrace<'a> {
    #[serde(rename = "traceEvents", borrow)]
    events: Vec<BTreeMap<&'a str, &'a RawValue>>,
}

#[test]
fn the_file_has_the_shape_perfetto_and_chrome_tracing_read() {
    let dir = Dir::new("chrome-shape");
    for name in ["copy_overlap", "graph", "nvtx", "threads8"] {
        let src = repo().join("tests/fixtures/native").join(name);
        let out = dir.path(&format!("{name}.json"));
        export(&src, &out);
        let bytes = std::fs::read(&out).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let native = load(&src);
        assert_eq!(v["displayTimeUnit"], "ns");
        assert_eq!(v["cutrace"]["source"], "native");
        assert_eq!(v["cutrace"]["version"], env!("CARGO_PKG_VERSION"));
        let dev = &v["deviceProperties"][0];
        assert_eq!(dev["name"], "NVIDIA H200");
        assert_eq!(dev["numSms"], 132);
        assert_eq!(dev["computeMajor"], 9);
        let events = events(&bytes);

        // Every timed event has ts, pid, tid (and X a dur); times have exactly three decimals.
        let three = |t: &str| {
            let (i, f) = t.split_once('.').unwrap_or((t, ""));
            !i.is_empty() && i.bytes().all(|c| c.is_ascii_digit()) && f.len() == 3
        };
        let mut complete = 0;
        for e in events.iter().filter(|e| e["ph"] != "M") {
            assert!(e["pid"].is_i64() && e["tid"].is_i64(), "{name}: {}", e.v);
            assert!(three(&e.ts), "{name}: ts {}", e.ts);
            if e["ph"] == "X" {
                assert!(three(&e.dur), "{name}: dur {}", e.dur);
                complete += 1;
            }
        }
        let n_records = native.kernels.len()
            + native.api_calls.len()
            + native.memcpys.len()
            + native.memsets.len()
            + native.syncs.len()
            + native.ranges.len()
            + native.overheads.len()
            + native.host_ops.len();
        assert_eq!(complete, n_records, "{name}: one complete event per record");
        let marks = events.iter().filter(|e| e["ph"] == "i").count();
        assert_eq!(marks, native.marks.len());

        // Times count from a whole second before the first record, written twice (Kineto's
        // baseTimeNanoseconds, and the "cutrace" member that cutrace's importer reads), so `ts`
        // stays well inside a double's 53 bits at ns resolution.
        let base = v["baseTimeNanoseconds"]
            .as_u64()
            .expect("baseTimeNanoseconds");
        assert_eq!(v["cutrace"]["time_base_ns"].as_u64(), Some(base));
        assert_eq!(base % 1_000_000_000, 0, "{name}: base {base}");
        let first = [
            native.kernels.iter().map(|r| r.start_ns).min(),
            native.api_calls.iter().map(|r| r.start_ns).min(),
            native.syncs.iter().map(|r| r.start_ns).min(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        assert!(
            base <= first && first - base < 1_000_000_000,
            "{name}: base {base}, first {first}"
        );
        // A chosen record: the earliest kernel, its start printed as its nanoseconds from the base.
        let k = native.kernels.iter().min_by_key(|k| k.start_ns).unwrap();
        let digits = format!("{:04}", k.start_ns - base);
        let (int, frac) = digits.split_at(digits.len() - 3);
        let want = format!("{int}.{frac}");
        let found = events.iter().any(|e| {
            e["cat"] == "kernel" && e["args"]["correlation"] == k.correlation_id && e.ts == want
        });
        assert!(found, "{name}: no kernel event at ts {want}");

        // Kernel names are demangled as report shows them; CUPTI's name is kept.
        let mut mangled = 0;
        for e in events.iter().filter(|e| e["cat"] == "kernel") {
            if let Some(m) = e["args"]["mangled"].as_str() {
                assert!(m.starts_with("_Z"));
                assert_eq!(e["name"], *cutrace_analysis::display_name(m));
                mangled += 1;
            }
        }
        assert!(mangled > 0, "{name}: no mangled name kept");

        // Flows pair up: one "s" per id, on the launching call; its "f"s on device records.
        let mut starts: BTreeMap<u64, &Ev> = BTreeMap::new();
        let mut finishes: BTreeMap<u64, Vec<&Ev>> = BTreeMap::new();
        for e in &events {
            let id = || e["id"].as_u64().unwrap();
            match e["ph"].as_str() {
                Some("s") => {
                    assert_eq!(e["cat"], "ac2g");
                    assert!(starts.insert(id(), e).is_none(), "two \"s\" for one id");
                }
                Some("f") => {
                    assert_eq!(e["cat"], "ac2g");
                    assert_eq!(e["bp"], "e");
                    finishes.entry(id()).or_default().push(e);
                }
                _ => {}
            }
        }
        assert!(!starts.is_empty());
        let s_ids: BTreeSet<u64> = starts.keys().copied().collect();
        let f_ids: BTreeSet<u64> = finishes.keys().copied().collect();
        assert_eq!(s_ids, f_ids, "{name}: unpaired flow ids");
        let is_gpu = |e: &Ev| {
            e["ph"] == "X"
                && ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap())
        };
        for (id, fs) in &finishes {
            for f in fs {
                let target = events.iter().any(|g| {
                    is_gpu(g)
                        && g["args"]["correlation"] == *id
                        && lane(&g.v) == lane(&f.v)
                        && g.ts == f.ts
                });
                assert!(target, "{name}: flow {id} points at no device record");
            }
        }
        for (id, s) in &starts {
            let call = events.iter().any(|e| {
                e["ph"] == "X"
                    && e["cat"].as_str().unwrap().starts_with("cuda_")
                    && e["args"]["correlation"] == *id
                    && lane(&e.v) == lane(&s.v)
                    && e.ts == s.ts
            });
            assert!(call, "{name}: flow {id} starts on no API call");
        }
        if name == "graph" {
            // One graph launch, many kernels: several "f" for one "s", as Kineto writes them.
            assert!(finishes.values().any(|f| f.len() > 1));
        }

        // Metadata names every process and every lane that holds an event.
        let mut processes = BTreeMap::new();
        let mut threads = BTreeMap::new();
        for e in events.iter().filter(|e| e["ph"] == "M") {
            let n = e["args"]["name"].as_str().map(str::to_owned);
            match e["name"].as_str().unwrap() {
                "process_name" => {
                    processes.insert(e["pid"].as_i64().unwrap(), n.unwrap());
                }
                "thread_name" => {
                    threads.insert(lane(&e.v), n.unwrap());
                }
                _ => {}
            }
        }
        for e in events.iter().filter(|e| e["ph"] != "M") {
            let (pid, tid) = lane(&e.v);
            assert!(
                processes.contains_key(&pid),
                "{name}: pid {pid} has no name"
            );
            assert!(
                threads.contains_key(&(pid, tid)),
                "{name}: ({pid}, {tid}) has no name"
            );
        }
        for k in &native.kernels {
            let (d, s) = (i64::from(k.device), k.stream as i64);
            assert_eq!(processes[&d], format!("GPU {d}"));
            assert_eq!(threads[&(d, s)], format!("stream {s}"));
        }
        // Device records carry their stream in args; on the stream's own row it is the tid,
        // on the stream's further rows tid mod 1,000,000 (docs/EXPORTS.md, "Stream rows").
        for g in events.iter().filter(|e| is_gpu(e)) {
            let (_, tid) = lane(&g.v);
            let stream = g["args"]["stream"].as_i64().unwrap();
            assert_eq!(tid % 1_000_000, stream, "{name}: {}", g.v);
        }
        assert_nesting(&bytes, name);
    }
}

/// Python's json module reads the export too (a second, independent JSON parser).
#[test]
fn python_json_loads_the_export() {
    if Command::new("python3").arg("--version").output().is_err() {
        loud!("SKIPPED: no python3 to json.load the Chrome export");
        return;
    }
    let dir = Dir::new("chrome-python");
    let src = repo().join("tests/fixtures/native/nvtx");
    let out = dir.path("t.json");
    export(&src, &out);
    let script = "import json, sys\n\
                  d = json.load(open(sys.argv[1]))\n\
                  ev = d['traceEvents']\n\
                  print(len(ev), sum(1 for e in ev if e.get('cat') == 'kernel'))";
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let counts: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(counts[1], 22, "{text}");
    assert_eq!(
        counts[0],
        parse(&out)["traceEvents"].as_array().unwrap().len() as u64
    );
}
/// CUPTI writes 0 for a timestamp it could not collect, and a record can end before it starts.
/// Neither may wrap the relative times, pull the time base to 0, or be passed off as real: the
/// base sits strictly before the first non-zero start, a 0 stays 0 both ways, and an inverted
/// record is written with `"dur": 0` and counted.
#[test]
fn zero_and_inverted_timestamps_keep_the_base_and_never_wrap() {
    use cutrace_trace::native::{part_file_name, Header, Tail, Writer};
    use cutrace_trace::{ApiCall, ApiKind, Kernel, Launch};
    let dir = Dir::new("chrome-zeros");
    let src = dir.path("trace");
    std::fs::create_dir_all(&src).unwrap();
    let t0: u64 = 1_796_022_092_500_020_000; // CUPTI clock: Unix time in ns
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(9),
        ..Header::default()
    };
    let mut w = Writer::new(std::io::Cursor::new(Vec::new()), &header).unwrap();
    let (k, a) = (w.intern("_Z1kv"), w.intern("cudaLaunchKernel"));
    let api = |corr: u64, start: u64, end: u64| ApiCall {
        kind: ApiKind::Runtime,
        name: a,
        cbid: 211,
        process: 9,
        thread: 1,
        correlation_id: corr,
        start_ns: start,
        end_ns: end,
        return_value: 0,
    };
    let kernel = |corr: u64, start: u64, end: u64| Kernel {
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: corr,
        start_ns: start,
        end_ns: end,
        name: k,
        launch: 0,
    };
    let launch = Launch {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        registers_per_thread: 8,
        ..Launch::default()
    };
    w.push_api(&api(1, t0, t0 + 100));
    w.push_api(&api(2, 0, 0)); // not collected
    w.push_kernel(&kernel(1, t0 + 1_000, t0 + 5_000), &launch); // normal
    w.push_kernel(&kernel(2, t0 + 6_000, 0), &launch); // end not collected
    w.push_kernel(&kernel(1, t0 + 9_000, t0 + 8_000), &launch); // ends before it starts
    w.flush().unwrap();
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    std::fs::write(src.join(part_file_name("h", 9, 0)), bytes).unwrap();

    let out = dir.path("z.json");
    let w = export(&src, &out);
    assert_eq!(w.inverted, 2, "records that end before they start");
    let v = parse(&out);
    let base = v["baseTimeNanoseconds"].as_u64().unwrap();
    assert_eq!(
        base, 1_796_022_092_000_000_000,
        "the whole second before t0"
    );
    let evs = v["traceEvents"].as_array().unwrap();
    let ts_of = |cat: &str, corr: u64| -> Vec<(String, String)> {
        evs.iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat && e["args"]["correlation"] == corr)
            .map(|e| (e["ts"].to_string(), e["dur"].to_string()))
            .collect()
    };
    assert_eq!(ts_of("cuda_runtime", 2), [("0.0".into(), "0.0".into())]);
    let mut k = ts_of("kernel", 1);
    k.sort();
    assert_eq!(
        k,
        [
            ("500021.0".into(), "4.0".into()),
            ("500029.0".into(), "0.0".into())
        ]
    );
    assert_eq!(ts_of("kernel", 2), [("500026.0".into(), "0.0".into())]);
    // Every ts is small (no wrapped value) and carries three decimals in the file.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("\"dur\":1665"), "a wrapped duration");
    // Back in: the real times exactly, 0 still 0.
    let t = load(&out);
    let mut api_times: Vec<(u64, u64)> =
        t.api_calls.iter().map(|a| (a.start_ns, a.end_ns)).collect();
    api_times.sort();
    assert_eq!(api_times, [(0, 0), (t0, t0 + 100)]);
    let mut kt: Vec<(u64, u64)> = t.kernels.iter().map(|k| (k.start_ns, k.end_ns)).collect();
    kt.sort();
    assert_eq!(
        kt,
        [
            (t0 + 1_000, t0 + 5_000),
            (t0 + 6_000, t0 + 6_000),
            (t0 + 9_000, t0 + 9_000)
        ]
    );
}
/// A GPU annotation range that crosses a kernel on its stream (tests/fixtures/perfetto) goes to
/// a further row of that stream, where Perfetto keeps both; the report is unchanged.
#[test]
fn a_gpu_range_crossing_a_kernel_gets_a_row_of_its_own() {
    let dir = Dir::new("chrome-crossing");
    let src = repo().join("tests/fixtures/perfetto/crossing.json");
    let out = dir.0.join("x.json");
    export(&src, &out);
    assert_round_trip(&src, &out);
    let v = parse(&out);
    let ev = |name: &str| {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name && e["ph"] == "X")
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let (k, r) = (ev("kA"), ev("R"));
    assert_eq!(k["tid"], 7, "the kernel stays on its stream's row");
    assert_ne!(r["tid"], k["tid"], "the crossing range moves off it");
    assert_eq!(r["args"]["stream"], 7);
}
/// Viewers read `tid` as a 32-bit number (Perfetto puts a larger one on its process's row, where
/// rows pile up and overlapping events are dropped): a trace merged from four processes, whose
/// stream ids carry N·2³², still gets small, distinct GPU rows, one per process's stream.
#[test]
fn a_multi_process_trace_keeps_its_gpu_rows_within_32_bits() {
    let dir = Dir::new("chrome-tid32");
    let out = dir.path("mp.json");
    export(&repo().join("tests/fixtures/native/multiproc"), &out);
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut rows = BTreeSet::new();
    for e in events {
        if let Some(tid) = e["tid"].as_i64() {
            assert!((-1..=i64::from(u32::MAX)).contains(&tid), "tid {tid}: {e}");
        }
        if e["ph"] == "X" && e["cat"] == "kernel" {
            rows.insert(e["tid"].as_i64().unwrap());
        }
    }
    // Four processes, each with its stream 7 and stream 13.
    assert_eq!(rows.len(), 8, "{rows:?}");
    let names: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name" && rows.contains(&e["tid"].as_i64().unwrap_or(-2)))
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(names.contains("stream 13 (pid 492)"), "{names:?}");
}

/// A `cutrace profile` trace's counters as "ph":"C" events: on the GPU's process, named after
/// the metric, at the kernel's start or (no timestamps) its launch call's, relative to the
/// file's time base; the unavailable (NaN) value has no event, and none says 0 for it.
#[test]
fn counters_become_counter_events_and_the_unavailable_one_is_left_out() {
    let mut t = cutrace_testkit::counters::counter_trace();
    let base = chrome::time_base(&t);
    let mut out = Vec::new();
    chrome::write_trace(&mut out, &mut t).unwrap();
    let evs = events(&out);
    let c: Vec<&Ev> = evs.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(c.len(), 14, "5 profiled kernels × 3 metrics, less one NaN");
    let pct = cutrace_testkit::counters::WARPS_PCT;
    let at = |e: &Ev| ns(&e.ts) + base;
    // Corr 1: no timestamps, launch call at 1000 ns; 100 CTAs on GPU 0.
    assert!(c
        .iter()
        .any(|e| e["name"] == cutrace_testkit::counters::CTAS
            && e["pid"] == 0
            && at(e) == 1_000
            && e["args"]["value"] == 100.0));
    // Corr 3 (GPU 1, timed at 12000): CTAs and time, but no percentage event.
    let corr3: Vec<&&Ev> = c
        .iter()
        .filter(|e| e["pid"] == 1 && at(e) == 12_000)
        .collect();
    assert_eq!(corr3.len(), 2);
    assert!(corr3.iter().all(|e| e["name"] != pct));
    assert!(c
        .iter()
        .all(|e| e["args"]["value"].as_f64().is_some_and(f64::is_finite)));
}

/// The real `cutrace sample` fixture's PM samples as "ph":"C" events: exactly one per available
/// value, on the GPU's process, on the track `METRIC (PM sampling)`, at the sample's start,
/// with the sample's value; a NaN value (one made here) has none.
#[test]
fn pm_samples_become_counter_events_at_their_start() {
    let mut t = load(&repo().join("tests/fixtures/native/sample_pm"));
    t.pm_samples[5].value = f64::NAN;
    let mut want: Vec<(u64, String, u64, f64)> = t
        .pm_samples
        .iter()
        .filter(|s| !s.value.is_nan())
        .map(|s| {
            let name = format!("{} (PM sampling)", t.str(s.metric));
            (u64::from(s.device), name, s.start_ns, s.value)
        })
        .collect();
    assert_eq!(want.len(), t.pm_samples.len() - 1);
    let base = chrome::time_base(&t);
    let mut out = Vec::new();
    chrome::write_trace(&mut out, &mut t).unwrap();
    let evs = events(&out);
    let mut got: Vec<(u64, String, u64, f64)> = evs
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            assert_eq!(e["cat"], "gpu_pm_sample");
            (
                e["pid"].as_u64().unwrap(),
                e["name"].as_str().unwrap().to_owned(),
                ns(&e.ts) + base,
                e["args"]["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let key = |x: &(u64, String, u64, f64)| (x.0, x.1.clone(), x.2);
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(key(g), key(w));
        // The text is the shortest that reads back the same double; serde_json's own parse
        // may land one unit in the last place away.
        assert!((g.3 - w.3).abs() <= w.3.abs() * 1e-15, "{g:?} {w:?}");
    }
}

/// A rank's trace keeps its rank through the Chrome export (torch's `distributedInfo` header),
/// and its collectives (the `record_param_comms` args on each NCCL kernel, as newer Kineto
/// writes them) come back from cutrace's own importer as they were: rank 0 of the real torchrun
/// job, with two of its kernels made NCCL kernels carrying a collective each.
#[test]
fn the_rank_and_the_collectives_survive_the_chrome_export() {
    use cutrace_trace::Collective;
    let dir = Dir::new("chrome-dist");
    let mut t = load(&repo().join("tests/fixtures/native/torchrun_gloo/vm-623.cutrace"));
    let d = t.meta.distributed.clone().expect("the rank's header");
    assert_eq!((d.rank, d.world_size), (Some(0), Some(2)));
    let mut id = |s: &str| {
        t.strings.push(s.into());
        (t.strings.len() - 1) as u32
    };
    let (nccl, allreduce, pg, desc, float) = (
        id("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
        id("allreduce"),
        id("0"),
        id("default_pg"),
        id("Float"),
    );
    let mut want = Vec::new();
    for (i, seq) in [(3, 7), (9, 8)] {
        t.kernels[i].name = nccl;
        want.push(Collective {
            correlation_id: t.kernels[i].correlation_id,
            device: t.kernels[i].device,
            name: allreduce,
            group_name: Some(pg),
            group_desc: Some(desc),
            group_size: Some(2),
            seq: Some(seq),
            in_nelems: Some(262_144),
            out_nelems: Some(262_144),
            dtype: Some(float),
        });
    }
    t.collectives = want.clone();
    let original = t.clone();
    let out = dir.path("t.json");
    chrome::write_trace(&mut std::fs::File::create(&out).unwrap(), &mut t).unwrap();
    // HTA finds a file's rank with the pattern `"rank":\s+(\d+)`, line by line: the header
    // must have the space torch writes, on the first line that has a rank.
    let text = std::fs::read_to_string(&out).unwrap();
    let first = text.lines().find(|l| l.contains("\"rank\":")).unwrap();
    assert!(
        first.contains("\"distributedInfo\": {\"rank\": 0, \"world_size\": 2"),
        "{first}"
    );
    let back = load(&out);
    let b = back
        .meta
        .distributed
        .clone()
        .expect("distributedInfo read back");
    assert_eq!((b.rank, b.world_size), (d.rank, d.world_size));
    let text = |t: &Trace, c: &Collective| {
        format!(
            "{} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            c.correlation_id,
            c.device,
            t.str(c.name),
            c.group_name.map(|s| t.str(s)),
            c.group_desc.map(|s| t.str(s)),
            c.group_size,
            c.seq,
            c.in_nelems,
            c.out_nelems,
            c.dtype.map(|s| t.str(s))
        )
    };
    let got: Vec<String> = back.collectives.iter().map(|c| text(&back, c)).collect();
    let want: Vec<String> = want.iter().map(|c| text(&original, c)).collect();
    assert_eq!(got, want);
}

/// CUDA's allocations and frees (`record --memory`: the driver's level, the call's correlation
/// id, no thread) come back from the Chrome export as they were, beside torch-shaped ones.
#[test]
fn driver_memory_events_round_trip() {
    use cutrace_trace::{MemoryEvent, MemoryLevel, MemoryOp, MemoryPlace};
    let dir = Dir::new("chrome-memory");
    let mut t = load(&repo().join("tests/fixtures/native/two_streams"));
    let base = t.kernels[0].start_ns;
    let ev = |i: u64, op, level| MemoryEvent {
        ts_ns: base + i * 1_001,
        process: t.meta.pid.unwrap_or(1),
        thread: 0,
        place: MemoryPlace::Gpu,
        device: 0,
        level,
        op,
        address: Some(0x7f00_0000_0000 + i * 4096),
        bytes: Some(4096 * (i + 1)),
        total_allocated: None,
        total_reserved: None,
        correlation_id: 40 + i,
    };
    t.memory = vec![
        ev(0, MemoryOp::Alloc, MemoryLevel::Driver),
        ev(1, MemoryOp::Alloc, MemoryLevel::Framework),
        ev(2, MemoryOp::Free, MemoryLevel::Driver),
    ];
    let want = t.memory.clone();
    let out = dir.path("m.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
    chrome::write_trace(&mut f, &mut t).unwrap();
    f.flush().unwrap();
    drop(f);
    assert_eq!(load(&out).memory, want);
}
