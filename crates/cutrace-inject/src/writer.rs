//! The writer thread: takes completed buffers, decodes them into the native format, appends
//! chunks to this process's part file, zeroes the buffers and returns them to the pool. It also
//! asks CUPTI for completed buffers periodically, so a long run streams to disk. Notes that
//! arrive after the header was written go into `META` chunks.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cutrace_cupti::activity::{self, kind, Activity, MAX_RECORD_PREFIX};
use cutrace_cupti::api::{CB_DOMAIN_DRIVER_API, CB_DOMAIN_RUNTIME_API};
use cutrace_trace::native::{self, ClockRef, Header, Meta, Tail, Writer};

use crate::decode::Decoder;
use crate::monitor::Monitor;
use crate::{Done, Global, LIFECYCLE};

/// Rows after which the writer writes chunks even before the flush period has passed.
const ROWS_PER_FLUSH: usize = 262_144;

pub(crate) fn run(g: &'static Global, kinds: Vec<u32>) {
    let r = catch_unwind(AssertUnwindSafe(|| run_inner(g, &kinds)));
    if r.is_err() {
        eprintln!(
            "cutrace: pid {}: the trace writer stopped on an internal error (a bug in cutrace); \
             the trace is incomplete",
            std::process::id()
        );
    }
    if let Ok(mut d) = g.writer_done.lock() {
        *d = true;
    }
    g.writer_done_cv.notify_all();
}

struct Out {
    w: Writer<File>,
    path: PathBuf,
    /// How many of `Global::notes` are in the file already.
    notes_written: usize,
    /// The counter metrics' string ids in this file, in `CounterConfig::metrics` order.
    metric_ids: Option<Vec<cutrace_trace::StrId>>,
    /// `Counters::info`'s version last written to a META chunk.
    counters_written: u64,
    /// The PM metrics' string ids in this file, in `SampleConfig::metrics` order.
    pm_metric_ids: Option<Vec<cutrace_trace::StrId>>,
    /// `Sampling::info`'s version last written to a META chunk.
    pm_written: u64,
    /// `PcSampling::names` as string ids in this file, by index.
    pc_names: Vec<cutrace_trace::StrId>,
    /// `PcSampling::info`'s version last written to a META chunk.
    pc_written: u64,
}

/// Hands the PC sampling rows queued by the decode thread to the writer, and, with `meta`,
/// writes the PC sampling facts (META `pc_sampling`) if they changed since the last time.
fn write_pc_samples(o: &mut Out, meta: bool) -> std::io::Result<()> {
    let Some(s) = crate::pc_sampling::get() else {
        return Ok(());
    };
    let rows = s.take_rows();
    if !rows.is_empty() {
        match s.names.lock() {
            Ok(names) => {
                for n in names.since(o.pc_names.len()) {
                    let id = o.w.intern(n);
                    o.pc_names.push(id);
                }
            }
            Err(_) => {
                let n = rows.len() as u64;
                s.info.update(|i| i.rows_dropped_queue += n);
                return Ok(());
            }
        }
        let pid = std::process::id();
        let name = |i: u32| o.pc_names.get(i as usize).copied();
        let mut samples = Vec::with_capacity(rows.len());
        let mut unnamed = 0u64;
        for r in rows {
            let (Some(function), Some(stall_reason)) = (name(r.function), name(r.reason)) else {
                unnamed += 1;
                continue;
            };
            samples.push(cutrace_trace::PcSample {
                device: r.device,
                process: pid,
                correlation_id: 0,
                function,
                function_index: r.function_index,
                pc_offset: r.pc_offset,
                cubin_crc: r.cubin_crc,
                stall_reason,
                samples: r.samples,
                source_file: r.file.and_then(name),
                source_line: r.line,
            });
        }
        for p in &samples {
            o.w.push_pc_sample(p);
        }
        if unnamed > 0 {
            s.info.update(|i| i.rows_dropped_queue += unnamed);
        }
    }
    let version = s.info.version();
    if meta && version != o.pc_written {
        o.w.flush()?;
        o.w.write_meta(&Meta {
            pc_sampling: Some(s.info.get()),
            ..Meta::default()
        })?;
        o.pc_written = version;
    }
    Ok(())
}

