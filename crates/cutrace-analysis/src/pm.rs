//! The layered answer to "how busy was the GPU?" from PM samples (`cutrace sample` traces):
//! per device, kernels running (the trace's union of kernel intervals), then what the sampled
//! counters say over the same time: GPU (graphics/compute engine) active, SMs active, tensor
//! pipes active, DRAM throughput, and the bytes over PCIe and NVLink. Each is given for the
//! device's window (first kernel start → last kernel end, inside the time window), for each
//! step, and for the idle gaps of the window taken together.
//!
//! A sample covers an interval of its own; a span takes the part of each sample that overlaps
//! it. Percentages are averaged weighted by that overlap (a sample half inside counts half);
//! byte counts are summed, each sample's share prorated by its overlap. A NaN value (not
//! evaluated) is left out and counted, never taken as 0; a span no sample overlaps has no value
//! (null), not 0.

use std::collections::BTreeMap;

use cutrace_trace::{Ns, PmSamplingInfo, Trace};
use serde::Serialize;

use crate::counters::{aggregation, Aggregation};
use crate::intervals::merged_runs;
use crate::steps::Steps;
use crate::window::Window;

/// The default set's metrics, by what the layered answer calls them.
pub const GPU_ACTIVE: &str = "gr__cycles_active.avg.pct_of_peak_sustained_elapsed";
pub const SM_ACTIVE: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
pub const TENSOR_ACTIVE: &str =
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
pub const DRAM_THROUGHPUT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

/// PM samples in a report: what was sampled, what was lost, and the layers per device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmReport {
    /// The metrics sampled, in order, each with how it is combined over a span.
    pub metrics: Vec<PmMetric>,
    pub interval_ns: u64,
    /// Samples kept, and the losses: first samples dropped as outliers, hardware-buffer
    /// overflows and the samples estimated lost to them, samples the writer had no room for.
    pub samples: u64,
    pub first_samples_dropped: u64,
    pub overflows: u64,
    pub samples_lost: u64,
    pub samples_dropped_queue: u64,
    /// Values CUPTI could not evaluate (NaN), left out.
    pub values_unavailable: u64,
    /// Metrics the device did not have (NVLink on a GPU without it).
    pub left_out: Vec<String>,
    /// Why sampling failed or stopped, when it did.
    pub error: Option<String>,
    pub devices: Vec<PmDevice>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmMetric {
    pub name: String,
    pub aggregation: Aggregation,
}

/// One device's layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmDevice {
    pub device: u32,
    /// Samples of this device (each with one value per metric).
    pub samples: u64,
    /// First kernel start → last kernel end; null when the device ran no timed kernel.
    pub window: Option<Layers>,
    /// The idle gaps of the window, together.
    pub idle_gaps: Option<Layers>,
    /// One per step (`cutrace report --steps`), in step order; empty without steps.
    pub steps: Vec<StepLayers>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepLayers {
    pub index: u64,
    pub name: String,
    pub layers: Layers,
}

/// The layers over one span (a set of intervals).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layers {
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// Time the span covers (for idle gaps: their total).
    pub span_ns: Ns,
    /// The union of kernel intervals inside the span, as a percentage of it.
    pub kernels_running_pct: f64,
    /// How much of the span samples cover, as a percentage (below 100 where sampling had not
    /// started or samples were lost).
    pub sampled_pct: f64,
    /// The default set's layers, when sampled (null when not, or no sample overlaps).
    pub gpu_active_pct: Option<f64>,
    pub sm_active_pct: Option<f64>,
    pub tensor_active_pct: Option<f64>,
    pub dram_throughput_pct: Option<f64>,
    /// Every metric's value over the span, in `PmReport::metrics` order.
    pub values: Vec<Option<f64>>,
}

