//! The pm_sample table (`cutrace sample`'s time series): round trip with NaN kept as
//! "unavailable", the sampling facts in META, and the merge of two processes' parts.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use cutrace_testkit::Dir;

use cutrace_trace::native::{self, Header, Meta, Tail, Writer};
use cutrace_trace::*;

/// A part with `n` samples of 100 µs on device `dev`; sample 1's value is NaN.
fn part(pid: u32, dev: u32, n: u64) -> Vec<u8> {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let sm = w.intern("sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
    for i in 0..n {
        w.push_pm_sample(&PmSample {
            start_ns: 5_000_000_000 + i * 100_000,
            end_ns: 5_000_100_000 + i * 100_000,
            device: dev,
            process: pid,
            metric: sm,
            value: if i == 1 { f64::NAN } else { 10.0 * i as f64 },
        });
    }
    w.write_meta(&Meta {
        pm_sampling: Some(PmSamplingInfo {
            metrics: vec!["sm__cycles_active.avg.pct_of_peak_sustained_elapsed".into()],
            interval_ns: 100_000,
            devices: vec![dev],
            samples: n,
            first_samples_dropped: 1,
            overflows: 1,
            samples_lost: 7,
            ..PmSamplingInfo::default()
        }),
        ..Meta::default()
    })
    .unwrap();
    w.finish(&Tail::default()).unwrap().into_inner()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn samples_round_trip_with_their_times_and_nan() {
    let d = Dir::new("pm-rt");
    let p = write(&d.0, "a.cutrace", &part(42, 0, 4));
    let t = native::read(&p, &mut |_, _| {}).unwrap();
    assert_eq!(t.pm_samples.len(), 4);
    let s = &t.pm_samples[2];
    assert_eq!((s.start_ns, s.end_ns), (5_000_200_000, 5_000_300_000));
    assert_eq!((s.device, s.process, s.value), (0, 42, 20.0));
    assert!(t.pm_samples[1].value.is_nan());
    assert_eq!(
        t.strings[s.metric as usize],
        "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
    );
    let info = t.meta.pm_sampling.as_ref().unwrap();
    assert_eq!((info.samples, info.samples_lost, info.overflows), (4, 7, 1));
}

#[test]
fn parts_merge_their_samples_and_counts() {
    let d = Dir::new("pm-merge");
    let a = write(&d.0, "h-1.cutrace", &part(1, 0, 3));
    let b = write(&d.0, "h-2.cutrace", &part(2, 1, 2));
    let t = native::read_parts(&[a, b], &mut |_, _| {}).unwrap();
    assert_eq!(t.pm_samples.len(), 5);
    let info = t.meta.pm_sampling.as_ref().unwrap();
    assert_eq!(info.samples, 5);
    assert_eq!(info.samples_lost, 14);
    assert_eq!(info.first_samples_dropped, 2);
    assert_eq!(info.metrics.len(), 1);
    for s in &t.pm_samples {
        assert_eq!(
            t.strings[s.metric as usize],
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
        );
    }
}
