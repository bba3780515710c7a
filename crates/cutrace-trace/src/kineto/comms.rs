//! torch's collective annotations (`record_param_comms`) and their join to NCCL kernels.
//!
//! torch records each collective call as a `record_param_comms` CPU op whose args name the
//! collective, its process group, group size, message sizes and element type. Kineto links every
//! GPU event to the CPU op that launched it through `"External id"`, and (pytorch/kineto's
//! `output_json.cpp`) newer versions copy the same args onto the kernels that op launched. A
//! communication kernel ([`crate::comm::is_comm_kernel`]) takes its annotation from its own args,
//! else from the op with its External id, else from the op that encloses its launch on the same
//! thread. Every value is read leniently: one that does not read is counted and left unknown.

use super::scan::{CommArgs, Event};
use super::vocab::{self, arg};
use super::{lenient_uint, raw_u64, GpuEvent, Sink};
use crate::model::{Collective, Interner, Ns, Trace};

/// A collective's annotation, owned (kept until the end of the import, then interned).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct CommFields {
    name: Option<String>,
    group_name: Option<String>,
    group_desc: Option<String>,
    group_size: Option<u32>,
    seq: Option<u64>,
    in_nelems: Option<u64>,
    out_nelems: Option<u64>,
    dtype: Option<String>,
}

/// A `record_param_comms` CPU op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CommOp {
    external_id: Option<u64>,
    process: Option<u64>,
    thread: Option<u64>,
    start: Ns,
    end: Ns,
    fields: CommFields,
}

/// A communication kernel, with what links it to its op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CommKernel {
    correlation_id: u64,
    device: u32,
    start: Ns,
    external_id: Option<u64>,
    /// The annotation copied onto the kernel itself, when it has one.
    own: Option<CommFields>,
}

impl Sink {
    /// Reads a `record_param_comms` op. Its times only place it around its launches: ones that
    /// do not read leave it out, counted.
    pub(super) fn param_comms(&mut self, ev: &Event<'_>, at: u64) {
        let Some((start, end)) = self.soft_interval(ev, at, vocab::PARAM_COMMS) else {
            return;
        };
        let a = ev.args.unwrap_or_default();
        let fields = self.comm_fields(&a.comm);
        let external_id = self.id(a.external_id, vocab::PARAM_COMMS, arg::EXTERNAL_ID);
        self.comm_ops.push(CommOp {
            external_id,
            process: raw_u64(ev.pid),
            thread: raw_u64(ev.tid),
            start,
            end,
            fields,
        });
    }

    /// Notes a communication kernel for the join at the end.
    pub(super) fn comm_kernel(&mut self, ev: &Event<'_>, g: &GpuEvent) {
        let a = ev.args.unwrap_or_default();
        let own = a.comm.name.is_some().then(|| self.comm_fields(&a.comm));
        let external_id = self.id(a.external_id, vocab::cat::KERNEL, arg::EXTERNAL_ID);
        self.comm_kernels.push(CommKernel {
            correlation_id: g.correlation_id,
            device: g.device,
            start: g.start,
            external_id,
            own,
        });
    }

    fn id(&mut self, raw: Option<&[u8]>, cat: &str, key: &str) -> Option<u64> {
        let r = raw?;
        match lenient_uint(r) {
            Ok(v) => v,
            Err(()) => {
                self.unread(cat, key, r);
                None
            }
        }
    }

    fn comm_fields(&mut self, c: &CommArgs<'_>) -> CommFields {
        const CAT: &str = vocab::PARAM_COMMS;
        let mut text = |raw: Option<&[u8]>, key: &str| -> Option<String> {
            let r = raw?;
            let t = comm_text(r);
            if t.is_none() && r != b"null" {
                self.unread(CAT, key, r);
            }
            t
        };
        let name = text(c.name, arg::COLLECTIVE_NAME);
        let group_name = text(c.group_name, arg::GROUP_NAME);
        let group_desc = text(c.group_desc, arg::GROUP_DESC);
        let dtype = text(c.dtype, arg::DTYPE);
        let group_size = self.id(c.group_size, CAT, arg::GROUP_SIZE);
        let group_size = group_size.and_then(|n| u32::try_from(n).ok());
        CommFields {
            name,
            group_name,
            group_desc,
            group_size,
            seq: self.id(c.seq, CAT, arg::SEQ),
            in_nelems: self.id(c.in_nelems, CAT, arg::IN_NELEMS),
            out_nelems: self.id(c.out_nelems, CAT, arg::OUT_NELEMS),
            dtype,
        }
    }
}

