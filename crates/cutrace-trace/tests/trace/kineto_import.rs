//! Kineto import against the real torch.profiler traces captured on the H200 (tests/fixtures/kineto)
//! and against malformed inputs. Expected values come from an independent reading of the same
//! file with serde_json::Value and a string-based decimal split, not from the importer.

use std::io::Read;
use std::path::{Path, PathBuf};

use cutrace_trace::{open, CopyKind, Trace, TraceError};

fn fixtures() -> PathBuf {
    cutrace_testkit::fixture("kineto")
}

fn load(path: &Path) -> Result<Trace, TraceError> {
    open(path, &mut |_, _| {})
}

fn raw_json(path: &Path) -> String {
    let f = std::fs::File::open(path).unwrap();
    let mut s = String::new();
    flate2::read::GzDecoder::new(f)
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// Independent µs→ns: split the decimal text at the point and pad the fraction.
fn ns_by_split(text: &str) -> u64 {
    let (i, f) = text.split_once('.').unwrap_or((text, ""));
    let mut frac = f.to_string();
    while frac.len() < 3 {
        frac.push('0');
    }
    i.parse::<u64>().unwrap() * 1000 + frac.parse::<u64>().unwrap()
}

/// Every `"ts": <number>` of events with the given category, by text, in file order.
fn ts_texts(json: &str, cat: &str) -> Vec<String> {
    let needle = format!("\"cat\": \"{cat}\"");
    let mut out = Vec::new();
    for chunk in json.split("\n  {").skip(1) {
        if !chunk.to_ascii_lowercase().contains(&needle) {
            continue;
        }
        let at = chunk.find("\"ts\": ").unwrap() + 6;
        let rest = &chunk[at..];
        let end = rest.find([',', '\n']).unwrap();
        out.push(rest[..end].trim().to_string());
    }
    out
}

#[test]
fn real_traces_import_every_gpu_event_exactly() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".json.gz") {
            continue;
        }
        seen += 1;
        let trace = load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let json = raw_json(&path);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        // The oldest traces are a bare array of events.
        let events = v.get("traceEvents").unwrap_or(&v).as_array().unwrap();
        // Categories in any ASCII case: torch 1.8 wrote `Kernel`.
        let is = |e: &serde_json::Value, cat: &str| {
            e["cat"]
                .as_str()
                .is_some_and(|c| c.eq_ignore_ascii_case(cat))
        };
        let count = |cat: &str| events.iter().filter(|e| is(e, cat)).count();
        assert_eq!(trace.kernels.len(), count("kernel"), "{}", path.display());
        // ... and torch 1.8's `Memcpy`, `Memset` and `Runtime`.
        assert_eq!(trace.memcpys.len(), count("gpu_memcpy") + count("memcpy"));
        assert_eq!(trace.memsets.len(), count("gpu_memset") + count("memset"));
        assert_eq!(
            trace.api_calls.len(),
            count("cuda_runtime") + count("cuda_driver") + count("runtime")
        );
        // torch 1.8 filed its step annotations as ops (`Operator`): they are host ranges, as
        // torch writes them today.
        let op_cats = ["cpu_op", "python_function", "operator"];
        let is_op = |e: &serde_json::Value| op_cats.iter().any(|c| is(e, c));
        let step_ops = events
            .iter()
            .filter(|e| {
                is_op(e)
                    && !is(e, "python_function")
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("ProfilerStep#"))
            })
            .count();
        assert_eq!(
            trace.ranges.len(),
            count("user_annotation") + count("gpu_user_annotation") + step_ops
        );
        let ops = events.iter().filter(|e| is_op(e)).count();
        assert_eq!(trace.host_ops.len(), ops - step_ops, "{}", path.display());
        // Start times exact to the nanosecond, in file order.
        let mut expected: Vec<u64> = ts_texts(&json, "kernel")
            .iter()
            .map(|t| ns_by_split(t))
            .collect();
        let mut got: Vec<u64> = trace.kernels.iter().map(|k| k.start_ns).collect();
        expected.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expected, "{}", path.display());
        // Correlation ids and streams come through.
        for (k, e) in trace
            .kernels
            .iter()
            .zip(events.iter().filter(|e| is(e, "kernel")))
        {
            assert_eq!(k.correlation_id, e["args"]["correlation"].as_u64().unwrap());
            // A stream written as a hex string (ROCm) reads as its number.
            let stream = &e["args"]["stream"];
            let want = stream.as_u64().unwrap_or_else(|| {
                let hex = stream.as_str().unwrap().strip_prefix("0x").unwrap();
                u64::from_str_radix(hex, 16).unwrap()
            });
            assert_eq!(k.stream, want);
            assert_eq!(trace.str(k.name), e["name"].as_str().unwrap());
        }
        assert_eq!(
            trace.meta.cupti_version,
            v["cupti_version"].as_u64().map(|x| x as u32)
        );
        // The H200 captures have one GPU; a fixture from elsewhere has its own.
        // The oldest traces name no GPU.
        match v.get("deviceProperties").and_then(|p| p.as_array()) {
            None => assert!(trace.meta.devices.is_empty()),
            Some(props) => {
                assert_eq!(trace.meta.devices.len(), props.len());
                let sms = props[0]["numSms"].as_u64().map(|n| n as u32);
                assert_eq!(trace.meta.devices[0].sm_count, sms);
                if props[0]["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("H200"))
                {
                    assert_eq!((props.len(), sms), (1, Some(132)));
                }
            }
        }
        // Every `[memory]` event is an allocation or free of the model.
        let memory = events.iter().filter(|e| e["name"] == "[memory]").count();
        assert_eq!(trace.memory.len(), memory, "{}", path.display());
        assert!(trace.meta.complete);
        let skipped: u64 = trace.meta.skipped_events.iter().map(|(_, n)| n).sum();
        let modelled = trace.kernels.len()
            + trace.memcpys.len()
            + trace.memsets.len()
            + trace.api_calls.len()
            + trace.syncs.len()
            + trace.ranges.len()
            + trace.overheads.len()
            + trace.memory.len()
            + trace.host_ops.len();
        assert_eq!(
            modelled as u64 + skipped,
            events.len() as u64,
            "nothing vanishes silently"
        );
    }
    assert!(seen >= 5, "expected the five captured traces, found {seen}");
}

