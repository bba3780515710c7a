//! Mutating what cutrace does not compute from never refuses a real trace: for every real
//! torch.profiler trace in tests/fixtures/kineto, fields other than a kernel's device and times
//! are rewritten with a seeded random generator (values of other types, hex and negative ids,
//! unknown keys, names of non-kernel events, Kineto's log members, the key order of every
//! event) and the trace must still read, with the same kernels at the same times. Mutating a
//! kernel's device or times may refuse the trace, and then the error names the file, the
//! position and the field.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cutrace_trace::{open, Trace};
use serde_json::value::RawValue;

type Obj = BTreeMap<String, Box<RawValue>>;

/// xorshift64*: a small seeded generator, so a failure replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, per_100: u64) -> bool {
        self.below(100) < per_100
    }
}

/// Values of every JSON type, including ones that look like ids to a lenient reader.
const ODD_VALUES: &[&str] = &[
    "-1",
    "\"0x1f\"",
    "\"0X0\"",
    "\"garbage\"",
    "null",
    "true",
    "false",
    "[1, [2, {\"a\": \"}]\"}]]",
    "{\"nested\": {\"x\": [1, 2]}, \"s\": \"{\"}",
    "1.5e300",
    "-0.25",
    "18446744073709551616",
    "\"\\u00e9\\ud83d\\ude00 \\\"quoted\\\" \\\\\"",
    "\"\"",
    "[]",
    "{}",
];

fn odd(rng: &mut Rng) -> Box<RawValue> {
    raw(ODD_VALUES[rng.below(ODD_VALUES.len() as u64) as usize])
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

fn fixtures() -> Vec<PathBuf> {
    let dir = cutrace_testkit::fixture("kineto");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "the real Kineto fixtures are missing");
    v
}

fn read_json(path: &Path) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// What the numbers are computed from: each kernel's place and times, with its name.
fn kernels(t: &Trace) -> Vec<(u32, u64, u64, u64, String)> {
    t.kernels
        .iter()
        .map(|k| {
            (
                k.device,
                k.stream,
                k.start_ns,
                k.end_ns,
                t.str(k.name).to_owned(),
            )
        })
        .collect()
}