/// Hands the PM samples queued by the decode thread to the writer, and, with `meta`, writes the
/// sampling facts (META `pm_sampling`) if they changed since the last time.
fn write_samples(o: &mut Out, meta: bool) -> std::io::Result<()> {
    let Some(s) = crate::sampling::get() else {
        return Ok(());
    };
    let values = s.take_values();
    if !values.is_empty() {
        let ids = o
            .pm_metric_ids
            .get_or_insert_with(|| s.config.metrics.iter().map(|m| o.w.intern(m)).collect());
        let pid = std::process::id();
        for v in values {
            let Some(&metric) = ids.get(v.metric) else {
                continue;
            };
            o.w.push_pm_sample(&cutrace_trace::PmSample {
                start_ns: v.start_ns,
                end_ns: v.end_ns,
                device: v.device,
                process: pid,
                metric,
                value: v.value,
            });
        }
    }
    let version = s.info.version();
    if meta && version != o.pm_written {
        o.w.flush()?;
        o.w.write_meta(&Meta {
            pm_sampling: Some(s.info.get()),
            ..Meta::default()
        })?;
        o.pm_written = version;
    }
    Ok(())
}

/// Writes the counter-data images kept for `Knobs::counters_keep_images` beside the part.
fn write_counter_images(o: &Out) {
    let Some(c) = crate::counters::get() else {
        return;
    };
    if c.config.timing {
        let i = c.info.get();
        eprintln!(
            "cutrace: pid {}: counters timing over {} kernels: {}",
            std::process::id(),
            i.kernels_profiled,
            c.timing_line()
        );
    }
    let Some(dir) = o.path.parent() else { return };
    for (corr, image) in c.take_images() {
        let p = dir.join(format!("counterdata-{}-{corr}.bin", std::process::id()));
        // A new file of the user's, as the part is: never through a link planted there.
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &image));
        if let Err(e) = written {
            eprintln!("cutrace: writing {} failed ({e})", p.display());
        }
    }
}

/// Hands the counter values queued by the launch callbacks to the writer, and, with `meta`,
/// writes the counter facts (META `counters`) if they changed since the last time.
fn write_counters(o: &mut Out, meta: bool) -> std::io::Result<()> {
    let Some(c) = crate::counters::get() else {
        return Ok(());
    };
    let values = c.take_values();
    if !values.is_empty() {
        let ids = o
            .metric_ids
            .get_or_insert_with(|| c.config.metrics.iter().map(|m| o.w.intern(m)).collect());
        let pid = std::process::id();
        for v in values {
            let Some(&metric) = ids.get(v.metric) else {
                continue;
            };
            o.w.push_kernel_metric(&cutrace_trace::KernelMetric {
                correlation_id: v.correlation_id,
                device: v.device,
                process: pid,
                metric,
                value: v.value,
            });
        }
    }
    let version = c.info.version();
    if meta && version != o.counters_written {
        o.w.flush()?;
        o.w.write_meta(&Meta {
            counters: Some(c.info.get()),
            ..Meta::default()
        })?;
        o.counters_written = version;
    }
    Ok(())
}

