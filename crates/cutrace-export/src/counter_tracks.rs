//! Hardware counters (`cutrace profile`) on a timeline, for `convert --chrome` and
//! `--perfetto`: one counter track per metric per GPU, one sample per profiled kernel.
//!
//! A sample sits at the kernel's start when its record has timestamps. CUPTI writes none for a
//! kernel it profiles with kernel replay, and such a kernel ran inside its launch call (the
//! replay and the read-out happen there), so its sample sits at the start of that call; a
//! kernel with neither has no sample and is counted. A counter track holds a value until the
//! next sample, so each value reads as "from this kernel on": it belongs to the kernel that
//! starts (or is launched) at that time, not to the time until the next one. A value CUPTI
//! reported unavailable (NaN) has no sample — Chrome's JSON has no NaN and a 0 would be a
//! measurement — and is counted; the CSV and Parquet `kernel_metrics` tables keep it (empty /
//! null).

use cutrace_analysis::counters::counter_samples;
use cutrace_trace::{Ns, StrId, Trace};

/// One value on a counter track.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_ns: Ns,
    /// Index into [`CounterTimeline::tracks`].
    pub track: u32,
    pub value: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterTimeline {
    /// (device, metric name id), by device, then metric in the order the profile asked for.
    pub tracks: Vec<(u32, StrId)>,
    /// By time, then track.
    pub samples: Vec<Sample>,
    /// Samples placed at their launch call's start (the kernel's record has no timestamps).
    pub at_launch_call: u64,
    /// Values left out: unavailable (NaN), and of kernels with no time at all (no timestamps
    /// and no launch call in the trace) or not in the trace.
    pub unavailable: u64,
    pub unplaced: u64,
}

pub fn counter_timeline(t: &Trace) -> CounterTimeline {
    let (all, orphans) = counter_samples(t);
    let mut out = CounterTimeline {
        unplaced: orphans,
        ..CounterTimeline::default()
    };
    // Metric order: as asked for, then by first appearance.
    let mut order: Vec<StrId> = Vec::new();
    if let Some(info) = &t.meta.counters {
        for m in &info.metrics {
            if let Some(i) = t.strings.iter().position(|s| s == m) {
                order.push(i as StrId);
            }
        }
    }
    for s in &all {
        if !order.contains(&s.metric) {
            order.push(s.metric);
        }
    }
    let rank = |m: StrId| order.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let mut keys: Vec<(u32, usize, StrId)> = all
        .iter()
        .map(|s| (s.device, rank(s.metric), s.metric))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    out.tracks = keys.iter().map(|k| (k.0, k.2)).collect();
    for s in all {
        if s.value.is_nan() {
            out.unavailable += 1;
            continue;
        }
        let Some(at_ns) = s.at_ns else {
            out.unplaced += 1;
            continue;
        };
        out.at_launch_call += u64::from(s.at_launch_call);
        let track = keys
            .binary_search(&(s.device, rank(s.metric), s.metric))
            .unwrap_or(0) as u32;
        out.samples.push(Sample {
            at_ns,
            track,
            value: s.value,
        });
    }
    out.samples.sort_by_key(|s| (s.at_ns, s.track));
    out
}

impl CounterTimeline {
    /// What a timeline export did with the counters, in words for the command's summary;
    /// `None` when the trace has none.
    pub fn summary(&self, format: &str) -> Option<String> {
        if self.tracks.is_empty() {
            return None;
        }
        let mut left = Vec::new();
        if self.unavailable > 0 {
            left.push(format!("{} unavailable (NaN)", self.unavailable));
        }
        if self.unplaced > 0 {
            left.push(format!(
                "{} of kernels with no time (no timestamps, no launch call)",
                self.unplaced
            ));
        }
        let left = if left.is_empty() {
            String::new()
        } else {
            format!(
                "; left out: {} (the --csv/--parquet kernel_metrics table has every value)",
                left.join(", ")
            )
        };
        Some(format!(
            "hardware counters in the {format}: {} values on {} counter tracks (one per metric per \
             GPU), {} of them at the launch call of a kernel CUPTI wrote no timestamps for{left}",
            self.samples.len(),
            self.tracks.len(),
            self.at_launch_call
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_testkit::counters::{counter_trace, CTAS, GPU_TIME, WARPS_PCT};

    #[test]
    fn one_track_per_metric_per_gpu_and_a_sample_per_kernel_at_its_time() {
        let t = counter_trace();
        let c = counter_timeline(&t);
        let names: Vec<(u32, &str)> = c.tracks.iter().map(|&(d, m)| (d, t.str(m))).collect();
        assert_eq!(
            names,
            [
                (0, CTAS),
                (0, WARPS_PCT),
                (0, GPU_TIME),
                (1, CTAS),
                (1, WARPS_PCT),
                (1, GPU_TIME)
            ]
        );
        // 5 profiled kernels × 3 metrics, less corr 3's unavailable percentage.
        assert_eq!((c.samples.len(), c.unavailable, c.unplaced), (14, 1, 0));
        // Corr 1 (untimed) at its launch call's start, 1000; corr 3 (timed) at its start.
        assert_eq!(
            c.samples[0],
            Sample {
                at_ns: 1_000,
                track: 0,
                value: 100.0
            }
        );
        assert!(c
            .samples
            .iter()
            .any(|s| s.at_ns == 12_000 && s.track == 3 && s.value == 10.0));
        assert!(!c.samples.iter().any(|s| s.at_ns == 11_000));
        assert_eq!(c.at_launch_call, 12);
        assert!(c.samples.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    }
}
