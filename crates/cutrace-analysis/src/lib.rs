//! cutrace-analysis: pure functions over records. Nothing here depends on record order.
//!
//! The entry point is [`analyze`], which the `cutrace report` command prints. Each part is also
//! usable alone: [`kernel_timelines`] (busy, idle, gaps per device and stream), [`correlate`]
//! (the correlation join and launch latency), [`kernel_summary`] / [`api_summary`],
//! [`transfer_summary`], [`range_breakdown`], and the interval primitives in [`intervals`].
//! [`diff`] compares two traces. A distributed job is a map over its ranks' traces
//! ([`RankSummary::from_trace`]) and a reduce over the summaries ([`from_summaries`]).
//! Time is integer nanoseconds throughout; the only floats are derived percentages and GB/s.

pub mod correlate;
pub mod counters;
pub mod critical_path;
pub mod diff;
pub mod error;
pub mod gap_reading;
pub mod host_ops;
pub mod intervals;
pub mod job;
pub mod job_diff;
pub mod job_path;
pub mod job_path_diff;
pub mod job_reduce;
pub mod job_verdict;
pub mod launches;
pub mod memory;
pub mod names;
pub mod parts;
pub mod pc;
pub mod percentile;
pub mod pm;
pub mod ranges;
pub mod report;
pub mod runtime;
pub mod steps;
pub mod summary;
pub mod timeline;
pub mod transfers;
pub mod units;
pub mod verdict;
pub mod window;

pub use correlate::{
    correlate, launch_latencies, ApiIndex, Correlation, JoinCounts, LaunchLatency,
};
pub use diff::{diff, diff_side, diff_sides, Diff, DiffOptions, DiffSide, DIFF_SCHEMA_VERSION};
pub use error::AnalysisError;
pub use gap_reading::GapReading;
pub use intervals::{intersection_ns, merge_in_place, merged_runs, union_ns, BusyIndex};
pub use job::{
    is_comm_kernel, DeadReason, RankFrom, RankLosses, RankSummary, RANK_SUMMARY_OLDEST_READ,
    RANK_SUMMARY_VERSION,
};
pub use job_diff::{diff_jobs, JobCaveat, JobDiff};
pub use job_reduce::{from_summaries, JobNote, JobReport};
pub use launches::{is_kernel_launch, LaunchLoss};
pub use memory::{memory_report, MemoryReport};
pub use names::display_name;
pub use parts::{separate_runs, PartGap, SeparateRuns};
pub use percentile::{nearest_rank, percentile, percentiles, Percentiles};
pub use ranges::{range_breakdown, RangeSummary};
pub use report::{
    analyze, DataLoss, DeviceReport, IdleSplit, Options, Report, SourceDrop, TraceInfo, WindowInfo,
};
pub use steps::{steps, Step, StepMatch, Steps};
pub use summary::{api_summary, kernel_summary, KernelNameSummary, NameStats};
pub use timeline::{
    kernel_timelines, DeviceTimeline, Gap, GapBucket, GapHost, KernelRef, NamedSpan, NextLaunch,
    StreamTimeline, Timeline,
};
pub use transfers::{transfer_summary, TransferSummary};
pub use units::fmt_ns;
pub use window::{parse_time_arg, trace_bounds, TimeArg, Window};