fn run_inner(g: &'static Global, kinds: &[u32]) {
    g.pool.prefill(g.config.prealloc_buffers);
    let mut out = if g.config.discard || !g.config.write_part {
        None
    } else {
        match open_part(g, kinds) {
            Ok(o) => Some(o),
            Err(msg) => {
                // Untraced after all (`LIFECYCLE` says so from here on).
                crate::untraced(&msg);
                // Nothing can be written: stop CUPTI's per-launch work too.
                for &k in kinds {
                    let _ = g.cupti.disable(k);
                }
                None
            }
        }
    };
    let mut dec = Decoder::default();
    let period = Duration::from_millis(g.config.flush_period_ms);
    let mut last_flush_request = Instant::now();
    let mut last_write = Instant::now();
    let mut lost_records = 0u64;
    let mut last_meta = (0u64, 0u64, 0usize);
    let mut monitor = (g.config.monitor_socket.as_deref()).map(|p| Monitor::new(g, p));
    // When the part an on-demand capture opened is to be finished.
    let mut capture_until: Option<Instant> = None;
    loop {
        let batch: Vec<Done> = {
            let Ok(q) = g.queue.lock() else { return };
            let Ok((mut q, _)) = g
                .queue_cv
                .wait_timeout_while(q, Duration::from_millis(50), |q| {
                    q.is_empty() && !g.stop.load(Ordering::SeqCst)
                })
            else {
                return;
            };
            q.drain(..).collect()
        };
        for d in &batch {
            if let Some(m) = monitor.as_mut() {
                m.fold_buffer(g, d);
            }
            process(g, out.as_mut(), &mut dec, d);
        }
        let stopping = g.stop.load(Ordering::SeqCst);
        if let Some(m) = monitor.as_mut() {
            m.tick(g, period, stopping);
            if !stopping {
                capture_step(g, kinds, m, &mut out, &mut dec, &mut capture_until);
            }
        }
        if let Some(o) = out.as_mut() {
            let _ = write_counters(o, false);
            let _ = write_samples(o, false);
            let _ = write_pc_samples(o, false);
            let due = last_write.elapsed() >= period || o.w.pending_rows() >= ROWS_PER_FLUSH;
            let mut pending = 0;
            let mut r = Ok(());
            if o.w.pending_rows() > 0 && (due || stopping) {
                pending = o.w.pending_rows() as u64;
                r = o.w.flush();
                last_write = Instant::now();
                let meta_now = (
                    g.dropped_by_cupti.load(Ordering::Relaxed),
                    g.pool.refused.load(Ordering::Relaxed),
                    dec.devices.len(),
                );
                if r.is_ok() && (meta_now != last_meta || dec.devices_changed) {
                    r = o.w.write_meta(&Meta {
                        devices: dec.devices.clone(),
                        dropped_by_cupti: Some(meta_now.0),
                        dropped_by_recorder: Some(lost_records),
                        notes: Vec::new(),
                        ..Meta::default()
                    });
                    dec.devices_changed = false;
                    last_meta = meta_now;
                }
            }
            if r.is_ok() {
                r = write_new_notes(g, o);
            }
            if r.is_ok() && (due || stopping) {
                r = write_counters(o, true);
            }
            if r.is_ok() && (due || stopping) {
                r = write_samples(o, true);
            }
            if r.is_ok() && (due || stopping) {
                r = write_pc_samples(o, true);
            }
            if let Err(e) = r {
                eprintln!(
                    "cutrace: pid {}: writing {} failed ({e}); recording stops here, the \
                     trace keeps what was written",
                    std::process::id(),
                    o.path.display()
                );
                lost_records += pending;
                out = None;
            }
        }
        if last_flush_request.elapsed() >= period && !stopping && !LIFECYCLE.callbacks_taken() {
            // Completed buffers come back through buffer_completed on this thread. In monitor
            // mode a process silent for long has its unfinished records handed over too.
            let flag = monitor.as_mut().map_or(0, |m| m.flush_flag(g));
            let _ = g.cupti.flush_all(flag);
            last_flush_request = Instant::now();
        }
        if stopping && g.queue.lock().map(|q| q.is_empty()).unwrap_or(true) {
            break;
        }
    }
    if let Some(m) = monitor {
        m.finish(g);
    }
    if let Some(o) = out {
        finish_part(g, o, &dec, lost_records);
    }
}

