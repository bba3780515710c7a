//! `perfetto::write_perfetto` on every fixture, in process: the export is decoded here with a small protobuf
//! reader written apart from the writer, its slices rebuilt the way trace_processor does (an END
//! closes the innermost open slice of its track), and compared with the trace: every kernel,
//! copy, memset, sync, API call, NVTX range and mark is there with its exact start and end, on a
//! track of its device and stream (or its process and thread); every device record that joins an
//! API call has a flow from that call. Where the `perfetto` Python package is installed, its
//! `perfetto_trace.proto` bindings also parse the export and find no unknown field
//! (tests/perfetto_schema_check.py).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;

use cutrace_export::perfetto;
use cutrace_trace::{RangeDomain, ReadOptions, Trace};

use cutrace_testkit::{loud, native_fixtures, repo as root, Dir};

struct Pb<'a> {
    b: &'a [u8],
    p: usize,
}

/// A field's value: varint, fixed 64-bit, or bytes.
enum F<'a> {
    V(u64),
    X(u64),
    B(&'a [u8]),
}

impl<'a> Pb<'a> {
    fn new(b: &'a [u8]) -> Self {
        Pb { b, p: 0 }
    }
    fn varint(&mut self) -> u64 {
        let (mut v, mut s) = (0u64, 0);
        loop {
            let x = self.b[self.p];
            self.p += 1;
            v |= u64::from(x & 0x7f) << s;
            if x < 0x80 {
                return v;
            }
            s += 7;
        }
    }
    fn next(&mut self) -> Option<(u64, F<'a>)> {
        if self.p >= self.b.len() {
            return None;
        }
        let k = self.varint();
        let v = match k & 7 {
            0 => F::V(self.varint()),
            1 => {
                self.p += 8;
                F::X(u64::from_le_bytes(
                    self.b[self.p - 8..self.p].try_into().unwrap(),
                ))
            }
            2 => {
                let n = self.varint() as usize;
                self.p += n;
                F::B(&self.b[self.p - n..self.p])
            }
            w => panic!("wire type {w}"),
        };
        Some((k >> 3, v))
    }
}

#[derive(Debug, Clone)]
struct Slice {
    /// Position of its BEGIN among the file's events.
    order: usize,
    track: u64,
    name: String,
    cat: String,
    start: u64,
    end: u64,
    args: BTreeMap<String, String>,
    flows: Vec<u64>,
    ends_flows: Vec<u64>,
}

#[derive(Default, Debug)]
struct TrackInfo {
    name: String,
    parent: Option<u64>,
    thread: Option<(i64, i64)>,
    process: Option<i64>,
    /// A counter track (it has a CounterDescriptor).
    counter: bool,
}

