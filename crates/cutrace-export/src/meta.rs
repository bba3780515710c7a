//! `meta.json` of `cutrace convert --csv/--parquet`: the trace's [`ExportMeta`] with the members
//! only that file carries (source paths, versions, devices, skipped events, every part's header).

use cutrace_trace::{ExportMeta, Trace};

/// The metadata `meta.json` holds for `t`.
pub fn meta_json(t: &Trace) -> ExportMeta {
    let m = &t.meta;
    ExportMeta {
        paths: Some(m.paths.clone()),
        cupti_version: Some(m.cupti_version),
        cuda_driver_version: Some(m.cuda_driver_version),
        devices: Some(m.devices.clone()),
        skipped_events: Some(m.skipped_events.clone()),
        parts: Some(m.parts.iter().map(|p| p.header.clone()).collect()),
        ..ExportMeta::common(m)
    }
}

/// `meta.json`'s text: indented JSON, members in sorted order (as every cutrace JSON file).
pub fn meta_json_text(t: &Trace) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&serde_json::to_value(meta_json(t))?)
}