/// Monitor mode's on-demand captures (`cutrace capture`): a part opened in the directory the
/// monitor names when it asks, finished when its time is up. Refused while a part is written
/// already (`cutrace monitor --record`, or a capture still running).
fn capture_step(
    g: &Global,
    kinds: &[u32],
    m: &mut Monitor,
    out: &mut Option<Out>,
    dec: &mut Decoder,
    until: &mut Option<Instant>,
) {
    if until.is_some_and(|t| Instant::now() >= t) {
        if let Some(o) = out.take() {
            finish_part(g, o, dec, 0);
        }
        *until = None;
    }
    let Some((c, devices)) = m.take_capture() else {
        return;
    };
    if out.is_some() {
        return;
    }
    match open_part_in(g, kinds, std::path::Path::new(&c.dir)) {
        Ok(mut o) if c.last => {
            // The flight recorder's records, written and finished at once.
            let mut d = Decoder::with_devices(devices);
            let namer = |driver: bool, cbid: u32| {
                let domain = if driver {
                    CB_DOMAIN_DRIVER_API
                } else {
                    CB_DOMAIN_RUNTIME_API
                };
                g.cupti.callback_name(domain, cbid)
            };
            for (a, name) in m.ring() {
                if let (Activity::Kernel(k), Some(name)) = (a, name) {
                    // The name read when the record came, not through its pointer now.
                    d.name_as(&mut o.w, k.name_ptr, name);
                }
                d.add(&mut o.w, a, &namer);
            }
            let _ = o.w.flush();
            finish_part(g, o, &d, 0);
        }
        Ok(o) => {
            *out = Some(o);
            *dec = Decoder::with_devices(devices);
            *until = Some(Instant::now() + Duration::from_secs(c.seconds.into()));
        }
        Err(msg) => eprintln!(
            "cutrace: pid {}: the capture asked for could not start: {msg}",
            std::process::id()
        ),
    }
}

/// Writes a part's last chunks and its tail.
fn finish_part(g: &Global, mut o: Out, dec: &Decoder, lost_records: u64) {
    let _ = write_new_notes(g, &mut o);
    let _ = write_counters(&mut o, true);
    let _ = write_samples(&mut o, true);
    let _ = write_pc_samples(&mut o, true);
    write_counter_images(&o);
    let tail = Tail {
        records: 0,
        dropped_by_cupti: g.dropped_by_cupti.load(Ordering::Relaxed),
        dropped_by_recorder: lost_records,
        buffers_refused: g.pool.refused.load(Ordering::Relaxed),
        buffers_completed: g.buffers_completed.load(Ordering::Relaxed),
        incomplete_reason: None,
    };
    let mut w = o.w;
    if dec.devices_changed {
        let _ = w.write_meta(&Meta {
            devices: dec.devices.clone(),
            ..Meta::default()
        });
    }
    if let Err(e) = w.finish(&tail) {
        eprintln!(
            "cutrace: pid {}: finishing {} failed ({e}); the trace is incomplete",
            std::process::id(),
            o.path.display()
        );
    }
}

/// Notes added since the last call (an interposed CUPTI call from another tool, a buffer that
/// could not be walked) as a `META` chunk; the reader appends them to the earlier ones.
fn write_new_notes(g: &Global, o: &mut Out) -> std::io::Result<()> {
    let notes: Vec<String> = match g.notes.lock() {
        Ok(n) if n.len() > o.notes_written => n[o.notes_written..].to_vec(),
        _ => return Ok(()),
    };
    o.notes_written += notes.len();
    o.w.write_meta(&Meta {
        notes,
        ..Meta::default()
    })
}