fn cat_of(ev: &Obj) -> String {
    ev.get("cat")
        .and_then(|c| serde_json::from_str::<String>(c.get()).ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Rewrites one event. Kernels keep their device, ts, dur, name and stream (the stream may be
/// written as a hex string, as ROCm does); everything else may change.
fn mutate_event(ev: &mut Obj, rng: &mut Rng) {
    let kernel = cat_of(ev) == "kernel";
    if rng.chance(20) {
        ev.insert(format!("unknown key {}", rng.below(5)), odd(rng));
    }
    if !kernel {
        for key in ["name", "ts", "dur", "pid", "tid", "s", "id", "bp"] {
            if ev.contains_key(key) && rng.chance(8) {
                ev.insert(key.into(), odd(rng));
            }
        }
    }
    let Some(args) = ev.get("args") else {
        if !kernel && rng.chance(5) {
            ev.insert("args".into(), odd(rng));
        }
        return;
    };
    let Ok(mut a) = serde_json::from_str::<Obj>(args.get()) else {
        return;
    };
    let keep: &[&str] = if kernel { &["device", "stream"] } else { &[] };
    let keys: Vec<String> = a.keys().cloned().collect();
    for k in keys {
        if keep.contains(&k.as_str()) {
            continue;
        }
        if rng.chance(if kernel { 15 } else { 25 }) {
            a.insert(k, odd(rng));
        }
    }
    if let Some(s) = a.get("stream").map(|s| s.get().to_owned()) {
        if let Ok(n) = s.parse::<u64>() {
            if rng.chance(30) {
                a.insert("stream".into(), raw(&format!("\"0x{n:x}\"")));
            }
        } else if !kernel && rng.chance(50) {
            a.insert("stream".into(), odd(rng));
        }
    }
    if rng.chance(15) {
        a.insert(format!("unknown arg {}", rng.below(3)), odd(rng));
    }
    if !kernel && rng.chance(3) {
        ev.insert("args".into(), odd(rng));
        return;
    }
    ev.insert("args".into(), raw(&serde_json::to_string(&a).unwrap()));
}

/// The whole trace, mutated; events are written with their keys sorted (another order than
/// Kineto's), and the top level gains odd members of the names Kineto uses.
fn mutate(json: &str, seed: u64) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    // The oldest traces are a bare array of events: mutated as one, and kept one.
    if json.trim_start().starts_with('[') {
        let mut events: Vec<Obj> = serde_json::from_str(json).unwrap();
        for ev in &mut events {
            if rng.chance(60) {
                mutate_event(ev, &mut rng);
            }
        }
        return serde_json::to_string(&events).unwrap();
    }
    let mut top: Obj = serde_json::from_str(json).unwrap();
    let mut events: Vec<Obj> = serde_json::from_str(top["traceEvents"].get()).unwrap();
    for ev in &mut events {
        if rng.chance(60) {
            mutate_event(ev, &mut rng);
        }
    }
    top.insert(
        "traceEvents".into(),
        raw(&serde_json::to_string(&events).unwrap()),
    );
    for key in [
        "distributedInfo",
        "deviceProperties",
        "cupti_version",
        "cuda_driver_version",
        "INFO",
        "WARNING",
        "schemaVersion",
        "trace_id",
        "baseTimeNanoseconds",
    ] {
        if rng.chance(30) {
            top.insert(key.into(), odd(&mut rng));
        }
    }
    serde_json::to_string(&top).unwrap()
}

fn load(dir: &cutrace_testkit::Dir, name: &str, json: &str) -> Result<Trace, String> {
    let p = dir.path(name);
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(json.as_bytes()).unwrap();
    gz.finish().unwrap();
    open(&p, &mut |_, _| {}).map_err(|e| e.to_string())
}

#[test]
fn mutating_fields_cutrace_does_not_compute_from_never_refuses_a_real_trace() {
    let dir = cutrace_testkit::Dir::new("kineto-fuzz");
    let mut runs = 0;
    let mut unread_seen = 0u64;
    for path in fixtures() {
        let json = read_json(&path);
        let read = open(&path, &mut |_, _| {}).unwrap();
        let want = kernels(&read);
        // `no_gpu_records` holds launch calls only, on purpose: it must still never be refused.
        assert!(
            !want.is_empty() || !read.api_calls.is_empty(),
            "{}: no kernels or API calls",
            path.display()
        );
        for seed in 0..12 {
            let mutated = mutate(&json, seed);
            let got = load(&dir, "mutated.json.gz", &mutated)
                .unwrap_or_else(|e| panic!("{} seed {seed}: refused: {e}", path.display()));
            assert_eq!(
                kernels(&got),
                want,
                "{} seed {seed}: kernels changed",
                path.display()
            );
            unread_seen += got.meta.unread_values.iter().map(|(_, n)| n).sum::<u64>();
            runs += 1;
        }
    }
    assert!(runs >= 96);
    // The mutations did reach fields that are read (and were counted, not fatal).
    assert!(unread_seen > 0);
}

/// A kernel's device or times that do not read refuse the trace, naming the file, the byte
/// offset and the field.
#[test]
fn a_kernels_device_or_times_that_do_not_read_refuse_the_trace_with_position() {
    let dir = cutrace_testkit::Dir::new("kineto-fuzz-strict");
    let json = read_json(&cutrace_testkit::fixture("kineto/nccl_ws1.json.gz"));
    let first_kernel = json.find("\"cat\": \"kernel\"").unwrap();
    for (from, to, field) in [
        ("\"device\": 0,", "\"device\": \"gpu0\",", "\"device\""),
        ("\"device\": 0,", "\"device\": -1,", "\"device\""),
        ("\"ts\": 52", "\"ts\": \"soon\", \"x\": 52", "\"ts\""),
        ("\"dur\": ", "\"dur\": [], \"y\": ", "\"dur\""),
    ] {
        // The first occurrence at or after the first kernel (the kernel's own field: its ts
        // and dur come after its cat, its device in its args).
        let at = first_kernel + json[first_kernel..].find(from).unwrap();
        let bad = format!("{}{}{}", &json[..at], to, &json[at + from.len()..]);
        let err = load(&dir, "bad.json.gz", &bad).expect_err(to);
        assert!(err.contains("bad.json.gz"), "{err}");
        assert!(err.contains("byte") || err.contains("offset"), "{err}");
        assert!(err.contains(field), "{to}: {err}");
    }
}