#[test]
fn copies_keep_direction_and_bytes() {
    let trace = load(&fixtures().join("copy_overlap.json.gz")).unwrap();
    let h2d: Vec<_> = trace
        .memcpys
        .iter()
        .filter(|m| m.kind == CopyKind::HtoD)
        .collect();
    assert_eq!(h2d.len(), 4);
    assert!(h2d.iter().all(|m| m.bytes == 16 << 20));
    assert!(trace.memcpys.iter().any(|m| m.kind == CopyKind::DtoH));
}

fn write(dir: &Path, name: &str, body: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// A temporary directory for one test, removed on drop.
fn tempdir(tag: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("kineto-{tag}"))
}

const ONE_KERNEL: &str = r#"{"traceEvents": [
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5153875767895.669, "dur": 1.5,
  "args": {"device": 0, "stream": 7, "correlation": 11}}
]}"#;

#[test]
fn exact_nanoseconds_from_decimal_text() {
    let d = tempdir("exact");
    let t = load(&write(&d, "t.json", ONE_KERNEL.as_bytes())).unwrap();
    assert_eq!(t.kernels[0].start_ns, 5_153_875_767_895_669);
    assert_eq!(t.kernels[0].end_ns, 5_153_875_767_897_169);
}

#[test]
fn malformed_inputs_are_named_errors_not_panics() {
    let d = tempdir("bad");
    let cases: &[(&str, &[u8], &str)] = &[
        ("empty.json", b"", "empty"),
        ("ws.json", b"  \n", "empty"),
        ("truncated.json", &ONE_KERNEL.as_bytes()[..120], "truncated"),
        ("notkineto.json", br#"{"hello": [1, 2, 3]}"#, "no \"traceEvents\""),
        ("noevents.json", br#"{"traceEvents": []}"#, "empty"),
        ("text.json", b"hello world", "neither"),
        (
            "badts.json",
            br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": "abc", "dur": 1}]}"#,
            "\"ts\"",
        ),
        (
            "nots.json",
            br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "dur": 1}]}"#,
            "no \"ts\"",
        ),
        (
            "badargs.json",
            br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "args": {"device": "seven"}}]}"#,
            "\"device\"",
        ),
        (
            "badsep.json",
            br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1} {"ph": "X"}]}"#,
            "expected ',' or ']'",
        ),
        ("trailing.json", br#"{"traceEvents": [{"ph": "i"}]} x"#, "after the end"),
        ("gzbad.json.gz", &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3], ""),
    ];
    for (name, body, needle) in cases {
        let p = write(&d, name, body);
        let err = load(&p).expect_err(name).to_string();
        assert!(
            err.contains(name),
            "{name}: error does not name the file: {err}"
        );
        assert!(
            err.contains(needle),
            "{name}: expected '{needle}' in: {err}"
        );
    }
}

#[test]
fn every_truncation_of_a_real_trace_is_an_error_not_a_panic() {
    let json = raw_json(&fixtures().join("two_streams.json.gz"));
    let d = tempdir("trunc");
    let bytes = json.as_bytes();
    let step = (bytes.len() / 400).max(1);
    for cut in (0..bytes.len() - 2).step_by(step) {
        let p = write(&d, "cut.json", &bytes[..cut]);
        match load(&p) {
            Err(e) => assert!(e.to_string().contains("cut.json")),
            Ok(_) => panic!(
                "a trace cut at byte {cut} of {} imported as if whole",
                bytes.len()
            ),
        }
    }
}
