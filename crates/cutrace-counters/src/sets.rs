//! Named metric sets for `cutrace profile --set`: what each is for, and its metrics in the
//! order they are reported. Pass counts are not written here: the host API computes them for
//! the chip at hand (`plan`), and the tests pin them for GH100.

/// A named list of metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSet {
    pub name: &'static str,
    pub about: &'static str,
    pub metrics: &'static [&'static str],
}

/// One pass on GH100: launch counts, instructions, DRAM traffic, time and cycles, occupancy and
/// tensor-pipe activity. Counts that a kernel of known shape fixes exactly (CTAs, warps) are
/// among them, so a run can be checked.
pub const BASIC: MetricSet = MetricSet {
    name: "basic",
    about: "launch counts, instructions, DRAM bytes, time, cycles, occupancy, tensor pipes (1 pass on GH100)",
    metrics: &[
        "gpu__time_duration.sum",
        "sm__ctas_launched.sum",
        "smsp__warps_launched.sum",
        "smsp__inst_executed.sum",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "sm__cycles_active.avg",
        "gpc__cycles_elapsed.max",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    ],
};

/// The metrics of Nsight Compute's "GPU Speed Of Light Throughput" section (SpeedOfLight):
/// compute and memory throughput against peak, the cache and DRAM throughputs behind them,
/// duration, cycles and clocks. Needs several replay passes.
pub const SOL: MetricSet = MetricSet {
    name: "sol",
    about:
        "Nsight Compute's Speed Of Light section: SM and memory throughput vs peak (several passes)",
    metrics: &[
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__time_duration.sum",
        "gpc__cycles_elapsed.max",
        "sm__cycles_active.avg",
        "dram__cycles_elapsed.avg.per_second",
        "gpc__cycles_elapsed.avg.per_second",
    ],
};

pub const ALL: &[MetricSet] = &[BASIC, SOL];

/// The set called `name`.
pub fn by_name(name: &str) -> Option<&'static MetricSet> {
    ALL.iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_found_by_name_and_hold_no_duplicates() {
        assert_eq!(by_name("basic").unwrap().metrics.len(), 10);
        assert_eq!(by_name("sol").unwrap().metrics.len(), 10);
        assert!(by_name("full").is_none());
        for s in ALL {
            let mut m = s.metrics.to_vec();
            m.sort_unstable();
            m.dedup();
            assert_eq!(m.len(), s.metrics.len(), "{}", s.name);
        }
    }
}
