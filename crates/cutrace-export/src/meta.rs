//! `meta.json` of `cutrace convert --csv/--parquet`: the trace's [`ExportMeta`] with the members
//! only that file carries (source paths, versions, devices, skipped events, every part's header),
//! and, for a `cutrace sample` trace, how its PM samples were collected (`pm_sampling`).

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

/// `meta.json`'s text: indented JSON, members in sorted order (as every cutrace JSON file). A
/// trace with PM samples adds `pm_sampling`: [`cutrace_trace::PmSamplingInfo`] (metrics,
/// interval, devices, and every count of what was lost), so the `pm_samples` table's readers
/// know what the rows are and what they lack.
pub fn meta_json_text(t: &Trace, with_cmdline: bool) -> serde_json::Result<String> {
    let mut v = serde_json::to_value(meta_json(t, with_cmdline))?;
    if let (Some(p), Some(o)) = (&t.meta.pm_sampling, v.as_object_mut()) {
        o.insert("pm_sampling".into(), serde_json::to_value(p)?);
    }
    serde_json::to_string_pretty(&v)
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

    #[test]
    fn the_sampling_facts_are_written_for_a_sampled_trace_only() {
        let mut t = Trace::default();
        let v: serde_json::Value =
            serde_json::from_str(&meta_json_text(&t, false).unwrap()).unwrap();
        assert!(v.get("pm_sampling").is_none());
        t.meta.pm_sampling = Some(cutrace_trace::PmSamplingInfo {
            metrics: vec!["gr__cycles_active.avg".into()],
            interval_ns: 2_000_000,
            devices: vec![0],
            samples: 40,
            samples_lost: 3,
            ..Default::default()
        });
        let v: serde_json::Value =
            serde_json::from_str(&meta_json_text(&t, false).unwrap()).unwrap();
        let p = &v["pm_sampling"];
        assert_eq!(p["metrics"][0], "gr__cycles_active.avg");
        assert_eq!(
            (p["interval_ns"].as_u64(), p["samples"].as_u64()),
            (Some(2_000_000), Some(40))
        );
        assert_eq!(p["samples_lost"], 3);
    }
}
