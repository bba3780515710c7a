//! Hardware counters on a timeline, for `convert --chrome` and `--perfetto`: one counter track
//! per metric per GPU, for the per-kernel counters of `cutrace profile` and for the PM samples
//! of `cutrace sample` (separate tracks, named apart, even for the same metric); and GPU memory
//! over time, per allocator and process ([`add_memory`]).
//!
//! Per-kernel counters: a sample sits at the kernel's start when its record has timestamps.
//! CUPTI writes none for a kernel it profiles with kernel replay, and such a kernel ran inside
//! its launch call (the replay and the read-out happen there), so its sample sits at the start
//! of that call; a kernel with neither has no sample and is counted. A counter track holds a
//! value until the next sample, so each value reads as "from this kernel on": it belongs to the
//! kernel that starts (or is launched) at that time, not to the time until the next one.
//!
//! PM samples: a point at each sample's start, whose value is the sample's value over its own
//! interval [start, end). Samples of one device follow each other without gaps unless some were
//! lost, so the track's steps are the samples.
//!
//! A value reported unavailable (NaN) has no point — Chrome's JSON has no NaN and a 0 would be
//! a measurement — and is counted (the track then holds the previous value over it); the CSV
//! and Parquet tables (`kernel_metrics`, `pm_samples`) keep it (empty / null).

use cutrace_analysis::counters::counter_samples;
use cutrace_trace::{MemoryLevel, MemoryPlace, Ns, StrId, Trace};

/// One value on a counter track.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_ns: Ns,
    /// Index into [`CounterTimeline::tracks`].
    pub track: u32,
    pub value: f64,
}

/// Where a track's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `cutrace profile`: a value per profiled kernel.
    Kernel,
    /// `cutrace sample`: a value per PM sample.
    PmSample,
    /// Memory on a GPU over time ([`cutrace_analysis::memory::memory_series`]): a value after
    /// every allocation and free of one process's allocator.
    Memory {
        series: MemorySeries,
        level: MemoryLevel,
        pid: u32,
    },
}

/// Which memory figure a track draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemorySeries {
    /// The replay's live bytes (the report's `peak` is its highest point).
    Live,
    /// torch's `Total Allocated` and `Total Reserved`, where the events report them.
    Allocated,
    Reserved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    pub device: u32,
    pub metric: StrId,
    pub source: Source,
}

