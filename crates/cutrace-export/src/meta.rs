//! `meta.json` of `cutrace convert --csv/--parquet`: the trace's [`ExportMeta`] with the members
//! only that file carries (source paths, versions, devices, skipped events, every part's header).

use cutrace_trace::{ExportMeta, Header, Trace};

/// The metadata `meta.json` holds for `t`. A part's recorded command line (`cmdline`, which
/// can hold secrets: the recorder keeps it only on request and writes the part 0600) is copied
/// only `with_cmdline`.
pub fn meta_json(t: &Trace, with_cmdline: bool) -> ExportMeta {
    let m = &t.meta;
    ExportMeta {
        paths: Some(m.paths.clone()),
        cupti_version: Some(m.cupti_version),
        cuda_driver_version: Some(m.cuda_driver_version),
        devices: Some(m.devices.clone()),
        skipped_events: Some(m.skipped_events.clone()),
        parts: Some(
            m.parts
                .iter()
                .map(|p| Header {
                    cmdline: p.header.cmdline.clone().filter(|_| with_cmdline),
                    ..p.header.clone()
                })
                .collect(),
        ),
        ..ExportMeta::common(m)
    }
}

/// `meta.json`'s text: indented JSON, members in sorted order (as every cutrace JSON file).
pub fn meta_json_text(t: &Trace, with_cmdline: bool) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&serde_json::to_value(meta_json(t, with_cmdline))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_trace::PartMeta;

    #[test]
    fn the_command_line_is_copied_only_when_asked_for() {
        let mut t = Trace::default();
        t.meta.parts.push(PartMeta {
            header: Header {
                cmdline: Some(vec!["train".into(), "--token=s3cret".into()]),
                ..Header::default()
            },
            ..PartMeta::default()
        });
        assert!(!meta_json_text(&t, false).unwrap().contains("s3cret"));
        assert!(meta_json_text(&t, true).unwrap().contains("--token=s3cret"));
    }
}