/// A string value's text, or a number's as written (torch has written process group names both
/// ways); `None` for anything else.
fn comm_text(r: &[u8]) -> Option<String> {
    if r.starts_with(b"\"") {
        return serde_json::from_slice::<String>(r).ok();
    }
    if r.first().is_some_and(|c| c.is_ascii_digit() || *c == b'-') {
        return std::str::from_utf8(r).ok().map(str::to_owned);
    }
    None
}

/// Joins each communication kernel to its annotation and fills `trace.collectives` (ordered by
/// kernel start, then correlation id). Returns how many ops joined no kernel.
pub(super) fn join(
    trace: &mut Trace,
    strings: &mut Interner,
    ops: &[CommOp],
    kernels: &[CommKernel],
) -> u64 {
    use std::collections::HashMap;
    let mut by_ext: HashMap<u64, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(e) = op.external_id {
            by_ext.entry(e).or_insert(i);
        }
    }
    // The launch calls of kernels their External id does not place (none, or one naming
    // another op), by correlation id: one pass over the API calls, keeping only those.
    let unplaced: std::collections::HashSet<u64> = kernels
        .iter()
        .filter(|k| k.external_id.is_none_or(|e| !by_ext.contains_key(&e)))
        .map(|k| k.correlation_id)
        .collect();
    let launches: HashMap<u64, (u32, u64, Ns)> = if unplaced.is_empty() {
        HashMap::new()
    } else {
        trace
            .api_calls
            .iter()
            .filter(|a| unplaced.contains(&a.correlation_id))
            .map(|a| (a.correlation_id, (a.process, a.thread, a.start_ns)))
            .collect()
    };
    // Ops by thread, in start order, for the launch lookup (only when some launch is needed).
    let mut by_thread: HashMap<(Option<u64>, Option<u64>), Vec<usize>> = HashMap::new();
    if !launches.is_empty() {
        for (i, o) in ops.iter().enumerate() {
            by_thread.entry((o.process, o.thread)).or_default().push(i);
        }
        for v in by_thread.values_mut() {
            v.sort_by_key(|&i| ops[i].start);
        }
    }
    // The op around a kernel's launch on its thread: the last one to start at or before the
    // launch, if it has not ended by then (torch does not nest record_param_comms ops).
    let enclosing = |k: &CommKernel| -> Option<usize> {
        let &(process, thread, at) = launches.get(&k.correlation_id)?;
        let v = by_thread.get(&(Some(u64::from(process)), Some(thread)))?;
        let before = v.partition_point(|&i| ops[i].start <= at);
        let i = v[..before].last().copied()?;
        (ops[i].end >= at).then_some(i)
    };
    let mut joined = vec![false; ops.len()];
    let mut out: Vec<(Ns, Collective)> = Vec::new();
    for k in kernels {
        let op = k
            .external_id
            .and_then(|e| by_ext.get(&e).copied())
            .or_else(|| enclosing(k));
        if let Some(i) = op {
            joined[i] = true;
        }
        let Some(f) = k.own.as_ref().or(op.map(|i| &ops[i].fields)) else {
            continue;
        };
        let mut intern = |s: &Option<String>| s.as_deref().map(|s| strings.intern(s));
        let Some(name) = intern(&f.name) else {
            continue;
        };
        out.push((
            k.start,
            Collective {
                correlation_id: k.correlation_id,
                device: k.device,
                name,
                group_name: intern(&f.group_name),
                group_desc: intern(&f.group_desc),
                group_size: f.group_size,
                seq: f.seq,
                in_nelems: f.in_nelems,
                out_nelems: f.out_nelems,
                dtype: intern(&f.dtype),
            },
        ));
    }
    out.sort_by_key(|(start, c)| (*start, c.correlation_id));
    trace.collectives = out.into_iter().map(|(_, c)| c).collect();
    joined.iter().filter(|j| !**j).count() as u64
}
