//! The top-level members of a Kineto trace beside `traceEvents`: GPUs, versions, the
//! distributed job, and Kineto's own log lines (with its account of dropped records).
//!
//! All are read leniently: a member of an unexpected shape or type is counted (as an unread
//! value) and left unknown; none decides whether a trace reads.

use serde_json::Value;

use super::vocab::{device, dist, top};
use super::Sink;
use crate::model::{DeviceProps, Distributed, ProcessGroup, TraceNote};

const TOP: &str = "top-level";

/// A non-negative integer that fits `T`, written as a number or as a decimal string.
fn uint<T: TryFrom<u64>>(v: &Value) -> Option<T> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    T::try_from(n).ok()
}

/// A string, or a number's text.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The raw text of a value, for an unread-value note.
fn raw(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Reads `obj[key]` with `f`; a present, non-null value that does not read is counted.
fn field<T>(
    obj: &Value,
    key: &str,
    what: &str,
    sink: &mut Sink,
    f: impl Fn(&Value) -> Option<T>,
) -> Option<T> {
    let v = obj.get(key).filter(|v| !v.is_null())?;
    let out = f(v);
    if out.is_none() {
        sink.unread(what, key, &raw(v));
    }
    out
}

/// `deviceProperties`: one entry per GPU.
pub(super) fn devices(v: &Value, sink: &mut Sink) -> Vec<DeviceProps> {
    const W: &str = top::DEVICE_PROPERTIES;
    let Some(list) = v.as_array() else {
        sink.unread(TOP, W, &raw(v));
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in list {
        if !d.is_object() {
            sink.unread(TOP, W, &raw(d));
            continue;
        }
        out.push(DeviceProps {
            device: field(d, device::ID, W, sink, uint).unwrap_or(0),
            name: field(d, device::NAME, W, sink, text).unwrap_or_default(),
            compute_capability: field(d, device::COMPUTE_MAJOR, W, sink, uint).zip(field(
                d,
                device::COMPUTE_MINOR,
                W,
                sink,
                uint,
            )),
            sm_count: field(d, device::NUM_SMS, W, sink, uint),
            global_memory_bytes: field(d, device::TOTAL_GLOBAL_MEM, W, sink, uint),
            uuid: None,
        });
    }
    out
}

/// `cupti_version` or `cuda_driver_version`.
pub(super) fn version(v: &Value, key: &str, sink: &mut Sink) -> Option<u32> {
    if v.is_null() {
        return None;
    }
    let n = uint(v);
    if n.is_none() {
        sink.unread(TOP, key, &raw(v));
    }
    n
}

/// `distributedInfo`: `{"backend", "rank", "world_size", "pg_count", "pg_config": [{"pg_name",
/// "pg_desc", "backend_config", "pg_size", "ranks"}], "nccl_version"}` as torch 2.x writes it
/// (on-demand traces have written strings for the numbers).
pub(super) fn distributed(v: &Value, sink: &mut Sink) -> Option<Distributed> {
    const W: &str = top::DISTRIBUTED_INFO;
    if !v.is_object() {
        if !v.is_null() {
            sink.unread(TOP, W, &raw(v));
        }
        return None;
    }
    let groups = match v.get(dist::PG_CONFIG) {
        Some(Value::Array(list)) => list
            .iter()
            .map(|g| ProcessGroup {
                name: field(g, dist::PG_NAME, W, sink, text),
                desc: field(g, dist::PG_DESC, W, sink, text),
                backend_config: field(g, dist::BACKEND_CONFIG, W, sink, text),
                size: field(g, dist::PG_SIZE, W, sink, uint),
                ranks: field(g, dist::RANKS, W, sink, ranks).unwrap_or_default(),
            })
            .collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => {
            sink.unread(W, dist::PG_CONFIG, &raw(other));
            Vec::new()
        }
    };
    Some(Distributed {
        rank: field(v, dist::RANK, W, sink, uint),
        local_rank: None,
        world_size: field(v, dist::WORLD_SIZE, W, sink, uint),
        backend: field(v, dist::BACKEND, W, sink, text),
        run_id: None,
        nccl_version: field(v, dist::NCCL_VERSION, W, sink, text),
        process_groups: groups,
    })
}

/// `[0, 1]`, or the same list as a string (`"[0, 1]"`, as `record_param_comms` writes it).
fn ranks(v: &Value) -> Option<Vec<u32>> {
    match v {
        Value::Array(a) => a.iter().map(uint).collect(),
        Value::String(s) => {
            let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
            if inner.trim().is_empty() {
                return Some(Vec::new());
            }
            inner.split(',').map(|r| r.trim().parse().ok()).collect()
        }
        _ => None,
    }
}

/// What a JSON object whose first member is `first_key` is, when that member names another
/// tool's format, with the fix: said before its value is read, so a file that is no Kineto trace
/// is never refused for its size. rocprofiler-sdk's `rocprofv3 --output-format json` writes an
/// object whose one member is `rocprofiler-sdk-tool` (a list of its runs' metadata, agents and
/// records).
pub(super) fn other_format(first_key: &str) -> Option<String> {
    let what = match first_key {
        "rocprofiler-sdk-tool" => {
            "this is a rocprofiler-sdk JSON (rocprofv3 --output-format json), not a Kineto \
             trace; fix: give torch.profiler's trace of the program (PyTorch on ROCm writes \
             Kineto JSON: prof.export_chrome_trace(\"t.json\")), or open rocprofv3's \
             --output-format pftrace in ui.perfetto.dev"
        }
        _ => return None,
    };
    Some(what.to_owned())
}

/// Whether a top-level member is one a Kineto (or cutrace's Chrome) trace writes.
pub(super) fn is_kineto_member(key: &str) -> bool {
    top::TRACE_FIRST.contains(&key)
        || [
            top::CUPTI_VERSION,
            top::CUDA_DRIVER_VERSION,
            top::LOG_INFO,
            top::LOG_WARNING,
            top::LOG_ERROR,
            top::CUTRACE,
        ]
        .contains(&key)
}

/// The refusal of a JSON object whose member `key`, before any `traceEvents`, is over the
/// event-bytes limit (`limit` bytes): a Kineto trace's members beside its events are small, so
/// this is most likely another kind of JSON.
pub(super) fn no_events_before(key: &str, limit: u64) -> String {
    let key: String = key.chars().take(64).collect();
    format!(
        "this JSON object is not a Kineto trace: no \"traceEvents\" came before its member \
         {key:?}, which is over the {} MiB event limit (a Kineto trace's other top-level \
         members are small); fix: give torch.profiler's export_chrome_trace output (if this \
         is a trace whose events come after such a member, raise --limit event-bytes)",
        limit >> 20
    )
}

/// Most log lines of one level kept as notes (Kineto can log one per event in bad cases).
const LOG_LINES: usize = 20;

/// Kineto's `"INFO"`, `"WARNING"` and `"ERROR"` members: its log lines for this capture. The
/// `Record counts: …` line is its account of what it dropped; warnings and errors become notes.
pub(super) fn log_lines(v: &Value, level: &str, sink: &mut Sink) {
    let lines: Vec<&str> = match v {
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        Value::String(s) => vec![s.as_str()],
        _ => Vec::new(),
    };
    let mut kept = 0;
    for line in &lines {
        if let Some(counts) = record_counts(line) {
            sink.trace.meta.source_drops = counts;
            continue;
        }
        if level == top::LOG_INFO {
            continue;
        }
        kept += 1;
        if kept <= LOG_LINES {
            sink.trace.meta.notes.push(TraceNote {
                pid: None,
                part: Some(sink.path.display().to_string()),
                text: format!("Kineto {level}: {line}"),
            });
        }
    }
    if kept > LOG_LINES {
        sink.trace.meta.notes.push(TraceNote {
            pid: None,
            part: Some(sink.path.display().to_string()),
            text: format!(
                "Kineto wrote {} more {level} lines (not shown)",
                kept - LOG_LINES
            ),
        });
    }
}

/// `Record counts: Out-of-range = 4181, Blocklisted runtime = 0, …` as (name, count) pairs;
/// `None` for any other line. Parts that are not `name = integer` are left out.
pub(super) fn record_counts(line: &str) -> Option<Vec<(String, u64)>> {
    let rest = line.trim().strip_prefix("Record counts:")?;
    Some(
        rest.split(',')
            .filter_map(|part| {
                let (name, n) = part.split_once('=')?;
                Some((name.trim().to_owned(), n.trim().parse().ok()?))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinetos_record_counts_line_is_read() {
        let c = record_counts(
            "Record counts: Out-of-range = 4181, Blocklisted runtime = 0, Invalid ext \
             correlations = 2, CPU GPU out-of-order = 0, CUPTI stopped early? = 0",
        )
        .unwrap();
        assert_eq!(c.len(), 5);
        assert_eq!(c[0], ("Out-of-range".to_owned(), 4181));
        assert_eq!(c[2], ("Invalid ext correlations".to_owned(), 2));
        assert_eq!(c[4], ("CUPTI stopped early?".to_owned(), 0));
        assert!(record_counts("Tracing to temporary file x").is_none());
    }

    #[test]
    fn group_ranks_read_as_a_list_or_its_text() {
        assert_eq!(ranks(&serde_json::json!([0, 1])), Some(vec![0, 1]));
        assert_eq!(ranks(&serde_json::json!("[0, 1, 2]")), Some(vec![0, 1, 2]));
        assert_eq!(ranks(&serde_json::json!("[]")), Some(vec![]));
        assert_eq!(ranks(&serde_json::json!("[0, x]")), None);
        assert_eq!(ranks(&serde_json::json!({"a": 1})), None);
    }
}