/// The PM part of a report, `None` for a trace without PM sampling. Steps are added by
/// [`add_steps`] once they are known.
pub fn pm_report(trace: &Trace, window: Option<&Window>) -> Option<PmReport> {
    let info = trace.meta.pm_sampling.clone();
    if info.is_none() && trace.pm_samples.is_empty() {
        return None;
    }
    let info = info.unwrap_or_default();
    let series = Series::of(trace, &info);
    let unavailable = trace.pm_samples.iter().filter(|s| s.value.is_nan()).count() as u64;
    let mut devices: Vec<u32> = info.devices.clone();
    devices.extend(trace.pm_samples.iter().map(|s| s.device));
    devices.sort_unstable();
    devices.dedup();
    let devices = devices
        .into_iter()
        .map(|d| {
            let busy = busy_runs(trace, d, window);
            let (window, idle) = match (busy.first(), busy.last()) {
                (Some(&(s, _)), Some(&(_, e))) => {
                    let idle: Vec<(Ns, Ns)> = busy
                        .windows(2)
                        .map(|w| (w[0].1, w[1].0))
                        .filter(|(a, b)| b > a)
                        .collect();
                    let idle = (!idle.is_empty()).then(|| series.layers(d, &idle, &busy));
                    (Some(series.layers(d, &[(s, e)], &busy)), idle)
                }
                _ => (None, None),
            };
            PmDevice {
                device: d,
                samples: series.samples(d),
                window,
                idle_gaps: idle,
                steps: Vec::new(),
            }
        })
        .collect();
    Some(PmReport {
        metrics: series
            .names
            .iter()
            .map(|n| PmMetric {
                name: n.clone(),
                aggregation: aggregation(n),
            })
            .collect(),
        interval_ns: info.interval_ns,
        samples: info.samples,
        first_samples_dropped: info.first_samples_dropped,
        overflows: info.overflows,
        samples_lost: info.samples_lost,
        samples_dropped_queue: info.samples_dropped_queue,
        values_unavailable: unavailable,
        left_out: info.left_out,
        error: info.error,
        devices,
    })
}

/// Adds each step's layers to every sampled device (the step's host range as the span).
pub fn add_steps(pm: &mut PmReport, trace: &Trace, window: Option<&Window>, steps: &Steps) {
    let info = trace.meta.pm_sampling.clone().unwrap_or_default();
    let series = Series::of(trace, &info);
    for dev in &mut pm.devices {
        let busy = busy_runs(trace, dev.device, window);
        dev.steps = steps
            .steps
            .iter()
            .map(|s| StepLayers {
                index: s.index,
                name: s.name.clone(),
                layers: series.layers(dev.device, &[(s.start_ns, s.end_ns)], &busy),
            })
            .collect();
    }
}

/// The device's kernel intervals inside the window, merged (untimed kernels left out).
fn busy_runs(trace: &Trace, device: u32, window: Option<&Window>) -> Vec<(Ns, Ns)> {
    let mut iv: Vec<(Ns, Ns)> = trace
        .kernels
        .iter()
        .filter(|k| k.device == device && !k.untimed() && k.end_ns > k.start_ns)
        .filter_map(|k| crate::window::clip(window, k.start_ns, k.end_ns))
        .collect();
    merged_runs(&mut iv)
}

/// One sample's interval and value.
type Timed = (Ns, Ns, f64);

/// The samples per device and metric, sorted by start.
struct Series {
    names: Vec<String>,
    /// (device, metric index) → (start, end, value), NaN left out.
    by: BTreeMap<(u32, usize), Vec<Timed>>,
}

impl Series {
    fn of(trace: &Trace, info: &PmSamplingInfo) -> Series {
        // Metrics the device lacked were never sampled: not columns of the report.
        let mut names: Vec<String> = info
            .metrics
            .iter()
            .filter(|m| !info.left_out.contains(m))
            .cloned()
            .collect();
        let mut by: BTreeMap<(u32, usize), Vec<Timed>> = BTreeMap::new();
        for s in &trace.pm_samples {
            let name = trace
                .strings
                .get(s.metric as usize)
                .map_or("", String::as_str);
            let m = match names.iter().position(|n| n == name) {
                Some(m) => m,
                None => {
                    names.push(name.to_string());
                    names.len() - 1
                }
            };
            if s.value.is_nan() || s.end_ns <= s.start_ns {
                continue;
            }
            by.entry((s.device, m))
                .or_default()
                .push((s.start_ns, s.end_ns, s.value));
        }
        for v in by.values_mut() {
            v.sort_by_key(|&(s, e, _)| (s, e));
        }
        Series { names, by }
    }

    /// Samples of a device: those of its most-sampled metric.
    fn samples(&self, device: u32) -> u64 {
        self.by
            .iter()
            .filter(|((d, _), _)| *d == device)
            .map(|(_, v)| v.len() as u64)
            .max()
            .unwrap_or(0)
    }