impl Track {
    /// The track's name: the metric's, and for PM samples the metric's with ` (PM sampling)`,
    /// so that a metric both profiled and sampled has two tracks a viewer tells apart.
    pub fn name(&self, t: &Trace) -> String {
        match self.source {
            Source::Kernel => t.str(self.metric).to_owned(),
            Source::PmSample => format!("{} (PM sampling)", t.str(self.metric)),
            Source::Memory { series, level, pid } => {
                let level = match level {
                    MemoryLevel::Framework => "framework",
                    MemoryLevel::Driver => "driver",
                };
                let what = match series {
                    MemorySeries::Live => "live bytes",
                    MemorySeries::Allocated => "Total Allocated",
                    MemorySeries::Reserved => "Total Reserved",
                };
                format!("memory {what} ({level}, pid {pid})")
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterTimeline {
    /// Per-kernel tracks (by device, then metric in the order the profile asked for), then PM
    /// sample tracks (by device, then metric in the order sampled).
    pub tracks: Vec<Track>,
    /// By time, then track.
    pub samples: Vec<Sample>,
    /// Per-kernel samples placed at their launch call's start (the kernel's record has no
    /// timestamps).
    pub at_launch_call: u64,
    /// Per-kernel values left out: unavailable (NaN), and of kernels with no time at all (no
    /// timestamps and no launch call in the trace) or not in the trace.
    pub unavailable: u64,
    pub unplaced: u64,
    /// PM samples placed, and PM values left out as unavailable (NaN).
    pub pm_samples: u64,
    pub pm_unavailable: u64,
    /// Memory points placed.
    pub memory_samples: u64,
}

/// Metric ids in order: those of `asked` (names) as asked, then the others by first appearance.
fn metric_order(t: &Trace, asked: &[String], seen: impl Iterator<Item = StrId>) -> Vec<StrId> {
    let mut order: Vec<StrId> = asked
        .iter()
        .filter_map(|m| t.strings.iter().position(|s| s == m))
        .map(|i| i as StrId)
        .collect();
    for m in seen {
        if !order.contains(&m) {
            order.push(m);
        }
    }
    order
}

/// The sorted (device, metric rank, metric) keys of `pairs`, deduplicated.
fn track_keys(
    order: &[StrId],
    pairs: impl Iterator<Item = (u32, StrId)>,
) -> Vec<(u32, usize, StrId)> {
    let rank = |m: StrId| order.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let mut keys: Vec<(u32, usize, StrId)> = pairs.map(|(d, m)| (d, rank(m), m)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

pub fn counter_timeline(t: &Trace) -> CounterTimeline {
    let (all, orphans) = counter_samples(t);
    let mut out = CounterTimeline {
        unplaced: orphans,
        ..CounterTimeline::default()
    };
    let asked = t.meta.counters.as_ref().map_or(&[][..], |c| &c.metrics[..]);
    let order = metric_order(t, asked, all.iter().map(|s| s.metric));
    let keys = track_keys(&order, all.iter().map(|s| (s.device, s.metric)));
    let rank = |m: StrId| order.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    out.tracks = keys
        .iter()
        .map(|k| Track {
            device: k.0,
            metric: k.2,
            source: Source::Kernel,
        })
        .collect();
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
    add_pm_samples(&mut out, t);
    add_memory(&mut out, t);
    out.samples.sort_by_key(|s| (s.at_ns, s.track));
    out
}

/// The PM samples' tracks (after the per-kernel ones) and points.
fn add_pm_samples(out: &mut CounterTimeline, t: &Trace) {
    let pm = &t.pm_samples;
    let asked = t
        .meta
        .pm_sampling
        .as_ref()
        .map_or(&[][..], |p| &p.metrics[..]);
    let order = metric_order(t, asked, pm.iter().map(|s| s.metric));
    let rank = |m: StrId| order.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let keys = track_keys(&order, pm.iter().map(|s| (s.device, s.metric)));
    let first = out.tracks.len();
    out.tracks.extend(keys.iter().map(|k| Track {
        device: k.0,
        metric: k.2,
        source: Source::PmSample,
    }));
    for s in pm {
        if s.value.is_nan() {
            out.pm_unavailable += 1;
            continue;
        }
        let i = keys
            .binary_search(&(s.device, rank(s.metric), s.metric))
            .unwrap_or(0);
        out.pm_samples += 1;
        out.samples.push(Sample {
            at_ns: s.start_ns,
            track: (first + i) as u32,
            value: s.value,
        });
    }
}

/// GPU memory over time (after the PM sample tracks): per pool on a GPU, its live bytes, and
/// torch's two totals where its events report them. Values are bytes as doubles (counter
/// tracks hold doubles): exact up to 2^53 bytes; the CSV and Parquet `memory` table has every
/// integer. CPU memory has no GPU to sit under and no track.
fn add_memory(out: &mut CounterTimeline, t: &Trace) {
    for p in cutrace_analysis::memory::memory_series(t) {
        if p.place != MemoryPlace::Gpu {
            continue;
        }
        let mut track = |series| {
            out.tracks.push(Track {
                device: p.device,
                metric: 0,
                source: Source::Memory {
                    series,
                    level: p.level,
                    pid: p.pid,
                },
            });
            (out.tracks.len() - 1) as u32
        };
        let live = track(MemorySeries::Live);
        let allocated = p
            .points
            .iter()
            .any(|x| x.total_allocated.is_some())
            .then(|| track(MemorySeries::Allocated));
        let reserved = p
            .points
            .iter()
            .any(|x| x.total_reserved.is_some())
            .then(|| track(MemorySeries::Reserved));
        for x in &p.points {
            let values = [
                (Some(live), Some(x.live_bytes)),
                (allocated, x.total_allocated),
                (reserved, x.total_reserved),
            ];
            for (track, v) in values {
                if let (Some(track), Some(v)) = (track, v) {
                    out.memory_samples += 1;
                    out.samples.push(Sample {
                        at_ns: x.at_ns,
                        track,
                        value: v as f64,
                    });
                }
            }
        }
    }
}

impl CounterTimeline {
    /// What a timeline export did with the counters, in words for the command's summary: a
    /// line for the per-kernel counters and one for the PM samples, each only when the trace
    /// has them.
    pub fn summary(&self, format: &str) -> Vec<String> {
        let mut out = Vec::new();
        let kernel_tracks = self
            .tracks
            .iter()
            .filter(|k| k.source == Source::Kernel)
            .count();
        let pm_tracks = self
            .tracks
            .iter()
            .filter(|k| k.source == Source::PmSample)
            .count();
        let memory_tracks = self.tracks.len() - kernel_tracks - pm_tracks;
        if kernel_tracks > 0 {
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
            out.push(format!(
                "hardware counters in the {format}: {} values on {kernel_tracks} counter tracks \
                 (one per metric per GPU), {} of them at the launch call of a kernel CUPTI wrote \
                 no timestamps for{left}",
                self.samples.len() as u64 - self.pm_samples - self.memory_samples,
                self.at_launch_call
            ));
        }
        if pm_tracks > 0 {
            let left = if self.pm_unavailable > 0 {
                format!(
                    "; left out: {} unavailable (NaN) (the --csv/--parquet pm_samples table has \
                     every value)",
                    self.pm_unavailable
                )
            } else {
                String::new()
            };
            out.push(format!(
                "PM samples in the {format}: {} values on {pm_tracks} counter tracks (one per \
                 metric per GPU), each at its sample's start{left}",
                self.pm_samples
            ));
        }
        if memory_tracks > 0 {
            out.push(format!(
                "GPU memory in the {format}: {} values on {memory_tracks} counter tracks (live \
                 bytes per allocator and process, and torch's Total Allocated and Total \
                 Reserved where reported)",
                self.memory_samples
            ));
        }
        out
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
        let names: Vec<(u32, &str)> = c
            .tracks
            .iter()
            .map(|k| (k.device, t.str(k.metric)))
            .collect();
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

    /// Two devices sampled every 100 ns from 0 for two metrics; device 1's second SM value is
    /// NaN.
    fn pm_trace() -> Trace {
        let mut t = Trace {
            strings: vec!["sm".into(), "gr".into()],
            ..Trace::default()
        };
        t.meta.pm_sampling = Some(cutrace_trace::PmSamplingInfo {
            metrics: vec!["gr".into(), "sm".into()],
            ..Default::default()
        });
        for device in [1, 0] {
            for i in 0..3u64 {
                for metric in [0, 1] {
                    let nan = device == 1 && i == 1 && metric == 0;
                    t.pm_samples.push(cutrace_trace::PmSample {
                        start_ns: i * 100,
                        end_ns: i * 100 + 100,
                        device,
                        process: 7,
                        metric,
                        value: if nan {
                            f64::NAN
                        } else {
                            (i * 10 + metric as u64) as f64
                        },
                    });
                }
            }
        }
        t
    }

    #[test]
    fn pm_samples_get_a_track_per_metric_per_gpu_and_a_point_at_each_sample_start() {
        let t = pm_trace();
        let c = counter_timeline(&t);
        let names: Vec<(u32, String)> = c.tracks.iter().map(|k| (k.device, k.name(&t))).collect();
        let n = |d: u32, m: &str| (d, format!("{m} (PM sampling)"));
        // In the order sampled (gr, then sm), by device.
        assert_eq!(names, [n(0, "gr"), n(0, "sm"), n(1, "gr"), n(1, "sm")]);
        assert_eq!((c.pm_samples, c.pm_unavailable), (11, 1));
        assert_eq!(c.samples.len(), 11);
        // Device 1's sm track has no point at 100 (NaN): it holds 1.0 from 0 to 200.
        let sm1: Vec<(Ns, f64)> = c
            .samples
            .iter()
            .filter(|s| s.track == 3)
            .map(|s| (s.at_ns, s.value))
            .collect();
        assert_eq!(sm1, [(0, 0.0), (200, 20.0)]);
        assert!(c
            .samples
            .windows(2)
            .all(|w| (w[0].at_ns, w[0].track) <= (w[1].at_ns, w[1].track)));
        let said = c.summary("X");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("PM samples in the X: 11 values on 4 counter tracks"));
        assert!(said[0].contains("1 unavailable (NaN)"));
    }

    #[test]
    fn a_metric_both_profiled_and_sampled_has_two_tracks() {
        let mut t = counter_trace();
        let gpu_time = t.strings.iter().position(|s| s == GPU_TIME).unwrap() as StrId;
        t.pm_samples.push(cutrace_trace::PmSample {
            start_ns: 5,
            end_ns: 10,
            device: 0,
            process: 1,
            metric: gpu_time,
            value: 3.0,
        });
        let c = counter_timeline(&t);
        let same: Vec<Source> = c
            .tracks
            .iter()
            .filter(|k| k.device == 0 && k.metric == gpu_time)
            .map(|k| k.source)
            .collect();
        assert_eq!(same, [Source::Kernel, Source::PmSample]);
        assert_eq!(c.samples.len(), 15);
        assert_eq!(c.summary("X").len(), 2);
    }
}
