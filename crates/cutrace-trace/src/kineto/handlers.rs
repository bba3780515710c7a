//! What one event of `traceEvents` becomes: [`Sink::event`] reads its phase and category (the
//! scanner, `scan.rs`, has cut it out and found its fields) and hands it to the handler of its
//! category, one function each: kernels, copies, memsets, runtime and driver calls,
//! synchronizations, annotation ranges (host and GPU), NVTX marks, CUPTI overhead and the
//! allocator's `[memory]` events, host ops (`cpu_op`, `python_function`, the old `Operator`); a
//! `record_param_comms` op also goes to `comms.rs`. Every other event is counted by its label in
//! `skipped_events`.

use std::borrow::Cow;

use super::args::{lenient_int, lenient_uint, raw_u64, unquote_b};
use super::scan::{self, Event};
use super::sink::Sink;
use super::vocab::{self, arg, cat as c, MEMORY};
use crate::error::TraceError;
use crate::model::*;
use crate::timeparse::parse_us_exact;

impl Sink {
    /// Reads one event into the trace, or counts it as skipped.
    pub(super) fn event<'a>(&mut self, ev: &Event<'a>, at: u64) -> Result<(), TraceError> {
        let cat_text = self.text(ev.cat, "event", "cat");
        // A modelled category in any ASCII case ("Kernel") is read as its lowercase spelling;
        // any other keeps its own, for the skipped count.
        let cat = scan::modelled(cat_text.as_ref()).unwrap_or(cat_text.as_ref());
        if !ev.ph.is_some_and(|p| p.bytes_eq("X")) {
            return self.not_complete(ev, cat, at);
        }
        // A collective's annotation is also an op of its thread, read below.
        if cat == c::CPU_OP && ev.name.is_some_and(|n| n.bytes_eq(vocab::PARAM_COMMS)) {
            self.param_comms(ev, at);
        }
        let modelled = scan::MODELLED.contains(&cat);
        if modelled {
            // Older Kineto wrote negative durations (pytorch/kineto#646): such an event is
            // counted and left out, and the rest of the trace is read.
            if ev
                .dur
                .is_some_and(|d| unquote_b(d).trim_ascii_start().starts_with(b"-"))
            {
                self.skip(&format!("{cat} with negative dur"));
                return Ok(());
            }
            // A pid past 32 bits would wrap onto another process or GPU.
            if raw_u64(ev.pid).is_some_and(|p| p > u64::from(u32::MAX)) {
                self.skip(&format!("{cat} with pid over 32 bits"));
                return Ok(());
            }
        }
        // Names are decoded (and UTF-8 checked) only for events that are kept.
        if let (Some(raw), true) = (ev.odd_name, modelled) {
            self.unread(cat, "name", raw);
        }
        let name_text = if modelled {
            self.text(ev.name, cat, "name")
        } else {
            Cow::Borrowed("")
        };
        self.check_string(&name_text, "name", at)?;
        let name = name_text.as_ref();
        match cat {
            c::KERNEL => self.kernel(ev, at, name),
            c::GPU_MEMCPY => self.memcpy(ev, at, name),
            c::GPU_MEMSET => self.memset(ev, at),
            c::CUDA_RUNTIME | c::CUDA_DRIVER => {
                self.api_call(ev, at, cat, name);
                Ok(())
            }
            c::CUDA_SYNC => {
                self.sync(ev, at, name);
                Ok(())
            }
            c::USER_ANNOTATION | c::GPU_USER_ANNOTATION => self.range(ev, at, cat, name),
            c::OVERHEAD => {
                self.overhead(ev, at, name);
                Ok(())
            }
            c::CPU_OP | c::PYTHON_FUNCTION | c::OPERATOR => self.host_op(ev, at, cat, name),
            other => {
                self.skip(if other.is_empty() { "(no cat)" } else { other });
                Ok(())
            }
        }
    }

    /// An event whose `ph` is not `X`: an NVTX mark (`i` in `user_annotation`, as `cutrace
    /// convert --chrome` writes one), else skipped, labelled by its phase (the scanner stops
    /// reading such events after `ph`). An event skipped on its category before its `ph` was
    /// read (keys in another order) is labelled by its category.
    fn not_complete(&mut self, ev: &Event<'_>, cat: &str, at: u64) -> Result<(), TraceError> {
        let instant = ev.ph.is_some_and(|p| p.bytes_eq("i"));
        // torch 1.8 wrote `[memory]` events without a `cat`.
        let memory_cat = cat == c::CPU_INSTANT_EVENT || ev.cat.is_none();
        if instant && memory_cat && ev.name.is_some_and(|n| n.bytes_eq(MEMORY)) {
            self.memory(ev);
            return Ok(());
        }
        if instant && cat == c::USER_ANNOTATION {
            if let Some(raw) = ev.odd_name {
                self.unread(cat, "name", raw);
            }
            let name = self.text(ev.name, cat, "name");
            return self.mark(ev, name.as_ref(), at);
        }
        let label = match ev.ph {
            None if !cat.is_empty() => cat.to_owned(),
            None => "(no ph)".to_owned(),
            Some(_) => format!("ph={}", self.text(ev.ph, "event", "ph")),
        };
        self.skip(&label);
        Ok(())
    }

    fn kernel(&mut self, ev: &Event<'_>, at: u64, name: &str) -> Result<(), TraceError> {
        // A kernel's device and times are what every number is computed from: they must read,
        // or the trace is refused at this event.
        let Some(g) = self.gpu_event(ev, at, c::KERNEL, true)? else {
            return Ok(());
        };
        // `cutrace convert --chrome` writes the demangled name and keeps CUPTI's in "mangled":
        // the model holds the name as CUPTI reported it.
        let mangled = ev
            .args
            .and_then(|a| a.mangled)
            .map(|m| self.text(Some(m), c::KERNEL, arg::MANGLED));
        if let Some(m) = &mangled {
            self.check_string(m, "mangled name", at)?;
        }
        let full = mangled.as_deref().unwrap_or(name);
        let name = self.strings.intern(full);
        if crate::comm::is_comm_kernel(full) {
            self.comm_kernel(ev, &g);
        }
        let launch = self.launches.intern(Launch {
            grid: g.args.grid.unwrap_or_default(),
            block: g.args.block.unwrap_or_default(),
            registers_per_thread: g.args.registers.unwrap_or(0),
            // Kineto writes a single "shared memory" figure; keep it as static.
            static_shared_bytes: g.args.shared_memory.unwrap_or(0),
            dynamic_shared_bytes: 0,
            graph_id: g.args.graph_id.unwrap_or(0),
        });
        self.trace.kernels.push(Kernel {
            device: g.device,
            context: g.context,
            stream: g.stream,
            correlation_id: g.correlation_id,
            start_ns: g.start,
            end_ns: g.end,
            name,
            launch,
        });
        Ok(())
    }

    fn memcpy(&mut self, ev: &Event<'_>, at: u64, name: &str) -> Result<(), TraceError> {
        let Some(g) = self.gpu_event(ev, at, c::GPU_MEMCPY, false)? else {
            return Ok(());
        };
        self.trace.memcpys.push(Memcpy {
            kind: vocab::copy_kind(name),
            bytes: g.args.bytes.unwrap_or(0),
            device: g.device,
            context: g.context,
            stream: g.stream,
            correlation_id: g.correlation_id,
            start_ns: g.start,
            end_ns: g.end,
        });
        Ok(())
    }

    fn memset(&mut self, ev: &Event<'_>, at: u64) -> Result<(), TraceError> {
        let Some(g) = self.gpu_event(ev, at, c::GPU_MEMSET, false)? else {
            return Ok(());
        };
        self.trace.memsets.push(Memset {
            bytes: g.args.bytes.unwrap_or(0),
            value: 0,
            device: g.device,
            context: g.context,
            stream: g.stream,
            correlation_id: g.correlation_id,
            start_ns: g.start,
            end_ns: g.end,
        });
        Ok(())
    }

    /// A runtime or driver call (`cat` says which).
    fn api_call(&mut self, ev: &Event<'_>, at: u64, cat: &str, name: &str) {
        let Some((start, end)) = self.soft_interval(ev, at, cat) else {
            return;
        };
        let a = self.args(ev, cat);
        let name = self.strings.intern(name);
        self.trace.api_calls.push(ApiCall {
            kind: if cat == c::CUDA_RUNTIME {
                ApiKind::Runtime
            } else {
                ApiKind::Driver
            },
            name,
            cbid: ApiCall::cbid_of(a.cbid.unwrap_or(0).into()),
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            correlation_id: a.correlation.unwrap_or(0),
            start_ns: start,
            end_ns: end,
            return_value: 0,
        });
    }

    fn sync(&mut self, ev: &Event<'_>, at: u64, name: &str) {
        let cat = c::CUDA_SYNC;
        let Some((start, end)) = self.soft_interval(ev, at, cat) else {
            return;
        };
        let a = self.args(ev, cat);
        // Kineto names the kind in `name` and, since 2024, in args "cuda_sync_kind".
        let kind = vocab::sync_kind(name);
        self.trace.syncs.push(Synchronization {
            kind,
            device: a
                .device
                .or_else(|| raw_u64(ev.pid).map(|v| v as u32))
                .unwrap_or(0),
            context: a.context.unwrap_or(0),
            // A device-wide synchronize has "stream": -1 (read as none).
            stream: a.stream.filter(|_| kind != SyncKind::ContextSynchronize),
            correlation_id: a.correlation.unwrap_or(0),
            start_ns: start,
            end_ns: end,
            wait_on_stream: a.wait_on_stream,
            // Correlation id 0 is none, as everywhere in the trace.
            event_record_correlation: a.wait_on_event_record.filter(|&c| c != 0),
        });
    }

    /// A host range (`user_annotation`: torch's `record_function`, or NVTX in cutrace's
    /// exports) or a GPU one (`gpu_user_annotation`).
    fn range(&mut self, ev: &Event<'_>, at: u64, cat: &str, name: &str) -> Result<(), TraceError> {
        let Some((start, end)) = self.soft_interval(ev, at, cat) else {
            return Ok(());
        };
        let name = self.strings.intern(name);
        let gpu = cat == c::GPU_USER_ANNOTATION;
        // A GPU range's device and stream: its args where given as integers (cutrace's export
        // writes them: its row may not be the stream's), else its pid and tid, as torch writes.
        // Nothing else in these args is read, so nothing there can fail.
        let num = |v: Option<&[u8]>| v.and_then(|r| lenient_uint::<u64>(r).ok().flatten());
        let (a_device, a_stream) = match (&ev.args, gpu) {
            (Some(a), true) => (num(a.device), num(a.stream)),
            _ => (None, None),
        };
        let nvtx_domain = self.nvtx_domain(ev, at, cat)?;
        self.trace.ranges.push(NvtxRange {
            domain: if gpu {
                RangeDomain::Gpu
            } else {
                RangeDomain::Host
            },
            name,
            process: if gpu {
                0
            } else {
                raw_u64(ev.pid).unwrap_or(0) as u32
            },
            thread: if gpu { 0 } else { raw_u64(ev.tid).unwrap_or(0) },
            device: if gpu {
                a_device.or(raw_u64(ev.pid)).map(|v| v as u32)
            } else {
                None
            },
            stream: if gpu {
                a_stream.or(raw_u64(ev.tid))
            } else {
                None
            },
            start_ns: start,
            end_ns: end,
            // Kineto's JSON does not carry the NVTX domain; cutrace's export does.
            nvtx_domain,
        });
        Ok(())
    }

    /// A host op (`cpu_op`, `python_function`, or the `Operator` of 2020–2021 traces). A step
    /// annotation filed as an op (`ProfilerStep#N`: torch 1.8 wrote it as an `Operator`) is read
    /// as the host range torch writes today (`user_annotation`), so steps are found in old
    /// traces as in new ones.
    fn host_op(
        &mut self,
        ev: &Event<'_>,
        at: u64,
        cat: &str,
        name: &str,
    ) -> Result<(), TraceError> {
        if cat != c::PYTHON_FUNCTION && name.starts_with(vocab::PROFILER_STEP) {
            return self.range(ev, at, c::USER_ANNOTATION, name);
        }
        let Some((start, end)) = self.soft_interval(ev, at, cat) else {
            return Ok(());
        };
        // The id links the op to the calls it made; one that does not read is counted and 0.
        let external_id = match ev.args.and_then(|a| a.external_id) {
            Some(raw) => match lenient_uint::<u64>(raw) {
                Ok(Some(v)) => v,
                _ => {
                    self.unread(cat, arg::EXTERNAL_ID, raw);
                    0
                }
            },
            None => 0,
        };
        let name = self.strings.intern(name);
        self.trace.host_ops.push(HostOp {
            kind: if cat == c::PYTHON_FUNCTION {
                HostOpKind::PythonFunction
            } else {
                HostOpKind::CpuOp
            },
            name,
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            start_ns: start,
            end_ns: end,
            external_id,
        });
        Ok(())
    }

    /// An instant event's time in whole ns (rounded and counted like an interval's), or
    /// `None`, counted under `label`, when it does not read.
    fn instant_ts(&mut self, ev: &Event<'_>, label: &str) -> Option<Ns> {
        let ts_ns = ev.ts.and_then(|ts| {
            let exact = parse_us_exact(unquote_b(ts)).ok()?;
            let ns = exact.round_ns().ok()?;
            Some((ns, exact.is_whole()))
        });
        let Some((ts_ns, whole)) = ts_ns else {
            self.skip(label);
            return None;
        };
        self.rounded += u64::from(!whole);
        Some(ts_ns)
    }

    /// torch.profiler's `[memory]` event: one allocation (`Bytes` > 0) or free (< 0) by the
    /// framework's allocator. Its time and place must read or it is counted and left out; a
    /// size or total that does not read is left unknown and counted (the analysis counts such
    /// events rather than guessing).
    fn memory(&mut self, ev: &Event<'_>) {
        let label = c::CPU_INSTANT_EVENT;
        if raw_u64(ev.pid).is_some_and(|p| p > u64::from(u32::MAX)) {
            self.skip("[memory] with pid over 32 bits");
            return;
        }
        let Some(ts_ns) = self.instant_ts(ev, "[memory] with unreadable ts") else {
            return;
        };
        let m = ev.args.map(|a| a.mem).unwrap_or_default();
        let place = match m.device_type.map(lenient_int) {
            Some(Some(0)) => MemoryPlace::Cpu,
            Some(Some(1)) => MemoryPlace::Gpu,
            Some(Some(n)) if (0..=255).contains(&n) => MemoryPlace::Other(n as u8),
            _ => {
                self.skip("[memory] with unreadable Device Type");
                return;
            }
        };
        // torch writes -1 for the CPU: a CPU has no device index, so it is device 0.
        let device = match m.device_id.map(lenient_int) {
            Some(Some(-1)) if place == MemoryPlace::Cpu => 0,
            Some(Some(n)) if (0..=i64::from(u32::MAX)).contains(&n) => n as u32,
            None if place == MemoryPlace::Cpu => 0,
            _ => {
                self.skip("[memory] with unreadable Device Id");
                return;
            }
        };
        let bytes = m.bytes.map(|r| (lenient_int(r), r));
        let (op, bytes) = match bytes {
            Some((Some(b), _)) if b < 0 => (MemoryOp::Free, Some(b.unsigned_abs())),
            Some((Some(b), _)) => (MemoryOp::Alloc, Some(b as u64)),
            Some((None, raw)) => {
                self.unread(label, arg::MEM_BYTES, raw);
                (MemoryOp::Unknown, None)
            }
            None => (MemoryOp::Unknown, None),
        };
        let mut total = |v: Option<&[u8]>, key: &str| -> Option<u64> {
            let r = v?;
            let n = lenient_int(r).and_then(|n| u64::try_from(n).ok());
            if n.is_none() {
                self.unread(label, key, r);
            }
            n
        };
        let total_allocated = total(m.total_allocated, arg::TOTAL_ALLOCATED);
        let total_reserved = total(m.total_reserved, arg::TOTAL_RESERVED);
        let address = match m.addr.map(|r| (lenient_uint::<u64>(r), r)) {
            Some((Ok(Some(a)), _)) => Some(a),
            Some((_, raw)) => {
                self.unread(label, arg::ADDR, raw);
                None
            }
            None => None,
        };
        self.trace.memory.push(MemoryEvent {
            ts_ns,
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            place,
            device,
            level: match m.level.map(unquote_b) {
                Some(l) if l == arg::DRIVER_LEVEL.as_bytes() => MemoryLevel::Driver,
                _ => MemoryLevel::Framework,
            },
            op,
            address,
            bytes,
            total_allocated,
            total_reserved,
            // cutrace's export writes the call's; torch's events have none.
            correlation_id: ev.args.and_then(|a| raw_u64(a.correlation)).unwrap_or(0),
        });
    }

    fn mark(&mut self, ev: &Event<'_>, name: &str, at: u64) -> Result<(), TraceError> {
        // A mark's time is not what any number is computed from: one that does not read is
        // counted and the mark left out.
        let Some(ts_ns) = self.instant_ts(ev, "user_annotation mark with unreadable ts") else {
            return Ok(());
        };
        let name = self.strings.intern(name);
        let nvtx_domain = self.nvtx_domain(ev, at, c::USER_ANNOTATION)?;
        self.trace.marks.push(NvtxMark {
            name,
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            ts_ns,
            nvtx_domain,
        });
        Ok(())
    }

    fn overhead(&mut self, ev: &Event<'_>, at: u64, name: &str) {
        let Some((start, end)) = self.soft_interval(ev, at, c::OVERHEAD) else {
            return;
        };
        let kind = self.strings.intern(name);
        self.trace.overheads.push(Overhead {
            kind,
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            start_ns: start,
            end_ns: end,
        });
    }
}
