//! Kineto inputs that vary from the usual shape: capitalised categories, a `.json.gz` cut off
//! before its gzip stream ends, and times written with digits below the nanosecond.

use std::io::{Read, Write};
use std::path::Path;

use cutrace_trace::{open, HostOpKind, RangeDomain, Trace, TraceError};

fn load(path: &Path) -> Result<Trace, TraceError> {
    open(path, &mut |_, _| {})
}

/// A temporary directory for one test, removed on drop.
fn tempdir(tag: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("kvar-{tag}"))
}

fn load_text(tag: &str, json: &str) -> Result<Trace, TraceError> {
    let d = tempdir(tag);
    let p = d.join("t.json");
    std::fs::write(&p, json).unwrap();
    load(&p)
}

/// One event of each modelled category, with `cat` spelled by `spell`.
fn all_categories(spell: impl Fn(&str) -> String) -> String {
    let ev = |cat: &str, name: &str, ts: u32, extra: &str| {
        format!(
            r#"{{"ph": "X", "cat": "{}", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts},
              "dur": 5, "args": {{"device": 0, "stream": 7, "correlation": {ts}{extra}}}}}"#,
            spell(cat)
        )
    };
    let events = [
        ev("kernel", "kA", 100, ""),
        ev(
            "gpu_memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            110,
            r#", "bytes": 64"#,
        ),
        ev("gpu_memset", "Memset (Device)", 120, r#", "bytes": 8"#),
        ev("cuda_runtime", "cudaLaunchKernel", 90, ""),
        ev("cuda_driver", "cuLaunchKernel", 91, ""),
        ev("cuda_sync", "cudaStreamSynchronize", 130, ""),
        ev("user_annotation", "step", 80, ""),
        ev("gpu_user_annotation", "step", 100, ""),
        ev("overhead", "Buffer flush", 140, ""),
        format!(
            r#"{{"ph": "i", "cat": "{}", "name": "mark", "pid": 0, "tid": 7, "ts": 150, "s": "t"}}"#,
            spell("user_annotation")
        ),
    ];
    format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"))
}

/// Capitalised (or otherwise re-cased) categories are read exactly like the lowercase ones,
/// including one whose `cat` is written with a JSON escape.
#[test]
fn categories_are_matched_ignoring_ascii_case() {
    let lower = load_text("lower", &all_categories(|c| c.to_owned())).unwrap();
    assert_eq!(lower.kernels.len(), 1);
    assert_eq!(lower.marks.len(), 1);
    assert!(lower.meta.skipped_events.is_empty());
    let capitalise = |c: &str| {
        let mut s = c.to_owned();
        s[..1].make_ascii_uppercase();
        s
    };
    for (tag, spell) in [
        ("cap", &capitalise as &dyn Fn(&str) -> String),
        ("upper", &|c: &str| c.to_ascii_uppercase()),
        // "kernel" → "k\u0065rnel", "gpu_memcpy" → "gp\u0075_memcpy", …
        ("esc", &|c: &str| {
            format!("{}\\u{:04x}{}", &c[..1], c.as_bytes()[1], &c[2..])
        }),
    ] {
        let t = load_text(tag, &all_categories(spell)).unwrap();
        let mut t = t;
        t.meta.paths.clone_from(&lower.meta.paths);
        assert_eq!(t, lower, "{tag}");
    }
    // The reviewer's one-liner.
    let t = load_text(
        "one",
        r#"{"traceEvents":[{"ph":"X","cat":"Kernel","name":"kA","pid":0,"tid":7,"ts":100,"dur":50,"args":{"device":0,"stream":7,"correlation":1}}]}"#,
    )
    .unwrap();
    assert_eq!(t.kernels.len(), 1);
    assert_eq!(
        (t.kernels[0].start_ns, t.kernels[0].end_ns),
        (100_000, 150_000)
    );
    assert!(t.meta.skipped_events.is_empty());
    // Categories cutrace does not model are still skipped, under their own spelling; a host
    // op's category in another case is read.
    let t = load_text(
        "other",
        r#"{"traceEvents":[{"ph":"X","cat":"CPU_OP","name":"aten::mm","ts":1,"dur":1},
           {"ph":"X","cat":"Kernels","name":"k","ts":1,"dur":1}]}"#,
    )
    .unwrap();
    assert_eq!(t.meta.skipped_events, vec![("Kernels".to_owned(), 1)]);
    assert_eq!(t.str(t.host_ops[0].name), "aten::mm");
}

