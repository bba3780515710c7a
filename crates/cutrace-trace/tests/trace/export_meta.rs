//! `ExportMeta`, what cutrace writes about a trace beside its records (the Chrome export's
//! `"cutrace"` member, `meta.json`): the members an export leaves out are absent rather than
//! null, and the Kineto importer restores what the member says, or refuses a member of the wrong
//! shape with an error that names the file.

use cutrace_trace::{ExportMeta, TraceMeta, TraceNote};

/// One kernel, so that the trace is not empty.
const EVENTS: &str = "\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \
    \"pid\": 0, \"tid\": 7, \"ts\": 1, \"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7, \
    \"correlation\": 1}}]";

fn import(json: &str, name: &str) -> Result<cutrace_trace::Trace, cutrace_trace::TraceError> {
    let p = std::env::temp_dir().join(format!(
        "cutrace-export-meta-{name}-{}.json",
        std::process::id()
    ));
    std::fs::write(&p, json).unwrap();
    let r = cutrace_trace::open(&p, &mut |_, _| {});
    std::fs::remove_file(&p).unwrap();
    r
}

#[test]
fn members_of_the_other_export_are_left_out_and_unknown_drops_are_null() {
    let m = TraceMeta {
        complete: true,
        drops_recorded: false,
        ..TraceMeta::default()
    };
    let chrome = ExportMeta {
        version: Some("1".into()),
        time_base_ns: Some(5),
        ..ExportMeta::common(&m)
    };
    let v = serde_json::to_value(&chrome).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "complete",
            "driver_version",
            "dropped_by_cupti",
            "dropped_by_recorder",
            "host",
            "incomplete_reason",
            "notes",
            "pid",
            "time_base_ns",
            "version"
        ]
    );
    // Not recorded by the source: unknown, not 0.
    assert!(v["dropped_by_cupti"].is_null());
    // meta.json writes an unknown version as null, not absent.
    let meta_json = ExportMeta {
        cupti_version: Some(None),
        ..ExportMeta::common(&m)
    };
    let v = serde_json::to_value(&meta_json).unwrap();
    assert!(v.as_object().unwrap().contains_key("cupti_version"));
    assert!(v["cupti_version"].is_null());
}

#[test]
fn the_importer_restores_what_the_member_says() {
    let sent = ExportMeta {
        complete: false,
        incomplete_reason: Some("no TAIL chunk".into()),
        dropped_by_recorder: Some(3),
        dropped_by_cupti: Some(4),
        host: Some("h".into()),
        pid: Some(7),
        notes: vec![TraceNote {
            pid: Some(7),
            part: Some("h-7.cutrace".into()),
            text: "a note".into(),
        }],
        id_parts: Some(vec![Some(7), Some(8)]),
        ..ExportMeta::default()
    };
    let json = format!(
        "{{\"cutrace\": {}, {EVENTS}}}",
        serde_json::to_string(&sent).unwrap()
    );
    let m = import(&json, "restore").unwrap().meta;
    assert!(!m.complete);
    assert_eq!(m.incomplete_reason.as_deref(), Some("no TAIL chunk"));
    assert!(m.drops_recorded);
    assert_eq!((m.dropped_by_recorder, m.dropped_by_cupti), (3, 4));
    assert_eq!((m.host.as_deref(), m.pid), (Some("h"), Some(7)));
    assert_eq!(m.notes, sent.notes);
    assert_eq!(m.id_parts, [Some(7), Some(8)]);
    // A member that says nothing of completeness leaves the trace complete.
    let m = import(&format!("{{\"cutrace\": {{}}, {EVENTS}}}"), "empty")
        .unwrap()
        .meta;
    assert!(m.complete);
    assert!(!m.drops_recorded);
}

#[test]
fn a_member_of_the_wrong_shape_is_refused_with_the_file_named() {
    let e = import(
        "{\"cutrace\": {\"complete\": \"yes\"}, \"traceEvents\": []}",
        "wrong",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cutrace-export-meta-wrong") && e.contains("cutrace"),
        "{e}"
    );
}
