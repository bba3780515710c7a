//! The map step of a distributed job's analysis: one rank's trace reduced to a small
//! [`RankSummary`] (busy, communication, exposed communication, idle split, step times, and the
//! arrival of its kernel at every collective), which [`crate::job_reduce`] joins across ranks.
//!
//! A summary is serde both ways and carries a version member first
//! (`{"cutrace_rank_summary":1,…}`), so a summary written on one machine
//! (`cutrace report --rank-summary`) is read back as input to the reduce on another.
//!
//! Definitions, per GPU of the rank (GPUs are never unioned with each other; the rank's figures
//! are the sums over its GPUs):
//! - busy: the union of all its kernels;
//! - communication: the union of its NCCL kernels ([`is_comm_kernel`]);
//! - exposed communication: communication time during which no other (compute) kernel ran on
//!   that GPU: union(NCCL) − union(NCCL) ∩ union(compute);
//! - a collective's arrival: the start of the rank's kernel for it. An NCCL kernel starts when
//!   its rank reaches the collective and then waits inside the kernel for its peers, so the last
//!   rank's start is when the collective could begin for everyone.

use std::collections::BTreeMap;

use cutrace_trace::{Kernel, Ns, SourceFormat, Trace};
use serde::{Deserialize, Serialize};

use crate::error::AnalysisError;
use crate::intervals::{intersection_ns, merged_runs};
use crate::report::{analyze, Options};
use crate::steps::StepMatch;

/// The version of [`RankSummary`]'s JSON; rises when a field is renamed, removed or changes
/// meaning (new fields do not raise it). 3: `dead` is a [`DeadReason`], no longer a string.
pub const RANK_SUMMARY_VERSION: u32 = 3;

/// The oldest version of [`RankSummary`]'s JSON that still reads as this one: version 2 differs
/// only in `dead`, a string then, which [`DeadReason`] reads.
pub const RANK_SUMMARY_OLDEST_READ: u32 = 2;

pub use cutrace_trace::comm::{is_comm_kernel, COMM_PREFIXES};

/// The collective an NCCL kernel's name says it runs: `AllReduce` for
/// `ncclDevKernel_AllReduce_Sum_f32_RING_LL(…)`; the name as is when it says none. A hint only:
/// one NCCL kernel can run several operations, and its name gives the first (NCCL's maintainers
/// in NVIDIA/nccl issues 739 and 2196), which is why torch's annotations are preferred.
pub fn comm_kernel_collective(name: &str) -> &str {
    let rest = COMM_PREFIXES
        .iter()
        .find_map(|p| name.find(p).map(|i| &name[i + p.len()..]));
    match rest {
        Some(r) => {
            let end = r.find(['_', '(']).unwrap_or(r.len());
            &r[..end]
        }
        None => name,
    }
}

/// How a summary's rank was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankFrom {
    /// The trace says (torch.profiler's `distributedInfo.rank`, a native part's `RANK`).
    Trace,
    /// The file name says (`rank3`, `rank_3`, `rank-3`), as the trace does not.
    FileName,
    /// Unknown: the reduce numbers it after the known ranks, in input order, and says so.
    Unknown,
}

/// One rank's trace, reduced for the job report. Every time is on the rank's own clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    /// [`RANK_SUMMARY_VERSION`]; first, so that a reader can tell a summary from a trace.
    pub cutrace_rank_summary: u32,
    pub rank: Option<u32>,
    pub rank_from: RankFrom,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub backend: Option<String>,
    pub run_id: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// `native` or `kineto`; `null` when the trace could not be read.
    pub source: Option<String>,
    /// The file(s) the rank was read from.
    pub paths: Vec<String>,
    /// Why the rank has no numbers: its trace could not be read, or holds no kernel. `null` for
    /// a live rank.
    pub dead: Option<DeadReason>,
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    /// What the trace says it lost: records dropped by the recorder or CUPTI, damaged bytes,
    /// the profiler's own drop counts (all 0 when it lost nothing it knows of).
    #[serde(default)]
    pub data_loss: RankLosses,
    pub first_ns: Option<Ns>,
    pub last_ns: Option<Ns>,
    pub kernels: u64,
    pub comm_kernels: u64,
    /// Sums over the rank's GPUs of each GPU's figure (see the module's definitions).
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub comm_ns: Ns,
    pub exposed_comm_ns: Ns,
    pub idle_ns: Ns,
    pub idle_before_launch_ns: Ns,
    pub idle_after_launch_ns: Ns,
    pub idle_unknown_ns: Ns,
    pub devices: Vec<RankDevice>,
    /// The step names matched (`ProfilerStep#*`), and the rank's steps in time order.
    pub steps_matched: String,
    pub steps: Vec<RankStep>,
    /// `annotations` (torch's `record_param_comms`, joined to kernels by correlation id),
    /// `kernels` (no annotation: the NCCL kernels themselves, in start order), or `none`.
    pub collectives_from: String,
    /// Annotated collectives whose kernel is not in the trace (NCCL launches no kernel for a
    /// group of one rank; a kernel dropped).
    pub collectives_without_kernel: u64,
    /// The rank's arrival at every collective, in (group, start) order.
    pub collectives: Vec<Arrival>,
}