fn fixture_json(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kineto")
        .join(name);
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// A `.json.gz` cut anywhere (header, data, trailer) says the gzip was cut off at its end, why
/// that happens and what to do, once: no repeated low-level cause.
#[test]
fn a_cut_gzip_says_it_was_cut_and_what_to_do() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&fixture_json("two_streams.json.gz")).unwrap();
    let gz = gz.finish().unwrap();
    let d = tempdir("gzcut");
    let whole = d.join("whole.json.gz");
    std::fs::write(&whole, &gz).unwrap();
    assert!(load(&whole).is_ok());
    let mut cuts: Vec<usize> = (2..gz.len()).step_by((gz.len() / 60).max(1)).collect();
    cuts.extend(gz.len() - 8..gz.len()); // inside the CRC/size trailer
    for cut in cuts {
        let p = d.join("cut.json.gz");
        std::fs::write(&p, &gz[..cut]).unwrap();
        let e = load(&p).expect_err("a cut gzip imported as whole");
        let msg = e.to_string();
        for needle in [
            "cut.json.gz",
            "gzip stream is cut off",
            "ends before its gzip stream does",
            &format!("(at byte {cut})"),
            "still being written",
            "copy it again",
        ] {
            assert!(msg.contains(needle), "cut {cut}: no '{needle}' in: {msg}");
        }
        assert!(!msg.contains("deflate"), "cut {cut}: {msg}");
        assert!(
            std::error::Error::source(&e).is_none(),
            "cut {cut}: the cause would be printed again: {msg}"
        );
    }
}

/// Times with digits below the nanosecond are rounded to the nearest ns (ties to even) and
/// counted in a note; an event's end is its exact `ts + dur`, rounded, so events that touch in
/// the file still touch; whole-ns times are untouched.
#[test]
fn sub_nanosecond_times_are_rounded_and_counted() {
    let json = r#"{"traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1.234567, "dur": 50,
       "args": {"device": 0, "stream": 7, "correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 2.0004, "dur": 0.0002,
       "args": {"device": 0, "stream": 7, "correlation": 2}},
      {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 2.0006, "dur": 0.0025,
       "args": {"device": 0, "stream": 7, "correlation": 3}},
      {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": 5153875767895.669,
       "dur": 1.5, "args": {"device": 0, "stream": 7, "correlation": 4}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
       "ts": 0.0005, "dur": 0.001, "args": {"correlation": 1}},
      {"ph": "i", "cat": "user_annotation", "name": "m", "pid": 1, "tid": 2, "ts": 3.0015}
    ]}"#;
    let t = load_text("subns", json).unwrap();
    let k: Vec<(u64, u64)> = t.kernels.iter().map(|k| (k.start_ns, k.end_ns)).collect();
    assert_eq!(
        k,
        vec![
            (1_235, 51_235),
            // exact end 2000.6 ns → 2001, which is where "c" starts: they still touch
            (2_000, 2_001),
            // exact end 2003.1 → 2003
            (2_001, 2_003),
            (5_153_875_767_895_669, 5_153_875_767_897_169),
        ]
    );
    // 0.5 ns → 0 and 1.5 ns → 2: ties to even.
    assert_eq!((t.api_calls[0].start_ns, t.api_calls[0].end_ns), (0, 2));
    assert_eq!(t.marks[0].ts_ns, 3_002);
    // ts of a, b, c, the API call and the mark; dur of b and c (the API call's 0.001 is whole).
    assert_eq!(t.meta.notes.len(), 1, "{:?}", t.meta.notes);
    let note = &t.meta.notes[0].text;
    assert!(note.starts_with("7 \"ts\"/\"dur\" values "), "{note}");
    assert!(
        note.contains("rounded to the nearest nanosecond (ties to even"),
        "{note}"
    );

    // Without such digits there is no note, and every time is as written.
    let exact = json
        .replace("1.234567", "1.234")
        .replace("2.0004", "2")
        .replace("0.0002", "0.001")
        .replace("2.0006", "2.001")
        .replace("0.0025", "0.002")
        .replace("0.0005", "0.001")
        .replace("3.0015", "3.002");
    let t = load_text("whole", &exact).unwrap();
    assert!(t.meta.notes.is_empty(), "{:?}", t.meta.notes);
    assert_eq!(t.kernels[0].start_ns, 1_234);
    assert_eq!(t.kernels[3].start_ns, 5_153_875_767_895_669);
}

/// A note the `"cutrace"` member restores (an export) is kept beside the rounding note.
#[test]
fn the_rounding_note_joins_restored_notes() {
    let json = r#"{"cutrace": {"notes": [{"pid": 7, "part": "p", "text": "from the recorder"}]},
      "traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1.0001, "dur": 1,
       "args": {"device": 0, "stream": 7, "correlation": 1}}]}"#;
    let t = load_text("restored", json).unwrap();
    let texts: Vec<&str> = t.meta.notes.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "from the recorder");
    assert!(
        texts[1].starts_with("1 \"ts\"/\"dur\" value had"),
        "{texts:?}"
    );
}

