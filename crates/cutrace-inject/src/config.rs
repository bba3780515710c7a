//! The injection's settings, read once from the environment that `cutrace record` prepared.

use cutrace_cupti::activity::kind;

use cutrace_settings::{default_kinds, var, ApiMode, Problem, Settings};

/// Activity kinds by their short names (`--kinds`), in enabling order.
pub const KIND_NAMES: &[(&str, u32)] = &[
    ("kernel", kind::CONCURRENT_KERNEL),
    ("runtime", kind::RUNTIME),
    ("driver", kind::DRIVER),
    ("memcpy", kind::MEMCPY),
    ("memset", kind::MEMSET),
    ("sync", kind::SYNCHRONIZATION),
    ("nvtx", kind::MARKER),
    ("overhead", kind::OVERHEAD),
    ("memory", kind::MEMORY2),
];

pub const DEFAULT_BUFFER_BYTES: usize = 8 << 20;
pub const MIN_BUFFER_BYTES: usize = 1 << 20;
pub const MAX_BUFFER_BYTES: usize = 10 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub output_dir: std::path::PathBuf,
    pub kinds: Vec<u32>,
    pub buffer_bytes: usize,
    /// Most buffers the pool will ever hold (memory bound = this × buffer_bytes).
    pub max_buffers: usize,
    /// Buffers allocated and touched up front.
    pub prealloc_buffers: usize,
    /// Floor mode: enable the same kinds, but discard every record.
    pub discard: bool,
    /// Use the serializing KERNEL kind instead of CONCURRENT_KERNEL.
    pub serialize_kernels: bool,
    /// When set, RUNTIME records only for these callback ids (cuptiActivityEnableRuntimeApi).
    pub runtime_cbids: Option<Vec<u32>>,
    /// Which RUNTIME/DRIVER calls get records (`CUTRACE_API`, `cutrace record --api`).
    pub api_mode: ApiMode,
    /// CUPTI's per-context device buffer for kernel records
    /// (`CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE`), from `CUTRACE_DEVICE_BUFFER_BYTES`; `None`
    /// leaves CUPTI's default. A benchmark knob: whether a larger one lowers the floor.
    pub device_buffer_bytes: Option<usize>,
    pub record_cmdline: bool,
    /// How long the exit handler waits for the writer.
    pub exit_deadline_ms: u64,
    /// How often the writer asks CUPTI for completed buffers.
    pub flush_period_ms: u64,
    /// Problems with the settings, reported once and stored in the trace header.
    pub notes: Vec<String>,
    /// The process's rank and the `cutrace record` run id, for the part's header.
    pub distributed: Option<cutrace_trace::Distributed>,
    /// Hold CUPTI's subscriber slot (off only for benchmarks: `Knobs::subscribe`).
    pub subscribe: bool,
    /// Send summaries to `cutrace monitor`'s socket (`monitor.rs`): instead of writing a part,
    /// or as well when an output directory is set too (`cutrace monitor --record DIR`).
    pub monitor_socket: Option<std::path::PathBuf>,
    /// Monitor mode's duty cycle: records on for part of each period only.
    pub duty: Option<cutrace_settings::Duty>,
    /// The uid the monitor's socket must be served by, when pinned.
    pub monitor_uid: Option<u32>,
    /// Monitor mode: after this long without a record, CUPTI is asked to hand over what it
    /// holds, unfinished kernels included (a forced flush; half the monitor's stuck-after).
    pub force_flush_after: std::time::Duration,
    /// Whether a part is written: always but in monitor mode without an output directory.
    pub write_part: bool,
    /// The job, for the monitor's labels: `SLURM_JOB_ID`, else torchrun's `TORCHELASTIC_RUN_ID`.
    pub job: Option<String>,
}

/// Activity kinds from a comma-separated list of cutrace's names (`kernel,runtime,...`), in
/// order, without repeats; `kernel` means CONCURRENT_KERNEL, or the serializing KERNEL kind with
/// `serialize_kernels`, `memory` MEMORY2 and MEMORY_POOL. The second list holds the names that
/// are not kinds.
pub fn parse_kinds<'a>(
    names: impl IntoIterator<Item = &'a str>,
    serialize_kernels: bool,
) -> (Vec<u32>, Vec<String>) {
    let mut kinds = Vec::new();
    let mut unknown = Vec::new();
    for name in names.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        match KIND_NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, k)) => {
                let k = if k == kind::CONCURRENT_KERNEL && serialize_kernels {
                    kind::KERNEL
                } else {
                    k
                };
                // MEMORY2 tells which pool an allocation came from; the pool's own records
                // (created, trimmed, destroyed: a few per run) come with it.
                let with: &[u32] = if k == kind::MEMORY2 {
                    &[kind::MEMORY2, kind::MEMORY_POOL]
                } else {
                    &[k]
                };
                for &k in with {
                    if !kinds.contains(&k) {
                        kinds.push(k);
                    }
                }
            }
            None => unknown.push(name.to_string()),
        }
    }
    (kinds, unknown)
}