fn process(g: &Global, out: Option<&mut Out>, dec: &mut Decoder, d: &Done) {
    let buf = d.ptr as *mut u8;
    if let Some(o) = out {
        let namer = |driver: bool, cbid: u32| {
            let domain = if driver {
                CB_DOMAIN_DRIVER_API
            } else {
                CB_DOMAIN_RUNTIME_API
            };
            g.cupti.callback_name(domain, cbid)
        };
        let end = d.ptr + d.valid;
        let mut cur: *mut u8 = std::ptr::null_mut();
        loop {
            // SAFETY: buf is a completed CUPTI buffer with `valid` bytes.
            match unsafe { g.cupti.next_record(buf, d.valid, cur) } {
                Ok(Some(rec)) => {
                    let at = rec as usize;
                    if at < d.ptr || at >= end {
                        break;
                    }
                    let len = (end - at).min(MAX_RECORD_PREFIX);
                    // SAFETY: [at, at+len) lies inside the valid part of the buffer.
                    let bytes = unsafe { std::slice::from_raw_parts(rec as *const u8, len) };
                    if let Some(a) = activity::decode(bytes) {
                        dec.add(&mut o.w, &a, &namer);
                    }
                    cur = rec;
                }
                Ok(None) => break,
                Err(e) => {
                    if let Ok(mut n) = g.notes.lock() {
                        if n.len() < 16 {
                            n.push(format!("a buffer could not be walked to its end: {e}"));
                        }
                    }
                    break;
                }
            }
        }
    }
    // SAFETY: CUPTI handed the buffer back; it came from the pool.
    unsafe { g.pool.put_back(buf, d.valid) };
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if r != 0 {
        return "unknown-host".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

fn open_part(g: &Global, kinds: &[u32]) -> Result<Out, String> {
    open_part_in(g, kinds, &g.config.output_dir)
}

/// A new part in `dir` (made 0700 when missing), created exclusively and never through a link.
fn open_part_in(g: &Global, kinds: &[u32], dir: &std::path::Path) -> Result<Out, String> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            format!(
                "cannot create the trace directory {} ({e}). Fix: pass a writable -o",
                dir.display()
            )
        })?;
    let host = hostname();
    let pid = std::process::id();
    let mut file = None;
    for attempt in 0..1000 {
        let path = dir.join(native::part_file_name(&host, pid, attempt));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => {
                file = Some((f, path));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot create {} ({e}). Fix: pass a writable -o",
                    path.display()
                ))
            }
        }
    }
    let (f, path) = file.ok_or_else(|| format!("no free part name in {}", dir.display()))?;
    let cupti_ns = g.cupti.timestamp();
    let clock = cupti_ns.map(|c| ClockRef {
        cupti_ns: c,
        realtime_ns: clock_ns(libc::CLOCK_REALTIME),
        monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
    });
    let cmdline = g.config.record_cmdline.then(|| {
        std::fs::read("/proc/self/cmdline")
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    });
    let notes = g.notes.lock().map(|n| n.clone()).unwrap_or_default();
    let notes_written = notes.len();
    let header = Header {
        format_version: native::FORMAT_VERSION,
        cutrace_version: env!("CARGO_PKG_VERSION").into(),
        host: Some(host),
        pid: Some(pid),
        cupti_version: g.cupti.version().ok(),
        cupti_path: Some(g.cupti.path.clone()),
        cuda_driver_version: g.driver_cuda_version,
        driver_version: std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|t| cutrace_cupti::version::parse_kernel_module_version(&t)),
        clock,
        kinds: kinds.iter().map(|&k| kind::name(k).to_owned()).collect(),
        buffer_bytes: Some(g.config.buffer_bytes as u64),
        device_buffer_bytes: g.config.device_buffer_bytes.map(|b| b as u64),
        cmdline,
        notes,
        distributed: g.config.distributed.clone(),
        api_records: g.api_records.clone(),
    };
    let w =
        Writer::new(f, &header).map_err(|e| format!("cannot write {} ({e})", path.display()))?;
    Ok(Out {
        w,
        path,
        notes_written,
        metric_ids: None,
        counters_written: 0,
        pm_metric_ids: None,
        pm_written: 0,
        pc_names: Vec::new(),
        pc_written: 0,
    })
}