    /// One metric over `span` (sorted, disjoint intervals): the overlap-weighted mean, or
    /// the prorated sum; `None` when no sample overlaps. Also the time samples cover.
    fn over(&self, device: u32, m: usize, span: &[(Ns, Ns)]) -> (Option<f64>, Ns) {
        let Some(samples) = self.by.get(&(device, m)) else {
            return (None, 0);
        };
        let sum = aggregation(&self.names[m]) == Aggregation::Sum;
        let (mut acc, mut covered) = (0.0, 0u64);
        for &(a, b) in span {
            // Samples are sorted by start; those ending before `a` are skipped by the filter.
            let first = samples.partition_point(|&(_, e, _)| e <= a);
            for &(s, e, v) in samples[first..].iter().take_while(|&&(s, _, _)| s < b) {
                let o = e.min(b).saturating_sub(s.max(a));
                if o == 0 {
                    continue;
                }
                covered += o;
                acc += if sum {
                    v * o as f64 / (e - s) as f64
                } else {
                    v * o as f64
                };
            }
        }
        if covered == 0 {
            return (None, 0);
        }
        (Some(if sum { acc } else { acc / covered as f64 }), covered)
    }

    fn layers(&self, device: u32, span: &[(Ns, Ns)], busy: &[(Ns, Ns)]) -> Layers {
        let span_ns: Ns = span.iter().map(|&(a, b)| b - a).sum();
        let running = crate::intervals::intersection_ns(span, busy);
        let pct = |x: Ns| {
            if span_ns == 0 {
                0.0
            } else {
                x as f64 * 100.0 / span_ns as f64
            }
        };
        let mut covered = 0;
        let values: Vec<Option<f64>> = (0..self.names.len())
            .map(|m| {
                let (v, c) = self.over(device, m, span);
                covered = covered.max(c);
                v
            })
            .collect();
        let named = |n: &str| {
            self.names
                .iter()
                .position(|x| x == n)
                .and_then(|m| values[m])
        };
        Layers {
            start_ns: span.first().map_or(0, |s| s.0),
            end_ns: span.last().map_or(0, |s| s.1),
            span_ns,
            kernels_running_pct: pct(running),
            sampled_pct: pct(covered),
            gpu_active_pct: named(GPU_ACTIVE),
            sm_active_pct: named(SM_ACTIVE),
            tensor_active_pct: named(TENSOR_ACTIVE),
            dram_throughput_pct: named(DRAM_THROUGHPUT),
            values,
        }
    }
}

/// Two traces' PM-sample layers side by side (`cutrace diff`), when either trace has PM samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmDiff {
    /// What each side sampled and lost; null for a side without PM samples.
    pub base: Option<PmSide>,
    pub new: Option<PmSide>,
    /// Every device either side sampled, by id.
    pub devices: Vec<PmDeviceDiff>,
}

/// One side's sampling facts (as in its report's `pm_samples`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmSide {
    pub interval_ns: u64,
    pub samples: u64,
    pub samples_lost: u64,
    pub values_unavailable: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmDeviceDiff {
    pub device: u32,
    /// First kernel start → last kernel end of each side.
    pub window: LayersDiff,
    /// The idle gaps of each side's window, together.
    pub idle_gaps: LayersDiff,
}

/// Each layer's percentage on both sides; a side's value is null where that side has no such
/// span (no kernels, no gaps) or no sample of the metric overlaps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayersDiff {
    pub kernels_running_pct: LayerChange,
    pub gpu_active_pct: LayerChange,
    pub sm_active_pct: LayerChange,
    pub tensor_active_pct: LayerChange,
    pub dram_throughput_pct: LayerChange,
    /// How much of each side's span samples cover: below 100, that side's layers rest on part
    /// of it.
    pub sampled_pct: LayerChange,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerChange {
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// `new − base` in percentage points, when both have a value.
    pub change_points: Option<f64>,
}

impl LayerChange {
    fn of(base: Option<f64>, new: Option<f64>) -> LayerChange {
        LayerChange {
            base,
            new,
            change_points: base.zip(new).map(|(b, n)| n - b),
        }
    }
}

impl LayersDiff {
    fn of(b: Option<&Layers>, n: Option<&Layers>) -> LayersDiff {
        let pair =
            |f: &dyn Fn(&Layers) -> Option<f64>| LayerChange::of(b.and_then(f), n.and_then(f));
        LayersDiff {
            kernels_running_pct: pair(&|l| Some(l.kernels_running_pct)),
            gpu_active_pct: pair(&|l| l.gpu_active_pct),
            sm_active_pct: pair(&|l| l.sm_active_pct),
            tensor_active_pct: pair(&|l| l.tensor_active_pct),
            dram_throughput_pct: pair(&|l| l.dram_throughput_pct),
            sampled_pct: pair(&|l| Some(l.sampled_pct)),
        }
    }