struct Decoded {
    tracks: HashMap<u64, TrackInfo>,
    slices: Vec<Slice>,
    instants: Vec<Slice>,
    /// Counter values: (track, time, value).
    counters: Vec<(u64, u64, f64)>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

fn decode(file: &[u8]) -> Decoded {
    let mut tracks = HashMap::new();
    let (mut names, mut cats, mut keys) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut open: HashMap<u64, Vec<Slice>> = HashMap::new();
    let mut slices = Vec::new();
    let mut instants = Vec::new();
    let mut counters = Vec::new();
    let mut cleared = false;
    let mut last_ts = 0;
    let mut top = Pb::new(file);
    while let Some((field, v)) = top.next() {
        assert_eq!(field, 1, "Trace.packet");
        let F::B(pk) = v else { panic!("packet") };
        let (mut ts, mut te, mut td, mut seq) = (None, None, None, 0);
        let mut p = Pb::new(pk);
        while let Some((f, v)) = p.next() {
            match (f, v) {
                (8, F::V(x)) => ts = Some(x),
                (10, F::V(x)) => seq = x,
                (13, F::V(x)) => {
                    if x & 1 == 1 {
                        cleared = true;
                    }
                    if x & 2 == 2 {
                        assert!(cleared, "interning before the state was cleared");
                    }
                }
                (11, F::B(b)) => te = Some(b),
                (60, F::B(b)) => td = Some(b),
                (12, F::B(b)) => {
                    let mut d = Pb::new(b);
                    while let Some((kind, F::B(e))) = d.next() {
                        let (mut iid, mut s) = (0, String::new());
                        let mut m = Pb::new(e);
                        while let Some((f, v)) = m.next() {
                            match (f, v) {
                                (1, F::V(x)) => iid = x,
                                (2, F::B(x)) => s = text(x),
                                _ => panic!("interned entry"),
                            }
                        }
                        let map = match kind {
                            1 => &mut cats,
                            2 => &mut names,
                            3 => &mut keys,
                            k => panic!("interned kind {k}"),
                        };
                        assert!(map.insert(iid, s).is_none(), "iid {iid} interned twice");
                    }
                }
                (f, _) => panic!("unexpected TracePacket field {f}"),
            }
        }
        // Descriptors on a sequence of their own (not the events', where a thread descriptor
        // would become the default thread of every GPU event).
        if td.is_some() {
            assert_eq!(seq, 2, "descriptors on sequence 2");
        }
        if te.is_some() {
            // Counter values go on a sequence of their own, which interns nothing.
            assert!(seq == 1 || seq == 3, "events on sequence 1, counters on 3");
        }
        if let Some(b) = td {
            let mut info = TrackInfo::default();
            let mut uuid = 0;
            let mut d = Pb::new(b);
            while let Some((f, v)) = d.next() {
                match (f, v) {
                    (1, F::V(x)) => uuid = x,
                    (2, F::B(x)) => info.name = text(x),
                    (5, F::V(x)) => info.parent = Some(x),
                    (3, F::B(x)) => {
                        let mut m = Pb::new(x);
                        while let Some((f, v)) = m.next() {
                            match (f, v) {
                                (1, F::V(x)) => info.process = Some(x as i64),
                                (6, F::B(x)) => info.name = text(x),
                                _ => panic!("process descriptor"),
                            }
                        }
                    }
                    (4, F::B(x)) => {
                        let (mut pid, mut tid) = (0, 0);
                        let mut m = Pb::new(x);
                        while let Some((f, v)) = m.next() {
                            match (f, v) {
                                (1, F::V(x)) => pid = x as i64,
                                (2, F::V(x)) => tid = x as i64,
                                (5, F::B(x)) => info.name = text(x),
                                _ => panic!("thread descriptor"),
                            }
                        }
                        info.thread = Some((pid, tid));
                    }
                    (11 | 12, F::V(_)) => {}
                    (8, F::B(_)) => info.counter = true,
                    (f, _) => panic!("track descriptor field {f}"),
                }
            }
            assert!(tracks.insert(uuid, info).is_none(), "track {uuid} twice");
        }
        if let Some(b) = te {
            let ts = ts.expect("a track event has a timestamp");
            assert!(ts >= last_ts, "events in time order");
            last_ts = ts;
            let mut s = Slice {
                order: slices.len() + instants.len() + open.values().map(Vec::len).sum::<usize>(),
                track: 0,
                name: String::new(),
                cat: String::new(),
                start: ts,
                end: ts,
                args: BTreeMap::new(),
                flows: vec![],
                ends_flows: vec![],
            };
            let mut ty = 0;
            let mut value = None;
            let mut e = Pb::new(b);
            while let Some((f, v)) = e.next() {
                match (f, v) {
                    (11, F::V(x)) => s.track = x,
                    (9, F::V(x)) => ty = x,
                    (10, F::V(x)) => s.name = names[&x].clone(),
                    (3, F::V(x)) => s.cat = cats[&x].clone(),
                    (47, F::X(x)) => s.flows.push(x),
                    (48, F::X(x)) => s.ends_flows.push(x),
                    (44, F::X(x)) => value = Some(f64::from_bits(x)),
                    (4, F::B(x)) => {
                        let (mut k, mut val) = (String::new(), String::new());
                        let mut m = Pb::new(x);
                        while let Some((f, v)) = m.next() {
                            match (f, v) {
                                (1, F::V(i)) => k = keys[&i].clone(),
                                (3, F::V(u)) => val = u.to_string(),
                                (4, F::V(i)) => val = (i as i64).to_string(),
                                (5, F::X(d)) => val = f64::from_bits(d).to_string(),
                                (6, F::B(t)) => val = text(t),
                                _ => panic!("debug annotation"),
                            }
                        }
                        s.args.insert(k, val);
                    }
                    (f, _) => panic!("track event field {f}"),
                }
            }
            assert!(
                tracks.contains_key(&s.track),
                "event on an undeclared track"
            );
            match ty {
                1 => open.entry(s.track).or_default().push(s),
                2 => {
                    let mut b = open
                        .get_mut(&s.track)
                        .and_then(Vec::pop)
                        .expect("an END closes an open slice");
                    b.end = ts;
                    slices.push(b);
                }
                3 => instants.push(s),
                4 => {
                    assert_eq!(seq, 3, "counter values on sequence 3");
                    assert!(tracks[&s.track].counter, "a value on a counter track");
                    counters.push((s.track, ts, value.expect("a double counter value")));
                }
                t => panic!("event type {t}"),
            }
        }
    }
    assert!(open.values().all(Vec::is_empty), "slices left open");
    Decoded {
        tracks,
        slices,
        instants,
        counters,
    }
}

/// `cutrace convert SRC ARGS… OUT`, run from the repository root.
/// The trace at `src` (relative to the repository) and its Perfetto export, in process.
fn export(src: &str) -> (Trace, Vec<u8>, perfetto::Written) {
    let t = read(src);
    let mut out = Vec::new();
    let w = perfetto::write_perfetto(&mut out, &t).unwrap();
    (t, out, w)
}

fn read(src: &str) -> Trace {
    cutrace_export::input::load(&root().join(src), &ReadOptions::default(), &mut |_, _| {}).unwrap()
}

/// Checks one export against its trace.
fn check(src: &str, d: &Decoded, t: &Trace) {
    let by_cat = |c: &str| -> Vec<&Slice> { d.slices.iter().filter(|s| s.cat == c).collect() };
    // Device records: exact times, on a track under their GPU named after their stream.
    let gpu_track = |s: &Slice| {
        let tk = &d.tracks[&s.track];
        let root = &d.tracks[&tk.parent.expect("stream tracks have a GPU parent")];
        (root.name.clone(), tk.name.clone())
    };
    let mut want: Vec<(u64, u64, u64, String)> = t
        .kernels
        .iter()
        .map(|k| {
            (
                k.start_ns,
                k.end_ns.max(k.start_ns),
                k.correlation_id,
                // Named as its process knows it (`7 (pid 491)` in a multi-process trace).
                format!("stream {}", t.meta.show_id(k.stream)),
            )
        })
        .collect();
    let mut got: Vec<(u64, u64, u64, String)> = by_cat("kernel")
        .iter()
        .map(|s| {
            let (gpu, stream) = gpu_track(s);
            assert!(gpu.starts_with("GPU "), "{src}: {gpu}");
            (
                s.start,
                s.end,
                s.args["correlation"].parse().unwrap(),
                stream.split(" (overlap").next().unwrap().to_owned(),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{src}: kernels");
    let times = |v: Vec<&Slice>| {
        let mut x: Vec<(u64, u64)> = v.iter().map(|s| (s.start, s.end)).collect();
        x.sort();
        x
    };
    let spans = |it: &mut dyn Iterator<Item = (u64, u64)>| {
        let mut x: Vec<(u64, u64)> = it.map(|(s, e)| (s, e.max(s))).collect();
        x.sort();
        x
    };
    assert_eq!(
        times(by_cat("gpu_memcpy")),
        spans(&mut t.memcpys.iter().map(|m| (m.start_ns, m.end_ns))),
        "{src}: memcpys"
    );
    assert_eq!(
        times(by_cat("gpu_memset")),
        spans(&mut t.memsets.iter().map(|m| (m.start_ns, m.end_ns))),
        "{src}: memsets"
    );
    assert_eq!(
        times(by_cat("cuda_sync")),
        spans(&mut t.syncs.iter().map(|m| (m.start_ns, m.end_ns))),
        "{src}: syncs"
    );
    // Host: API calls on their thread's track (or one of its overlap rows), exact times.
    let mut api: Vec<&Slice> = by_cat("cuda_runtime");
    api.extend(by_cat("cuda_driver"));
    assert_eq!(
        times(api.clone()),
        spans(&mut t.api_calls.iter().map(|a| (a.start_ns, a.end_ns))),
        "{src}: API calls"
    );
    for s in &api {
        let tk = &d.tracks[&s.track];
        let thread = tk.thread.or_else(|| {
            tk.parent
                .and_then(|p| d.tracks[&p].process.map(|p| (p, -1)))
        });
        assert!(thread.is_some(), "{src}: API call off a host track");
    }
    let nvtx: Vec<&Slice> = by_cat("user_annotation");
    let host_ranges: Vec<_> = t
        .ranges
        .iter()
        .filter(|r| r.domain == RangeDomain::Host)
        .collect();
    assert_eq!(
        times(nvtx.clone()),
        spans(&mut host_ranges.iter().map(|r| (r.start_ns, r.end_ns))),
        "{src}: NVTX ranges"
    );
    let mut range_names: Vec<&str> = nvtx.iter().map(|s| s.name.as_str()).collect();
    let mut want_names: Vec<&str> = host_ranges.iter().map(|r| t.str(r.name)).collect();
    range_names.sort();
    want_names.sort();
    assert_eq!(range_names, want_names, "{src}: range names");
    // GPU annotation ranges: exact times, on an annotation row of their stream's GPU.
    let mut gpu_ranges: Vec<(u64, u64, String)> = t
        .ranges
        .iter()
        .filter(|r| r.domain == RangeDomain::Gpu)
        .map(|r| {
            let label = r.stream.map_or("annotations".to_string(), |s| {
                format!("stream {s} annotations")
            });
            (r.start_ns, r.end_ns.max(r.start_ns), label)
        })
        .collect();
    let mut got_ranges: Vec<(u64, u64, String)> = by_cat("gpu_user_annotation")
        .iter()
        .map(|s| {
            let (gpu, row) = gpu_track(s);
            assert!(gpu.starts_with("GPU "), "{src}: {gpu}");
            (s.start, s.end, row.split(" (").next().unwrap().to_owned())
        })
        .collect();
    gpu_ranges.sort();
    got_ranges.sort();
    assert_eq!(got_ranges, gpu_ranges, "{src}: GPU annotation ranges");
    assert_eq!(d.instants.len(), t.marks.len(), "{src}: marks");
    assert_eq!(
        by_cat("overhead").len(),
        t.overheads.len(),
        "{src}: overheads"
    );
    // Flows: each joins one API call and one device record of the same correlation id. The
    // call is read first and the record ends the flow; where the record starts before the call
    // (clock skew) it only steps the flow, and the arrow is drawn from it to the call.
    let mut on: HashMap<u64, Vec<(&Slice, bool)>> = HashMap::new();
    for s in &d.slices {
        for &f in &s.flows {
            on.entry(f).or_default().push((s, false));
        }
        for &f in &s.ends_flows {
            on.entry(f).or_default().push((s, true));
        }
    }
    let is_api = |s: &Slice| s.cat == "cuda_runtime" || s.cat == "cuda_driver";
    for (f, v) in &on {
        assert_eq!(v.len(), 2, "{src}: flow {f} on {} slices", v.len());
        let (call, rec) = if is_api(v[0].0) {
            (v[0], v[1])
        } else {
            (v[1], v[0])
        };
        assert!(
            is_api(call.0) && !call.1,
            "{src}: flow {f} starts on an API call"
        );
        assert!(!is_api(rec.0), "{src}: flow {f} reaches a device record");
        assert_eq!(
            call.0.args["correlation"], rec.0.args["correlation"],
            "{src}: flow {f}"
        );
        if rec.1 {
            assert!(
                call.0.order < rec.0.order,
                "{src}: flow {f} ends before it starts"
            );
        } else {
            assert!(
                rec.0.start < call.0.start,
                "{src}: flow {f} does not end on its record"
            );
        }
    }
    let corr: HashSet<u64> = t.api_calls.iter().map(|a| a.correlation_id).collect();
    for s in &d.slices {
        if matches!(s.cat.as_str(), "kernel" | "gpu_memcpy" | "gpu_memset") {
            let joined = corr.contains(&s.args["correlation"].parse().unwrap());
            let n = s.ends_flows.len() + s.flows.len();
            assert_eq!(n, usize::from(joined), "{src}: {}", s.name);
        }
    }
    check_counters(src, d, t);
    // Kernel names as the report shows them (demangled), CUPTI's kept as an argument.
    for s in by_cat("kernel") {
        if let Some(m) = s.args.get("mangled") {
            assert!(m.starts_with("_Z") && !s.name.starts_with("_Z"), "{src}");
        }
    }
}

/// Hardware counters: every available value of a profiled kernel on the counter track of its
/// metric under its GPU, at the kernel's start, or at its launch call's start when CUPTI wrote
/// no timestamps for it; NaN values have none. PM samples: every available value on the track
/// `METRIC (PM sampling)` under its GPU, at the sample's start.
fn check_counters(src: &str, d: &Decoded, t: &Trace) {
    let index = cutrace_analysis::correlate::ApiIndex::build(&t.api_calls);
    let mut want: Vec<(String, String, u64, u64)> = Vec::new();
    for m in &t.kernel_metrics {
        let Some(k) = t
            .kernels
            .iter()
            .find(|k| k.correlation_id == m.correlation_id)
        else {
            continue;
        };
        if m.value.is_nan() {
            continue;
        }
        let at = if k.start_ns == 0 && k.end_ns == 0 {
            match index.get(k.correlation_id) {
                Some(i) => t.api_calls[i].start_ns,
                None => continue,
            }
        } else {
            k.start_ns
        };
        want.push((
            format!("GPU {}", m.device),
            t.str(m.metric).to_owned(),
            at,
            m.value.to_bits(),
        ));
    }
    for p in t.pm_samples.iter().filter(|p| !p.value.is_nan()) {
        want.push((
            format!("GPU {}", p.device),
            format!("{} (PM sampling)", t.str(p.metric)),
            p.start_ns,
            p.value.to_bits(),
        ));
    }
    let memory_tracks = want_memory(t, &mut want);
    let mut got: Vec<(String, String, u64, u64)> = d
        .counters
        .iter()
        .map(|&(track, ts, v)| {
            let tk = &d.tracks[&track];
            let gpu = &d.tracks[&tk.parent.expect("a counter track under its GPU")].name;
            let gpu = gpu.split(':').next().unwrap().to_owned();
            (gpu, tk.name.clone(), ts, v.to_bits())
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{src}: counter values");
    let tracks = d.tracks.values().filter(|x| x.counter).count();
    let mut pairs: Vec<(u32, u32)> = t
        .kernel_metrics
        .iter()
        .map(|m| (m.device, m.metric))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut pm_pairs: Vec<(u32, u32)> = t.pm_samples.iter().map(|m| (m.device, m.metric)).collect();
    pm_pairs.sort_unstable();
    pm_pairs.dedup();
    assert_eq!(
        tracks,
        pairs.len() + pm_pairs.len() + memory_tracks,
        "{src}: one counter track per metric per GPU, and per GPU memory series"
    );
}

/// GPU memory, replayed here apart from the exporter: per (level, pid, GPU), after each event in
/// time order (ties in the trace's order), the live bytes (an allocation ends at a free or
/// another allocation at its address; one of unknown size adds 0) on `memory live bytes
/// (LEVEL, pid P)`, and torch's totals on `memory Total Allocated …` / `… Total Reserved …`.
/// Returns the tracks expected.
fn want_memory(t: &Trace, want: &mut Vec<(String, String, u64, u64)>) -> usize {
    use cutrace_trace::{MemoryLevel, MemoryOp, MemoryPlace};
    let mut pools: BTreeMap<(String, u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, m) in t.memory.iter().enumerate() {
        if m.place == MemoryPlace::Gpu {
            let level = match m.level {
                MemoryLevel::Framework => "framework",
                MemoryLevel::Driver => "driver",
            };
            pools
                .entry((level.to_owned(), m.process, m.device))
                .or_default()
                .push(i);
        }
    }
    let mut tracks = 0;
    for ((level, pid, device), mut idx) in pools {
        idx.sort_by_key(|&i| t.memory[i].ts_ns);
        let gpu = format!("GPU {device}");
        let name = |what: &str| format!("memory {what} ({level}, pid {pid})");
        let mut live: HashMap<u64, u64> = HashMap::new();
        // Without an address, bytes by size alone: a free takes back what is live, if it can.
        let mut unaddressed = 0u64;
        let (mut has_alloc, mut has_res) = (false, false);
        for i in idx {
            let m = &t.memory[i];
            let size = m.bytes.unwrap_or(0);
            match (m.op, m.address) {
                (MemoryOp::Alloc, Some(a)) => {
                    live.insert(a, size);
                }
                (MemoryOp::Free, Some(a)) => {
                    live.remove(&a);
                }
                (MemoryOp::Alloc, None) => unaddressed += size,
                (MemoryOp::Free, None) if size > 0 && size <= unaddressed => unaddressed -= size,
                _ => {}
            }
            let bytes: u64 = live.values().sum::<u64>() + unaddressed;
            want.push((
                gpu.clone(),
                name("live bytes"),
                m.ts_ns,
                (bytes as f64).to_bits(),
            ));
            for (v, what, seen) in [
                (m.total_allocated, "Total Allocated", &mut has_alloc),
                (m.total_reserved, "Total Reserved", &mut has_res),
            ] {
                if let Some(v) = v {
                    *seen = true;
                    want.push((gpu.clone(), name(what), m.ts_ns, (v as f64).to_bits()));
                }
            }
        }
        tracks += 1 + usize::from(has_alloc) + usize::from(has_res);
    }
    tracks
}

#[test]
fn a_profile_trace_exports_its_counters_but_not_the_unavailable_ones() {
    let t = cutrace_testkit::counters::counter_trace();
    let mut out = Vec::new();
    perfetto::write_perfetto(&mut out, &t).unwrap();
    let d = decode(&out);
    check_counters("counter_trace", &d, &t);
    // 5 profiled kernels × 3 metrics, less the one NaN.
    assert_eq!(d.counters.len(), 14);
    assert!(d.counters.iter().all(|c| c.2.is_finite()));
}

#[test]
fn every_fixture_exports_to_perfetto_with_every_record_and_flow() {
    let tmp = Dir::new("perfetto-every");
    let mut sources: Vec<String> = native_fixtures(&root())
        .into_iter()
        .map(|p| format!("tests/fixtures/native/{p}"))
        .collect();
    for e in std::fs::read_dir(root().join("tests/fixtures/kineto")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".json.gz") || name.ends_with(".json") {
            sources.push(format!("tests/fixtures/kineto/{name}"));
        }
    }
    sources.sort();
    sources.push("examples/two_streams.json.gz".into());
    sources.push("tests/fixtures/perfetto/crossing.json".into());
    let py = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !py {
        loud!(
            "SKIPPED (the perfetto Python package is not installed): parsing the exports with \
             Perfetto's own perfetto_trace.proto bindings; the decoding checks below still run"
        );
    }
    for (i, src) in sources.iter().enumerate() {
        if !root().join(src).exists() {
            panic!("{src} is missing");
        }
        let (t, bytes, _) = export(src);
        let d = decode(&bytes);
        check(src, &d, &t);
        if py {
            let out = tmp.path(&format!("{i}.pftrace"));
            std::fs::write(&out, &bytes).unwrap();
            let o = Command::new("python3")
                .arg(root().join("tests/perfetto_schema_check.py"))
                .arg(&out)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{src}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}
/// The hand-made cases (tests/fixtures/perfetto/README.md): a GPU range crossing a kernel keeps
/// both slices whole; a kernel that starts before its call still gets its arrow.
#[test]
fn crossing_ranges_and_skewed_launches_come_out_right() {
    let (_, bytes, _) = export("tests/fixtures/perfetto/crossing.json");
    let d = decode(&bytes);
    let get = |name: &str| d.slices.iter().find(|s| s.name == name).unwrap().clone();
    let (a, r) = (get("kA"), get("R"));
    assert_eq!((a.start, a.end), (1_020_000, 1_120_000));
    assert_eq!((r.start, r.end), (1_070_000, 1_170_000));
    assert_ne!(a.track, r.track, "the crossing range has a row of its own");
    assert!(d.tracks[&r.track].name.starts_with("stream 7 annotations"));
    let b = get("kB");
    assert_eq!(b.flows.len() + b.ends_flows.len(), 1);
    assert_eq!(
        b.flows.len(),
        1,
        "kB starts before its call: a flow step, not an end"
    );
    let c = get("kC");
    assert_eq!(
        c.ends_flows.len(),
        1,
        "kC starts with its call: the call is read first"
    );
    let call_c = d
        .slices
        .iter()
        .find(|s| s.flows.contains(&c.ends_flows[0]) && s.cat == "cuda_runtime")
        .unwrap();
    assert!(
        call_c.order < c.order,
        "at one time the call's BEGIN comes first"
    );
    let step = get("step");
    let crossing = get("crosses step");
    assert_eq!((crossing.start, crossing.end), (1_250_000, 1_450_000));
    assert_ne!(step.track, crossing.track);
}