/// Why a rank has no figures. The words are the renderers' (`cutrace_export::text::job`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeadReason {
    /// Its trace could not be read (empty, truncated, not a trace): the reader's error.
    Unreadable { error: String },
    /// Its trace was read and the analysis could not run on it: the analysis's error.
    AnalysisFailed { error: String },
    /// Its trace holds no timed GPU kernel.
    NoTimedKernel,
}

/// What a version-2 summary's `dead` string said when its trace held no timed kernel.
const NO_TIMED_KERNEL_V2: &str = "the trace holds no timed GPU kernel";

/// A [`DeadReason`] as written (`{"kind": …}`), or a version-2 summary's string: its words for
/// [`DeadReason::NoTimedKernel`] read as that, any other as [`DeadReason::Unreadable`] (the
/// reason it gave but for an analysis that failed, which version 2 did not tell apart).
impl<'de> Deserialize<'de> for DeadReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{MapAccess, Visitor};
        #[derive(Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        enum Typed {
            Unreadable { error: String },
            AnalysisFailed { error: String },
            NoTimedKernel,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DeadReason;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object with a `kind`, or a version-2 summary's string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DeadReason, E> {
                Ok(if v == NO_TIMED_KERNEL_V2 {
                    DeadReason::NoTimedKernel
                } else {
                    DeadReason::Unreadable { error: v.into() }
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<DeadReason, A::Error> {
                let t = Typed::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(match t {
                    Typed::Unreadable { error } => DeadReason::Unreadable { error },
                    Typed::AnalysisFailed { error } => DeadReason::AnalysisFailed { error },
                    Typed::NoTimedKernel => DeadReason::NoTimedKernel,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// One GPU of a rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankDevice {
    pub device: u32,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub comm_ns: Ns,
    pub exposed_comm_ns: Ns,
    pub idle_ns: Ns,
}

/// One step of a rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankStep {
    pub name: String,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// Summed over the rank's GPUs: each GPU's busy time (union) inside the step.
    pub busy_ns: Ns,
}

/// A rank's kernel for one collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrival {
    /// Process group name (`0`); `null` when the collective is known only from its kernel.
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub group_desc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub group_size: Option<u32>,
    /// The group's sequence number of the call, when the source wrote it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seq: Option<u64>,
    /// 0-based position of the call among the rank's calls in its group, by kernel start.
    pub order: u64,
    /// `allreduce` (annotation) or `AllReduce` (from the kernel's name).
    pub name: String,
    pub device: u32,
    pub start_ns: Ns,
    pub end_ns: Ns,
}

impl RankSummary {
    /// The summary of a rank whose trace could not be used: no numbers, the reason.
    pub fn dead(
        rank: Option<u32>,
        rank_from: RankFrom,
        paths: Vec<String>,
        why: DeadReason,
    ) -> Self {
        RankSummary {
            dead: Some(why),
            ..RankSummary::blank(rank, rank_from, paths)
        }
    }

    /// A live rank's summary before its trace's figures are added: every figure 0.
    fn blank(rank: Option<u32>, rank_from: RankFrom, paths: Vec<String>) -> Self {
        RankSummary {
            cutrace_rank_summary: RANK_SUMMARY_VERSION,
            rank,
            rank_from,
            local_rank: None,
            world_size: None,
            backend: None,
            run_id: None,
            host: None,
            pid: None,
            source: None,
            paths,
            dead: None,
            complete: false,
            incomplete_reason: None,
            data_loss: RankLosses::default(),
            first_ns: None,
            last_ns: None,
            kernels: 0,
            comm_kernels: 0,
            window_ns: 0,
            busy_ns: 0,
            comm_ns: 0,
            exposed_comm_ns: 0,
            idle_ns: 0,
            idle_before_launch_ns: 0,
            idle_after_launch_ns: 0,
            idle_unknown_ns: 0,
            devices: Vec::new(),
            steps_matched: String::new(),
            steps: Vec::new(),
            collectives_from: "none".into(),
            collectives_without_kernel: 0,
            collectives: Vec::new(),
        }
    }

    /// Whether the figures hold together as [`RankSummary::from_trace`] writes them (exposed ≤
    /// communication ≤ busy ≤ window; steps and arrivals end after they start); the first that
    /// does not, in words. A summary read from a file is checked before the reduce uses it.
    pub fn check(&self) -> Result<(), String> {
        let order = |what: &str, small: Ns, large: Ns| {
            if small > large {
                Err(format!("{what} ({small} > {large})"))
            } else {
                Ok(())
            }
        };
        order(
            "exposed_comm_ns above comm_ns",
            self.exposed_comm_ns,
            self.comm_ns,
        )?;
        order("comm_ns above busy_ns", self.comm_ns, self.busy_ns)?;
        order("busy_ns above window_ns", self.busy_ns, self.window_ns)?;
        for d in &self.devices {
            order(
                "a device's exposed_comm_ns above its comm_ns",
                d.exposed_comm_ns,
                d.comm_ns,
            )?;
            order(
                "a device's busy_ns above its window_ns",
                d.busy_ns,
                d.window_ns,
            )?;
        }
        for st in &self.steps {
            order("a step's start_ns after its end_ns", st.start_ns, st.end_ns)?;
            if st.duration_ns != st.end_ns - st.start_ns {
                return Err(format!(
                    "step {} has duration_ns ≠ end_ns − start_ns",
                    st.name
                ));
            }
        }
        for a in &self.collectives {
            order(
                "a collective's start_ns after its end_ns",
                a.start_ns,
                a.end_ns,
            )?;
        }
        Ok(())
    }

    /// Reduces one rank's trace. The rank is the trace's own (`meta.distributed`), else
    /// `fallback` (from the file name, or unknown). A trace without kernels is a dead rank.
    pub fn from_trace(
        trace: &Trace,
        fallback: (Option<u32>, RankFrom),
        which: &StepMatch,
    ) -> Result<RankSummary, AnalysisError> {
        let dist = trace.meta.distributed.clone().unwrap_or_default();
        let (rank, rank_from) = match dist.rank {
            Some(r) => (Some(r), RankFrom::Trace),
            None => fallback,
        };
        let mut s = RankSummary::blank(rank, rank_from, trace.meta.paths.clone());
        s.local_rank = dist.local_rank;
        s.world_size = dist.world_size;
        s.backend = dist.backend;
        s.run_id = dist.run_id;
        s.host = trace.meta.host.clone();
        s.pid = trace.meta.pid;
        s.source = Some(
            match trace.meta.source {
                SourceFormat::Native => "native",
                SourceFormat::Kineto => "kineto",
            }
            .into(),
        );
        s.complete = trace.meta.complete;
        s.incomplete_reason = trace.meta.incomplete_reason.clone();
        let bounds = trace.bounds_ns();
        s.first_ns = bounds.map(|b| b.0);
        s.last_ns = bounds.map(|b| b.1);
        s.kernels = trace.kernels.len() as u64;
        if trace.kernels.iter().all(Kernel::untimed) {
            s.dead = Some(DeadReason::NoTimedKernel);
            return Ok(s);
        }
        // The one report pipeline, steps included: a rank's figures are its report's.
        let opts = Options {
            window: None,
            top: 0,
            orphan_list: 0,
            steps: Some(which.clone()),
        };
        let mut report = analyze(trace, &opts)?;
        s.data_loss = losses(&report.data_loss);
        let comm = comm_by_device(trace);
        for d in report.devices.iter().filter(|d| d.timeline.kernels > 0) {
            let (comm_ns, exposed_comm_ns) = comm.get(&d.device).copied().unwrap_or((0, 0));
            let split = d.idle_split.unwrap_or_default();
            s.window_ns += d.timeline.window_ns;
            s.busy_ns += d.timeline.busy_ns;
            s.comm_ns += comm_ns;
            s.exposed_comm_ns += exposed_comm_ns;
            s.idle_ns += d.timeline.idle_ns;
            s.idle_before_launch_ns += split.before_launch_ns;
            s.idle_after_launch_ns += split.after_launch_ns;
            s.idle_unknown_ns += split.unknown_ns;
            s.devices.push(RankDevice {
                device: d.device,
                window_ns: d.timeline.window_ns,
                busy_ns: d.timeline.busy_ns,
                comm_ns,
                exposed_comm_ns,
                idle_ns: d.timeline.idle_ns,
            });
        }
        s.comm_kernels = trace
            .kernels
            .iter()
            .filter(|k| is_comm_kernel(trace.str(k.name)))
            .count() as u64;
        s.steps_matched = which.text();
        if let Some(st) = report.steps.take() {
            s.steps = st
                .steps
                .into_iter()
                .map(|x| RankStep {
                    busy_ns: x.devices.iter().map(|d| d.busy_ns).sum(),
                    name: x.name,
                    start_ns: x.start_ns,
                    end_ns: x.end_ns,
                    duration_ns: x.duration_ns,
                })
                .collect();
        }
        arrivals(trace, &mut s);
        Ok(s)
    }
}

/// What a rank's trace says it lost, as counts (the words are the renderers':
/// `cutrace_export::text::job::losses_text`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RankLosses {
    pub dropped_by_recorder: u64,
    pub dropped_by_cupti: u64,
    pub damaged_bytes: u64,
    pub damaged_regions: u64,
    /// Records that end before they start (read as zero-length).
    pub inverted_intervals: u64,
    /// The profiler's own account of what it dropped (Kineto's `Out-of-range`, …), the counts
    /// above 0, in its order.
    pub profiler_own: Vec<(String, u64)>,
}

impl RankLosses {
    /// The trace lost something it knows of.
    pub fn any(&self) -> bool {
        *self != RankLosses::default()
    }
}

fn losses(d: &crate::report::DataLoss) -> RankLosses {
    RankLosses {
        dropped_by_recorder: d.dropped_by_recorder,
        dropped_by_cupti: d.dropped_by_cupti,
        damaged_bytes: d.damaged_bytes,
        damaged_regions: d.damaged_regions,
        inverted_intervals: d.inverted_intervals,
        profiler_own: d
            .source_drops
            .iter()
            .filter(|x| x.count > 0)
            .map(|x| (x.name.clone(), x.count))
            .collect(),
    }
}

/// Per device: (union of NCCL kernels, the part of it with no compute kernel running).
fn comm_by_device(trace: &Trace) -> BTreeMap<u32, (Ns, Ns)> {
    // Names are interned: classify each distinct name once.
    let mut is_comm: BTreeMap<u32, bool> = BTreeMap::new();
    // device → (NCCL intervals, compute intervals)
    type Lanes = BTreeMap<u32, (Vec<(Ns, Ns)>, Vec<(Ns, Ns)>)>;
    let mut lanes: Lanes = BTreeMap::new();
    for k in trace.kernels.iter().filter(|k| !k.untimed()) {
        let c = *is_comm
            .entry(k.name)
            .or_insert_with(|| is_comm_kernel(trace.str(k.name)));
        let lane = lanes.entry(k.device).or_default();
        let iv = (k.start_ns, k.end_ns.max(k.start_ns));
        if c {
            lane.0.push(iv);
        } else {
            lane.1.push(iv);
        }
    }
    lanes
        .into_iter()
        .map(|(dev, (mut comm, mut compute))| {
            let comm = merged_runs(&mut comm);
            let compute = merged_runs(&mut compute);
            let total: Ns = comm.iter().map(|r| r.1 - r.0).sum();
            (dev, (total, total - intersection_ns(&comm, &compute)))
        })
        .collect()
}

/// Fills the rank's collective arrivals: from the trace's annotations when it has them, else
/// from its NCCL kernels.
fn arrivals(trace: &Trace, s: &mut RankSummary) {
    let mut out: Vec<Arrival> = Vec::new();
    if !trace.collectives.is_empty() {
        s.collectives_from = "annotations".into();
        let mut by_corr: BTreeMap<(u32, u64), &Kernel> = BTreeMap::new();
        for k in trace.kernels.iter().filter(|k| !k.untimed()) {
            by_corr.entry((k.device, k.correlation_id)).or_insert(k);
        }
        for c in &trace.collectives {
            let Some(k) = by_corr.get(&(c.device, c.correlation_id)) else {
                s.collectives_without_kernel += 1;
                continue;
            };
            let text = |id: Option<u32>| id.map(|i| crate::names::held(trace.str(i)));
            out.push(Arrival {
                group: Some(text(c.group_name).unwrap_or_default()),
                group_desc: text(c.group_desc),
                group_size: c.group_size,
                seq: c.seq,
                order: 0,
                name: crate::names::held(trace.str(c.name)),
                device: k.device,
                start_ns: k.start_ns,
                end_ns: k.end_ns,
            });
        }
    } else {
        for k in trace.kernels.iter().filter(|k| !k.untimed()) {
            let name = trace.str(k.name);
            if is_comm_kernel(name) {
                out.push(Arrival {
                    group: None,
                    group_desc: None,
                    group_size: None,
                    seq: None,
                    order: 0,
                    name: crate::names::held(comm_kernel_collective(name)),
                    device: k.device,
                    start_ns: k.start_ns,
                    end_ns: k.end_ns,
                });
            }
        }
        s.collectives_from = if out.is_empty() { "none" } else { "kernels" }.into();
    }
    // Record order is not time order: sort, then number each group's calls.
    out.sort_by(|a, b| {
        (&a.group, a.start_ns, a.end_ns, a.device, &a.name)
            .cmp(&(&b.group, b.start_ns, b.end_ns, b.device, &b.name))
    });
    let mut next: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for a in &mut out {
        let n = next.entry(a.group.clone()).or_default();
        a.order = *n;
        *n += 1;
    }
    s.collectives = out;
}

/// The rank a file name states: the number after `rank` or `worker` (`rank3`, `rank_3`,
/// `rank-3`, `trace.rank3.json`, `worker5_host.pt.trace.json`: HTA's and many launchers' names
/// for rank 5's trace), case-insensitive; `None` when it states none. A bare number is no rank:
/// torch.profiler's own names (`HOST_PID.TIMESTAMP.pt.trace.json`) end in a pid and a time.
pub fn rank_from_file_name(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    ["rank", "worker"]
        .iter()
        .filter_map(|word| number_after(&lower, word))
        .min_by_key(|&(at, _)| at)
        .and_then(|(_, n)| n.parse().ok())
}

/// The first place in `lower` where `word` starts a word (`frank7` and `cranky2` name no rank)
/// and is followed by digits (after one `_`, `-` or `.`): its offset and the digits.
fn number_after<'a>(lower: &'a str, word: &str) -> Option<(usize, &'a str)> {
    let mut from = 0;
    while let Some(i) = lower[from..].find(word) {
        let at = from + i;
        from = at + word.len();
        let word_start = !lower[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphabetic());
        if !word_start {
            continue;
        }
        let rest = &lower[from..];
        let rest = rest.strip_prefix(['_', '-', '.']).unwrap_or(rest);
        let end = rest.bytes().take_while(u8::is_ascii_digit).count();
        if end > 0 {
            return Some((at, &rest[..end]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_kernels_are_told_from_compute_in_every_spelling() {
        for n in [
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "void ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
            "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_f32(ncclSymkDevWorkArgs4K)",
            "mscclKernel_Sum_float_LL(x)",
        ] {
            assert!(is_comm_kernel(n), "{n}");
        }
        for n in [
            "ampere_sgemm_128x64_nn",
            "void at::native::ncclish()",
            "nccl",
        ] {
            assert!(!is_comm_kernel(n), "{n}");
        }
        assert_eq!(
            comm_kernel_collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"),
            "AllReduce"
        );
        assert_eq!(
            comm_kernel_collective("ncclDevKernel_SendRecv(x)"),
            "SendRecv"
        );
    }

    #[test]
    fn ranks_in_file_names() {
        assert_eq!(rank_from_file_name("rank3.json.gz"), Some(3));
        assert_eq!(rank_from_file_name("job_Rank_12.pt.trace.json"), Some(12));
        assert_eq!(rank_from_file_name("ranks/rank-0"), Some(0));
        assert_eq!(rank_from_file_name("host_123.json"), None);
        assert_eq!(rank_from_file_name("frank.json"), None);
        assert_eq!(rank_from_file_name("frank7.json"), None);
        assert_eq!(rank_from_file_name("frank7_rank2.json"), Some(2));
        assert_eq!(
            rank_from_file_name("worker5_ip-10-0-0-1.1712.pt.trace.json"),
            Some(5)
        );
        assert_eq!(rank_from_file_name("Worker-12.json.gz"), Some(12));
        assert_eq!(rank_from_file_name("workers/worker_3.json"), Some(3));
        // The first of the two words in the name decides.
        assert_eq!(rank_from_file_name("rank1_worker4.json"), Some(1));
        assert_eq!(rank_from_file_name("coworker7.json"), None);
        assert_eq!(rank_from_file_name("host_5.pt.trace.json"), None);
        assert_eq!(rank_from_file_name("rank99999999999.json"), None);
    }
}