/// The variables whose bad values the counter and sampling settings refuse (their sessions do
/// not start, and say why); every other bad value is a note in the trace.
pub const REFUSED_BY_SESSIONS: [&str; 4] = [
    var::COUNTERS_MAX_KERNELS,
    var::COUNTERS_EVERY,
    var::PM_INTERVAL_NS,
    var::PM_DEVICES,
];

impl Config {
    /// The tracing settings `s` asks for, in range: what `problems` (the values that did not
    /// parse) and the ranges left out is said in `notes`. `env` gives the launcher's rank
    /// variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`).
    pub fn from_settings(
        s: &Settings,
        problems: &[Problem],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Config {
        let mut notes: Vec<String> = problems
            .iter()
            .filter(|p| !REFUSED_BY_SESSIONS.contains(&p.var))
            .map(|p| match p.var {
                // An unknown mode records every call, not the default: too many records rather
                // than a query someone wanted missing.
                var::API => format!("{p}: recording all API calls"),
                _ => format!("{p}: ignored"),
            })
            .collect();
        let kind_names = s.kinds.clone().unwrap_or_else(default_kinds);
        let (kinds, unknown) =
            parse_kinds(kind_names.iter().map(String::as_str), s.serialize_kernels);
        notes.extend(
            unknown
                .into_iter()
                .map(|name| format!("unknown activity kind '{name}' ignored")),
        );
        let buffer_bytes = match s.buffer_bytes.map(|b| usize::try_from(b).unwrap_or(0)) {
            None => DEFAULT_BUFFER_BYTES,
            Some(b) if (MIN_BUFFER_BYTES..=MAX_BUFFER_BYTES).contains(&b) => b,
            Some(_) => {
                notes.push(format!(
                    "{} outside 1–10 MiB; using 8 MiB",
                    var::BUFFER_BYTES
                ));
                DEFAULT_BUFFER_BYTES
            }
        };
        let k = &s.knobs;
        let device_buffer_bytes = match k.device_buffer_bytes {
            None => None,
            Some(b) if (1 << 20..=1 << 30).contains(&b) => Some(b as usize),
            Some(_) => {
                notes.push(format!(
                    "{} outside 1 MiB–1 GiB; CUPTI's default kept",
                    var::DEVICE_BUFFER_BYTES
                ));
                None
            }
        };
        // `lean` by default, as `cutrace record` (BENCHMARKS.md: the state queries it leaves
        // out cost 5.6 % of an eager PyTorch op under tracing).
        let api_mode = match s.api {
            Some(m) => m,
            None if problems.iter().any(|p| p.var == var::API) => ApiMode::All,
            None => ApiMode::Lean,
        };
        let (distributed, rank_notes) =
            cutrace_trace::native::distributed_from_env(env, s.run_id.clone());
        notes.extend(rank_notes);
        Config {
            output_dir: s.output_dir.clone().unwrap_or_else(|| ".".into()),
            kinds,
            buffer_bytes,
            max_buffers: k.max_buffers.unwrap_or(24).clamp(2, 1024) as usize,
            prealloc_buffers: k.prealloc_buffers.unwrap_or(2).min(64) as usize,
            discard: s.discard,
            serialize_kernels: s.serialize_kernels,
            runtime_cbids: k.runtime_cbids.clone(),
            api_mode,
            device_buffer_bytes,
            record_cmdline: s.record_cmdline,
            // At most ten minutes: a program's exit must not hang on its trace for ever.
            exit_deadline_ms: k.exit_deadline_ms.unwrap_or(10_000).min(600_000),
            flush_period_ms: k.flush_period_ms.unwrap_or(1_000).max(10),
            notes,
            distributed,
            subscribe: k.subscribe,
            monitor_socket: s.monitor_socket.clone(),
            write_part: s.monitor_socket.is_none() || s.output_dir.is_some(),
            duty: s.monitor_duty.filter(|_| s.monitor_socket.is_some()),
            monitor_uid: s.monitor_uid,
            force_flush_after: std::time::Duration::from_millis(
                (s.monitor_stuck_after_s.unwrap_or(60).clamp(2, 86_400) * 1000) / 2,
            ),
            job: env("SLURM_JOB_ID").or_else(|| env("TORCHELASTIC_RUN_ID")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    /// The config of an environment of `vars` (the settings' variables and the rank ones).
    fn config(vars: &[(&str, &str)]) -> Config {
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let (s, problems) = Settings::from_env(&|k| get(k).map(OsString::from));
        Config::from_settings(&s, &problems, &get)
    }

    /// The part header's rank fields come from the launcher's environment (torchrun sets
    /// RANK, LOCAL_RANK, WORLD_SIZE; `cutrace record` sets the run id).
    #[test]
    fn ranks_and_run_id_reach_the_header_config() {
        assert_eq!(config(&[]).distributed, None);
        let c = config(&[("RANK", "1"), ("WORLD_SIZE", "2"), (var::RUN_ID, "abc")]);
        let d = c.distributed.unwrap();
        assert_eq!(
            (d.rank, d.local_rank, d.world_size, d.run_id.as_deref()),
            (Some(1), None, Some(2), Some("abc"))
        );
        let c = config(&[("LOCAL_RANK", "x")]);
        assert!(
            c.notes.iter().any(|n| n.contains("LOCAL_RANK")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let c = config(&[]);
        assert_eq!(c.kinds.len(), 8);
        assert_eq!(c.kinds[0], kind::CONCURRENT_KERNEL);
        assert_eq!(c.buffer_bytes, 8 << 20);
        assert!(!c.discard);
        assert_eq!(c.api_mode, ApiMode::Lean);
        assert_eq!(c.device_buffer_bytes, None);
        assert_eq!(c.output_dir, std::path::PathBuf::from("."));
        let c = config(&[(var::DEVICE_BUFFER_BYTES, "33554432")]);
        assert_eq!(c.device_buffer_bytes, Some(32 << 20));
        assert!(c.notes.is_empty());
        let c = config(&[(var::DEVICE_BUFFER_BYTES, "12")]);
        assert_eq!(c.device_buffer_bytes, None);
        assert!(
            c.notes[0].contains(var::DEVICE_BUFFER_BYTES),
            "{:?}",
            c.notes
        );
        let c = config(&[
            (var::KINDS, "kernel,bogus,runtime"),
            (var::SERIALIZE_KERNELS, "1"),
            (var::BUFFER_BYTES, "99999999999"),
        ]);
        assert_eq!(c.kinds, vec![kind::KERNEL, kind::RUNTIME]);
        assert_eq!(c.notes.len(), 2);
        // `memory` is allocations and frees with the pools they came from.
        let c = config(&[(var::KINDS, "memory,kernel")]);
        assert_eq!(
            c.kinds,
            vec![kind::MEMORY2, kind::MEMORY_POOL, kind::CONCURRENT_KERNEL]
        );
        assert_eq!(c.buffer_bytes, 8 << 20);
        assert_eq!(config(&[(var::API, "lean")]).api_mode, ApiMode::Lean);
        assert_eq!(
            config(&[(var::API, "launches")]).api_mode,
            ApiMode::Launches
        );
        let c = config(&[(var::API, "few")]);
        assert_eq!(c.api_mode, ApiMode::All);
        assert_eq!(
            c.notes,
            [format!(
                "{}=\"few\" is not one of all, lean, launches: recording all API calls",
                var::API
            )]
        );
        // A knob that does not parse is named, and its default kept.
        let c = config(&[(var::MAX_BUFFERS, "many")]);
        assert_eq!(c.max_buffers, 24);
        assert!(c.notes[0].contains(var::MAX_BUFFERS), "{:?}", c.notes);
    }

    /// Every kind the recorder offers is one the library can enable.
    #[test]
    fn every_kind_of_the_contract_is_known_here() {
        for (name, _) in cutrace_settings::KINDS {
            assert!(KIND_NAMES.iter().any(|(n, _)| n == name), "{name}");
        }
        assert_eq!(KIND_NAMES.len(), cutrace_settings::KINDS.len());
    }
}