    /// The layers in the order the report gives them, with their names as the text shows them.
    pub fn rows(&self) -> [(&'static str, &LayerChange); 6] {
        [
            ("kernels running", &self.kernels_running_pct),
            ("GPU active", &self.gpu_active_pct),
            ("SMs active", &self.sm_active_pct),
            ("tensor pipes", &self.tensor_active_pct),
            ("DRAM throughput", &self.dram_throughput_pct),
            ("sampled", &self.sampled_pct),
        ]
    }
}

fn pm_side(r: &PmReport) -> PmSide {
    PmSide {
        interval_ns: r.interval_ns,
        samples: r.samples,
        samples_lost: r.samples_lost,
        values_unavailable: r.values_unavailable,
        error: r.error.clone(),
    }
}

/// The PM-sample layers of `new` against `base`, each over its own time window; `None` when
/// neither trace has PM samples.
pub fn pm_diff(
    base: &Trace,
    new: &Trace,
    windows: (Option<&Window>, Option<&Window>),
) -> Option<PmDiff> {
    let (b, n) = (pm_report(base, windows.0), pm_report(new, windows.1));
    pm_diff_of(b.as_ref(), n.as_ref())
}

/// [`pm_diff`] of two sides' PM reports.
pub fn pm_diff_of(b: Option<&PmReport>, n: Option<&PmReport>) -> Option<PmDiff> {
    if b.is_none() && n.is_none() {
        return None;
    }
    let mut by_dev: BTreeMap<u32, (Option<&PmDevice>, Option<&PmDevice>)> = BTreeMap::new();
    for d in b.iter().flat_map(|r| &r.devices) {
        by_dev.entry(d.device).or_default().0 = Some(d);
    }
    for d in n.iter().flat_map(|r| &r.devices) {
        by_dev.entry(d.device).or_default().1 = Some(d);
    }
    let devices = by_dev
        .into_iter()
        .map(|(device, (x, y))| PmDeviceDiff {
            device,
            window: LayersDiff::of(
                x.and_then(|d| d.window.as_ref()),
                y.and_then(|d| d.window.as_ref()),
            ),
            idle_gaps: LayersDiff::of(
                x.and_then(|d| d.idle_gaps.as_ref()),
                y.and_then(|d| d.idle_gaps.as_ref()),
            ),
        })
        .collect();
    Some(PmDiff {
        base: b.map(pm_side),
        new: n.map(pm_side),
        devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_trace::{Kernel, PmSample};

    fn kernel(start: Ns, end: Ns) -> Kernel {
        Kernel {
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: start,
            start_ns: start,
            end_ns: end,
            name: 0,
            launch: 0,
        }
    }

    /// Kernels on [100, 200) and [300, 400); SM active sampled every 50 ns over [50, 450): 100
    /// while a kernel runs, 0 otherwise; PCIe bytes 10 per sample; one NaN sample.
    fn trace() -> Trace {
        let mut t = Trace {
            strings: vec!["k".into(), SM_ACTIVE.into(), "pcie__read_bytes.sum".into()],
            kernels: vec![kernel(100, 200), kernel(300, 400)],
            ..Trace::default()
        };
        t.meta.pm_sampling = Some(PmSamplingInfo {
            metrics: vec![SM_ACTIVE.into(), "pcie__read_bytes.sum".into()],
            interval_ns: 50,
            devices: vec![0],
            samples: 8,
            ..PmSamplingInfo::default()
        });
        for i in 0..8u64 {
            let (s, e) = (50 + i * 50, 100 + i * 50);
            let on = (100..200).contains(&s) || (300..400).contains(&s);
            let sm = if i == 7 {
                f64::NAN
            } else if on {
                100.0
            } else {
                0.0
            };
            for (metric, value) in [(1, sm), (2, 10.0)] {
                t.pm_samples.push(PmSample {
                    start_ns: s,
                    end_ns: e,
                    device: 0,
                    process: 1,
                    metric,
                    value,
                });
            }
        }
        t
    }

    #[test]
    fn layers_over_the_window_and_the_idle_gaps() {
        let r = pm_report(&trace(), None).unwrap();
        assert_eq!(r.values_unavailable, 1);
        let d = &r.devices[0];
        let w = d.window.as_ref().unwrap();
        // Window [100, 400): kernels 200 of 300 ns; SM active 100 in 4 of 6 samples.
        assert_eq!((w.start_ns, w.end_ns, w.span_ns), (100, 400, 300));
        assert!((w.kernels_running_pct - 200.0 / 3.0).abs() < 1e-9);
        assert!((w.sm_active_pct.unwrap() - 200.0 / 3.0).abs() < 1e-9);
        // Bytes are summed: six whole samples of 10.
        assert_eq!(w.values[1], Some(60.0));
        let g = d.idle_gaps.as_ref().unwrap();
        assert_eq!(g.span_ns, 100);
        assert_eq!(g.kernels_running_pct, 0.0);
        assert_eq!(g.sm_active_pct, Some(0.0));
        assert_eq!(w.gpu_active_pct, None, "not sampled: null, never 0");
    }

    #[test]
    fn partial_samples_count_by_their_overlap() {
        let t = trace();
        let s = Series::of(&t, t.meta.pm_sampling.as_ref().unwrap());
        // [125, 175) lies in the sample [100, 150) (100) and [150, 200) (100).
        assert_eq!(s.over(0, 0, &[(125, 175)]).0, Some(100.0));
        // [175, 225): half of [150, 200) at 100, half of [200, 250) at 0.
        assert_eq!(s.over(0, 0, &[(175, 225)]).0, Some(50.0));
        // Bytes prorated: half of two samples of 10.
        assert_eq!(s.over(0, 1, &[(175, 225)]).0, Some(10.0));
        // Past the last sample: nothing.
        assert_eq!(s.over(0, 0, &[(1000, 2000)]), (None, 0));
        // The NaN sample [400, 450) is left out, so only [350, 400) covers [350, 450).
        assert_eq!(s.over(0, 0, &[(350, 450)]), (Some(100.0), 50));
    }

    #[test]
    fn a_trace_without_samples_has_no_pm_report() {
        let t = Trace::default();
        assert!(pm_report(&t, None).is_none());
    }

    #[test]
    fn a_diff_puts_each_layer_of_both_traces_side_by_side() {
        let base = trace();
        // The new run's SMs are half as active while its kernels run.
        let mut new = trace();
        for s in new
            .pm_samples
            .iter_mut()
            .filter(|s| s.metric == 1 && s.value == 100.0)
        {
            s.value = 50.0;
        }
        let d = pm_diff(&base, &new, (None, None)).unwrap();
        assert_eq!(d.devices.len(), 1);
        let w = &d.devices[0].window;
        let (b, n) = (
            pm_report(&base, None).unwrap().devices[0]
                .window
                .clone()
                .unwrap(),
            pm_report(&new, None).unwrap().devices[0]
                .window
                .clone()
                .unwrap(),
        );
        assert_eq!(w.sm_active_pct.base, b.sm_active_pct);
        assert_eq!(w.sm_active_pct.new, n.sm_active_pct);
        let change = w.sm_active_pct.change_points.unwrap();
        assert!((change - (n.sm_active_pct.unwrap() - b.sm_active_pct.unwrap())).abs() < 1e-12);
        assert!(change < -20.0, "{change}");
        assert_eq!(w.kernels_running_pct.change_points, Some(0.0));
        // Not sampled: null on both sides, no change.
        assert_eq!(
            w.tensor_active_pct,
            LayerChange {
                base: None,
                new: None,
                change_points: None
            }
        );
        // Idle gaps: the SMs were idle in both.
        assert_eq!(
            d.devices[0].idle_gaps.sm_active_pct.change_points,
            Some(0.0)
        );
        assert_eq!(d.base.as_ref().unwrap().samples, 8);

        // One side without PM samples: its values are null.
        let plain = Trace {
            kernels: base.kernels.clone(),
            strings: base.strings.clone(),
            ..Trace::default()
        };
        let d = pm_diff(&plain, &new, (None, None)).unwrap();
        assert!(d.base.is_none());
        assert_eq!(d.devices[0].window.sm_active_pct.base, None);
        assert_eq!(d.devices[0].window.sm_active_pct.change_points, None);
        assert!(pm_diff(&plain, &plain, (None, None)).is_none());
    }
}
