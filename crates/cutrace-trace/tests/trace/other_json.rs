//! A JSON file that is not a Kineto trace is told from its first member, or from a member too
//! large for a trace's, never refused for its size: rocprofiler-sdk's JSON, any object without
//! `traceEvents`; a trace whose own member is too large is still a limit to raise.

use std::io::Write;

use cutrace_trace::{open_with, Limits, ReadOptions, TraceError};

/// Reads `json` (gzip-compressed when `gz`) with the event limit raised past the default 32 MiB
/// only for strings, so that the event limit is the one met.
fn read(json: &str, gz: bool) -> Result<cutrace_trace::Trace, TraceError> {
    let dir = cutrace_testkit::Dir::new("other-json");
    let p = dir.path(if gz { "t.json.gz" } else { "t.json" });
    let mut f = std::fs::File::create(&p).unwrap();
    if gz {
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(json.as_bytes()).unwrap();
        e.finish().unwrap();
    } else {
        f.write_all(json.as_bytes()).unwrap();
    }
    let opts = ReadOptions {
        limits: "string-bytes=64M".parse::<Limits>().unwrap(),
        ..Default::default()
    };
    open_with(&p, &opts, &mut |_, _| {})
}

fn refusal(r: Result<cutrace_trace::Trace, TraceError>) -> String {
    match r {
        Err(e @ TraceError::Unsupported { .. }) => e.to_string(),
        other => panic!("not a refusal of the format: {}", kind(&other)),
    }
}

/// 33 MiB of one string: over the default 32 MiB event limit.
fn big() -> String {
    "x".repeat(33 << 20)
}

/// What a result is, without the records (a failed test would print 33 MiB of them).
fn kind(r: &Result<cutrace_trace::Trace, TraceError>) -> String {
    match r {
        Ok(t) => format!("a trace of {} kernels", t.kernels.len()),
        Err(e) => e.to_string().chars().take(400).collect(),
    }
}

#[test]
fn a_rocprofiler_sdk_json_is_named_from_its_first_member_whatever_its_size() {
    let json = format!(
        r#"{{"rocprofiler-sdk-tool": [{{"metadata": {{"pid": 7}}, "strings": ["{}"]}}]}}"#,
        big()
    );
    for gz in [false, true] {
        let e = refusal(read(&json, gz));
        assert!(e.contains("this is a rocprofiler-sdk JSON"), "{e}");
        assert!(e.contains("not a Kineto trace; fix:"), "{e}");
        assert!(!e.contains("limit"), "{e}");
    }
}

#[test]
fn an_object_without_trace_events_is_not_refused_for_the_size_of_a_member() {
    let json = format!(
        r#"{{"results": [{{"blob": "{}"}}], "traceEvents": []}}"#,
        big()
    );
    let e = refusal(read(&json, false));
    assert!(e.contains("not a Kineto trace"), "{e}");
    assert!(e.contains("\"results\""), "{e}");
    assert!(e.contains("fix:"), "{e}");
    // Small, it is read whole and said to have no events array.
    let e = refusal(read(r#"{"results": [1, 2]}"#, false));
    assert!(e.contains("no \"traceEvents\" array; fix:"), "{e}");
}

#[test]
fn a_trace_whose_own_member_is_too_large_is_still_a_limit_to_raise() {
    let json = format!(
        r#"{{"deviceProperties": ["{}"], "traceEvents": []}}"#,
        big()
    );
    match read(&json, false) {
        Err(TraceError::Limit { limit, .. }) => assert_eq!(limit, "event-bytes"),
        other => panic!("{}", kind(&other)),
    }
}
