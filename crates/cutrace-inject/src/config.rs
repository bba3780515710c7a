//! The injection's settings, read once from the environment that `cutrace record` prepared.

use cutrace_cupti::activity::kind;

use crate::api_filter::ApiMode;

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
];

/// (docs/ARCHITECTURE.md). DRIVER is on because libraries (cuBLAS, Triton) launch kernels with
/// the driver API: without it those kernels are orphans. Runtime launches do not also produce a
/// driver record (checked on CUDA 13.0), so it costs no duplicate records.
pub const DEFAULT_KINDS: &str = "kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead";
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
}

/// Activity kinds from a comma-separated list of cutrace's names (`kernel,runtime,...`), in
/// order, without repeats; `kernel` means CONCURRENT_KERNEL, or the serializing KERNEL kind with
/// `serialize_kernels`. The second list holds the names that are not kinds.
pub fn parse_kinds(text: &str, serialize_kernels: bool) -> (Vec<u32>, Vec<String>) {
    let mut kinds = Vec::new();
    let mut unknown = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match KIND_NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, k)) => {
                let k = if k == kind::CONCURRENT_KERNEL && serialize_kernels {
                    kind::KERNEL
                } else {
                    k
                };
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            None => unknown.push(name.to_string()),
        }
    }
    (kinds, unknown)
}