/// The PyTorch 1.8-era spellings `Memcpy`, `Memset` and `Runtime` mean today's `gpu_memcpy`,
/// `gpu_memset` and `cuda_runtime`: such a trace reads exactly like today's.
#[test]
fn legacy_category_names_read_as_todays() {
    let today = load_text("today", &all_categories(|c| c.to_owned())).unwrap();
    let legacy = |c: &str| {
        match c {
            "kernel" => "Kernel",
            "gpu_memcpy" => "Memcpy",
            "gpu_memset" => "Memset",
            "cuda_runtime" => "Runtime",
            other => other,
        }
        .to_owned()
    };
    let mut old = load_text("legacy", &all_categories(legacy)).unwrap();
    old.meta.paths.clone_from(&today.meta.paths);
    assert_eq!(old, today);
    assert_eq!(
        (old.memcpys.len(), old.memsets.len(), old.api_calls.len()),
        (1, 1, 2)
    );
}

/// A 2021 trace as torch 1.8 wrote it (tests/fixtures/kineto/tb_resnet50_2021_operators):
/// a bare array of events, every CPU op filed as `Operator`, its steps (`ProfilerStep#N`) among
/// them. The steps read as host ranges (as torch writes them today), every other op as a host
/// op with its thread, times and id; no `Operator` event is left unread.
#[test]
fn a_2021_trace_reads_its_operators_and_steps() {
    let t = load(&cutrace_testkit::fixture(
        "kineto/tb_resnet50_2021_operators.json.gz",
    ))
    .unwrap();
    let steps: Vec<_> = t
        .ranges
        .iter()
        .map(|r| {
            (
                t.str(r.name),
                r.domain,
                r.process,
                r.thread,
                r.start_ns,
                r.end_ns,
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (
                "ProfilerStep#6",
                RangeDomain::Host,
                119771,
                1890023232,
                1_610_366_662_413_656_000,
                1_610_366_662_413_656_000 + 150_790_000
            ),
            (
                "ProfilerStep#7",
                RangeDomain::Host,
                119771,
                1890023232,
                1_610_366_662_564_505_000,
                1_610_366_662_564_505_000 + 141_346_000
            ),
        ]
    );
    let json = String::from_utf8(fixture_json("tb_resnet50_2021_operators.json.gz")).unwrap();
    assert!(json.starts_with('['), "the fixture is a bare array");
    let operators = json.matches("\"cat\": \"Operator\"").count();
    assert_eq!(t.host_ops.len(), operators - 2);
    assert!(t.host_ops.iter().all(|o| o.kind == HostOpKind::CpuOp));
    let loader: Vec<_> = t
        .host_ops
        .iter()
        .filter(|o| t.str(o.name).starts_with("enumerate(DataLoader)"))
        .map(|o| (o.process, o.thread, o.start_ns, o.end_ns, o.external_id))
        .collect();
    assert_eq!(
        loader,
        [
            (
                119771,
                1890023232,
                1_610_366_662_413_704_000,
                1_610_366_662_413_704_000 + 43_830_000,
                5573
            ),
            (
                119771,
                1890023232,
                1_610_366_662_564_548_000,
                1_610_366_662_564_548_000 + 42_919_000,
                11137
            ),
        ]
    );
    assert!(
        !t.meta
            .skipped_events
            .iter()
            .any(|(c, _)| c.eq_ignore_ascii_case("operator")),
        "{:?}",
        t.meta.skipped_events
    );
}

/// `cpu_op` and `python_function` events are host ops of their kind; a `ProfilerStep#N` filed
/// as a `cpu_op` is a host range, one filed as a Python call stays a host op.
#[test]
fn cpu_ops_and_python_functions_are_host_ops() {
    let t = load_text(
        "hostops",
        r#"{"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 3, "tid": 4, "ts": 10, "dur": 2.5,
         "args": {"External id": 17, "Input Dims": [[2, 2], [2, 2]]}},
        {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 3, "tid": 4,
         "ts": 9, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "pid": 3, "tid": 4, "ts": 1,
         "dur": 50},
        {"ph": "X", "cat": "python_function", "name": "ProfilerStep#x", "pid": 3, "tid": 4,
         "ts": 2, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 3, "tid": 4, "ts": 20,
         "dur": 1, "args": {"External id": "x"}}
        ]}"#,
    )
    .unwrap();
    let ops: Vec<_> = t
        .host_ops
        .iter()
        .map(|o| {
            (
                o.kind,
                t.str(o.name),
                o.process,
                o.thread,
                o.start_ns,
                o.end_ns,
                o.external_id,
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            (HostOpKind::CpuOp, "aten::mm", 3, 4, 10_000, 12_500, 17),
            (
                HostOpKind::PythonFunction,
                "train.py(12): step",
                3,
                4,
                9_000,
                14_000,
                0
            ),
            (
                HostOpKind::PythonFunction,
                "ProfilerStep#x",
                3,
                4,
                2_000,
                3_000,
                0
            ),
            (HostOpKind::CpuOp, "aten::add", 3, 4, 20_000, 21_000, 0),
        ]
    );
    assert_eq!(t.ranges.len(), 1);
    assert_eq!(t.str(t.ranges[0].name), "ProfilerStep#3");
    assert!(t.meta.skipped_events.is_empty());
    // An id that does not read is counted, and the op kept.
    assert_eq!(
        t.meta.unread_values,
        vec![("cpu_op \"External id\"".to_owned(), 1)]
    );
}
