//! The kernel_metric table (`cutrace profile`'s counter values): round trip with NaN kept as
//! "unavailable", the counter facts in META, the merge of parts, and a reader that does not know
//! the table skipping it and keeping everything else.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use cutrace_trace::native::{self, Header, Meta, Tail, Writer};
use cutrace_trace::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d =
            std::env::temp_dir().join(format!("cutrace-kmetrics-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn kernel(corr: u64, name: StrId) -> Kernel {
    Kernel {
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: corr,
        start_ns: 1_000 + corr * 100,
        end_ns: 1_050 + corr * 100,
        name,
        launch: 0,
    }
}

/// Every kernel's launch: 4 blocks of 96 threads.
const LAUNCH: Launch = Launch {
    grid: [4, 1, 1],
    block: [96, 1, 1],
    registers_per_thread: 16,
    static_shared_bytes: 0,
    dynamic_shared_bytes: 0,
    graph_id: 0,
};

/// A part with `n` kernels, each with two metrics; kernel 2's second value is NaN.
fn part(pid: u32, n: u64) -> Vec<u8> {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let k = w.intern("_Z3fooPf");
    let ctas = w.intern("sm__ctas_launched.sum");
    let warps = w.intern("sm__warps_active.avg.pct_of_peak_sustained_active");
    for corr in 1..=n {
        w.push_kernel(&kernel(corr, k), &LAUNCH);
        w.push_kernel_metric(&KernelMetric {
            correlation_id: corr,
            device: 0,
            process: pid,
            metric: ctas,
            value: 4.0,
        });
        w.push_kernel_metric(&KernelMetric {
            correlation_id: corr,
            device: 0,
            process: pid,
            metric: warps,
            value: if corr == 2 {
                f64::NAN
            } else {
                12.5 * corr as f64
            },
        });
    }
    w.write_meta(&Meta {
        counters: Some(CounterInfo {
            metrics: vec![
                "sm__ctas_launched.sum".into(),
                "sm__warps_active.avg.pct_of_peak_sustained_active".into(),
            ],
            passes: Some(1),
            kernels_profiled: n,
            kernels_skipped: 1,
            graph_launches: 0,
            launches_captured: 0,
            ranges_dropped: 0,
            error: None,
        }),
        ..Meta::default()
    })
    .unwrap();
    w.finish(&Tail::default()).unwrap().into_inner()
}

fn read(dir: &Path, name: &str, bytes: &[u8]) -> Trace {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    native::read(&p, &mut |_, _| {}).unwrap()
}

fn value(t: &Trace, corr: u64, metric: &str) -> f64 {
    let hits: Vec<f64> = t
        .kernel_metrics
        .iter()
        .filter(|m| m.correlation_id == corr && t.strings[m.metric as usize] == metric)
        .map(|m| m.value)
        .collect();
    assert_eq!(hits.len(), 1, "{corr} {metric}: {hits:?}");
    hits[0]
}

#[test]
fn values_round_trip_and_nan_stays_unavailable() {
    let d = TempDir::new("rt");
    let t = read(&d.0, "a.cutrace", &part(42, 3));
    assert!(t.meta.complete);
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(t.kernel_metrics.len(), 6);
    assert_eq!(value(&t, 1, "sm__ctas_launched.sum"), 4.0);
    assert_eq!(
        value(&t, 3, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        37.5
    );
    let nan = value(&t, 2, "sm__warps_active.avg.pct_of_peak_sustained_active");
    assert!(nan.is_nan(), "{nan}");
    assert!(t
        .kernel_metrics
        .iter()
        .all(|m| m.process == 42 && m.device == 0));
    let c = t.meta.counters.as_ref().unwrap();
    assert_eq!(c.passes, Some(1));
    assert_eq!(c.kernels_profiled, 3);
    assert_eq!(c.metrics.len(), 2);
    assert!(
        t.meta.skipped_events.is_empty(),
        "{:?}",
        t.meta.skipped_events
    );
}

#[test]
fn parts_merge_with_their_own_correlation_ids_and_counter_facts_add_up() {
    let d = TempDir::new("merge");
    std::fs::write(d.0.join("h-1.cutrace"), part(1, 2)).unwrap();
    std::fs::write(d.0.join("h-2.cutrace"), part(2, 3)).unwrap();
    let t = native::read(&d.0, &mut |_, _| {}).unwrap();
    assert_eq!(t.kernels.len(), 5);
    assert_eq!(t.kernel_metrics.len(), 10);
    // Every value still joins exactly one kernel, of its own process.
    for m in &t.kernel_metrics {
        let k = t
            .kernels
            .iter()
            .filter(|k| k.correlation_id == m.correlation_id)
            .count();
        assert_eq!(k, 1, "{m:?}");
    }
    let c = t.meta.counters.as_ref().unwrap();
    assert_eq!(c.kernels_profiled, 5);
    assert_eq!(c.kernels_skipped, 2);
    assert_eq!(c.metrics.len(), 2);
}

/// Rewrites every RECS chunk of table `from` to table `to`, CRC fixed: what a reader that does
/// not know `from` sees is a table it does not know.
pub(crate) fn retable(bytes: &[u8], from: u8, to: u8) -> (Vec<u8>, usize) {
    use std::io::{Read, Write};
    let hl = native::CHUNK_HEADER_LEN;
    let mut out = bytes[..12].to_vec();
    let mut off = 12;
    let mut changed = 0;
    while off + hl <= bytes.len() {
        let stored = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        let header = &bytes[off..off + hl];
        let body = &bytes[off + hl..off + hl + stored];
        off += hl + stored;
        if header[..4] == native::tag::RECS {
            let mut raw = Vec::new();
            flate2::read::DeflateDecoder::new(body)
                .read_to_end(&mut raw)
                .unwrap();
            if raw[0] == from {
                raw[0] = to;
                let mut enc =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
                enc.write_all(&raw).unwrap();
                let new_body = enc.finish().unwrap();
                let mut h = header.to_vec();
                h[8..12].copy_from_slice(&(new_body.len() as u32).to_le_bytes());
                h[16..20].copy_from_slice(&crc32fast::hash(&new_body).to_le_bytes());
                out.extend_from_slice(&h);
                out.extend_from_slice(&new_body);
                changed += 1;
                continue;
            }
        }
        out.extend_from_slice(header);
        out.extend_from_slice(body);
    }
    (out, changed)
}

#[test]
fn a_reader_that_does_not_know_the_table_skips_it_and_keeps_the_rest() {
    assert_eq!(native::Table::KernelMetric as u8, 8);
    let d = TempDir::new("skip");
    let (bytes, changed) = retable(&part(42, 3), 8, 200);
    assert_eq!(changed, 1);
    let t = read(&d.0, "a.cutrace", &bytes);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert_eq!(t.kernels.len(), 3);
    assert!(t.kernel_metrics.is_empty());
    assert_eq!(
        t.meta.skipped_events,
        vec![("native_table_200".to_string(), 6)]
    );
}