impl Config {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Config {
        let mut notes = Vec::new();
        let serialize_kernels = env("CUTRACE_SERIALIZE_KERNELS").as_deref() == Some("1");
        let kinds_text = env("CUTRACE_KINDS").unwrap_or_else(|| DEFAULT_KINDS.into());
        let (kinds, unknown) = parse_kinds(&kinds_text, serialize_kernels);
        notes.extend(
            unknown
                .into_iter()
                .map(|name| format!("unknown activity kind '{name}' ignored")),
        );
        let buffer_bytes = match env("CUTRACE_BUFFER_BYTES").map(|s| s.parse::<usize>()) {
            None => DEFAULT_BUFFER_BYTES,
            Some(Ok(b)) if (MIN_BUFFER_BYTES..=MAX_BUFFER_BYTES).contains(&b) => b,
            Some(_) => {
                notes.push("CUTRACE_BUFFER_BYTES outside 1–10 MiB; using 8 MiB".into());
                DEFAULT_BUFFER_BYTES
            }
        };
        let num = |k: &str, d: u64| env(k).and_then(|s| s.parse::<u64>().ok()).unwrap_or(d);
        let runtime_cbids = env("CUTRACE_RUNTIME_CBIDS").map(|s| {
            s.split(',')
                .filter_map(|x| x.trim().parse::<u32>().ok())
                .collect::<Vec<_>>()
        });
        // `lean` by default, as `cutrace record` (BENCHMARKS.md: the state queries it leaves
        // out cost 5.6 % of an eager PyTorch op under tracing).
        let api_mode = match env("CUTRACE_API") {
            None => ApiMode::Lean,
            // An unknown value records every call, not the default: too many records rather
            // than a query someone wanted missing.
            Some(s) => ApiMode::parse(&s).unwrap_or_else(|| {
                notes.push(format!(
                    "unknown CUTRACE_API '{s}' (all, lean, launches); recording all API calls"
                ));
                ApiMode::All
            }),
        };
        let device_buffer_bytes = match env("CUTRACE_DEVICE_BUFFER_BYTES")
            .map(|s| s.parse::<usize>())
        {
            None => None,
            Some(Ok(b)) if (1 << 20..=1 << 30).contains(&b) => Some(b),
            Some(_) => {
                notes.push(
                    "CUTRACE_DEVICE_BUFFER_BYTES outside 1 MiB–1 GiB; CUPTI's default kept".into(),
                );
                None
            }
        };
        let (distributed, rank_notes) = cutrace_trace::native::distributed_from_env(env);
        notes.extend(rank_notes);
        Config {
            output_dir: env("CUTRACE_OUTPUT_DIR")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| ".".into())
                .into(),
            kinds,
            buffer_bytes,
            max_buffers: num("CUTRACE_MAX_BUFFERS", 24).clamp(2, 1024) as usize,
            prealloc_buffers: num("CUTRACE_PREALLOC_BUFFERS", 2).min(64) as usize,
            discard: env("CUTRACE_DISCARD").as_deref() == Some("1"),
            serialize_kernels,
            runtime_cbids,
            api_mode,
            device_buffer_bytes,
            record_cmdline: env("CUTRACE_RECORD_CMDLINE").as_deref() == Some("1"),
            exit_deadline_ms: num("CUTRACE_EXIT_DEADLINE_MS", 10_000),
            flush_period_ms: num("CUTRACE_FLUSH_PERIOD_MS", 1_000).max(10),
            notes,
            distributed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part header's rank fields come from the launcher's environment (torchrun sets
    /// RANK, LOCAL_RANK, WORLD_SIZE; `cutrace record` sets CUTRACE_RUN_ID).
    #[test]
    fn ranks_and_run_id_reach_the_header_config() {
        assert_eq!(Config::from_env(&|_| None).distributed, None);
        let c = Config::from_env(&|k| match k {
            "RANK" => Some("1".into()),
            "WORLD_SIZE" => Some("2".into()),
            "CUTRACE_RUN_ID" => Some("abc".into()),
            _ => None,
        });
        let d = c.distributed.unwrap();
        assert_eq!(
            (d.rank, d.local_rank, d.world_size, d.run_id.as_deref()),
            (Some(1), None, Some(2), Some("abc"))
        );
        let c = Config::from_env(&|k| (k == "LOCAL_RANK").then(|| "x".into()));
        assert!(
            c.notes.iter().any(|n| n.contains("LOCAL_RANK")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_env(&|_| None);
        assert_eq!(c.kinds.len(), 8);
        assert_eq!(c.kinds[0], kind::CONCURRENT_KERNEL);
        assert_eq!(c.buffer_bytes, 8 << 20);
        assert!(!c.discard);
        assert_eq!(c.api_mode, ApiMode::Lean);
        assert_eq!(c.device_buffer_bytes, None);
        let c =
            Config::from_env(&|k| (k == "CUTRACE_DEVICE_BUFFER_BYTES").then(|| "33554432".into()));
        assert_eq!(c.device_buffer_bytes, Some(32 << 20));
        assert!(c.notes.is_empty());
        let c = Config::from_env(&|k| (k == "CUTRACE_DEVICE_BUFFER_BYTES").then(|| "12".into()));
        assert_eq!(c.device_buffer_bytes, None);
        assert!(
            c.notes[0].contains("CUTRACE_DEVICE_BUFFER_BYTES"),
            "{:?}",
            c.notes
        );
        let c = Config::from_env(&|k| match k {
            "CUTRACE_KINDS" => Some("kernel,bogus,runtime".into()),
            "CUTRACE_SERIALIZE_KERNELS" => Some("1".into()),
            "CUTRACE_BUFFER_BYTES" => Some("99999999999".into()),
            _ => None,
        });
        assert_eq!(c.kinds, vec![kind::KERNEL, kind::RUNTIME]);
        assert_eq!(c.notes.len(), 2);
        assert_eq!(c.buffer_bytes, 8 << 20);
        let api = |v: &str| {
            let v = v.to_string();
            Config::from_env(&move |k| (k == "CUTRACE_API").then(|| v.clone()))
        };
        assert_eq!(api("lean").api_mode, ApiMode::Lean);
        assert_eq!(api("launches").api_mode, ApiMode::Launches);
        let c = api("few");
        assert_eq!(c.api_mode, ApiMode::All);
        assert!(c.notes[0].contains("CUTRACE_API 'few'"), "{:?}", c.notes);
    }
}
