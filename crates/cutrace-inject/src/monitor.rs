//! Monitor mode (`cutrace monitor`, [`cutrace_settings::Settings::monitor_socket`]): instead of
//! writing a part, the writer thread folds each completed buffer's kernel, launch and copy
//! records into summaries (`cutrace_monitor::fold`) and sends them to the monitor's Unix socket
//! about once a flush period.
//!
//! The application never waits on the monitor: every connect is non-blocking (a monitor whose
//! backlog is full is tried again later) and every send too (`MSG_DONTWAIT`,
//! and `MSG_NOSIGNAL`, so a monitor that went away raises no SIGPIPE in the program), and it
//! happens on the writer thread. A frame the socket did not take whole is finished before the
//! next; while it is unfinished, new records stay folded, up to [`MAX_HELD_INTERVALS`], past
//! which they are dropped and counted (`dropped_by_cutrace_total` in the next batch). A monitor
//! that is gone is reconnected to once a second, with a new hello.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cutrace_cupti::activity::{self, Activity, MAX_RECORD_PREFIX};
use cutrace_cupti::api::{CB_DOMAIN_DRIVER_API, CB_DOMAIN_RUNTIME_API};
use cutrace_monitor::fold::{self, Fold};
use cutrace_monitor::wire::{self, Batch, Hello, Message};

use crate::{Done, Global};

/// Kernel intervals held while the monitor does not take them (about 16 bytes each).
pub const MAX_HELD_INTERVALS: usize = 262_144;
/// Most bytes waiting to be written to the socket.
const MAX_UNSENT_BYTES: usize = 8 << 20;
const RECONNECT_EVERY: Duration = Duration::from_secs(1);
/// How long the last batch may take to leave at exit.
const FINAL_SEND: Duration = Duration::from_millis(1000);

pub(crate) struct Monitor {
    path: PathBuf,
    stream: Option<UnixStream>,
    /// Frames not yet written whole, and the records they hold.
    unsent: Vec<u8>,
    unsent_records: u64,
    fold: Fold,
    /// Kernel name pointer → whether it is a communication kernel.
    comm_names: HashMap<usize, bool>,
    /// (driver?, callback id) → whether the call launches a kernel or a graph.
    kernel_calls: HashMap<(bool, u32), bool>,
    /// CUPTI's dropped count when pending launches were last trusted.
    dropped_seen: u64,
    hello: Hello,
    seq: u64,
    /// The duty cycle's state: records on now, since when, and the on time before.
    duty_on: bool,
    duty_since: Instant,
    traced_before: Duration,
    last_send: Instant,
    last_connect: Option<Instant>,
    dropped_by_cutrace: u64,
    /// Said already that the socket is another user's.
    told_foreign: bool,
    /// The uid the listener must have, when the environment pins it.
    listener_uid: Option<u32>,
    /// The devices seen, for the header of a captured part.
    devices: crate::decode::Decoder,
    /// Bytes read from the monitor (its capture requests), not yet a whole frame.
    inbox: Vec<u8>,
    /// A capture the monitor asked for, not yet started, and when the last one was taken.
    capture: Option<wire::Capture>,
    last_capture: Option<Instant>,
    /// Stopped listening to the monitor (it sent something unreadable).
    deaf: bool,
    /// The flight recorder: the last [`RING_RECORDS`] records (kernels, launch calls, copies),
    /// written out by `cutrace capture --last`; a kernel with its name, read when its record
    /// came (CUPTI's name pointer is valid then, not once its module is unloaded).
    ring: std::collections::VecDeque<(Activity, Option<std::sync::Arc<str>>)>,
    /// The kernel names read for the ring, by CUPTI's pointer (at most [`RING_NAMES`]).
    ring_names: HashMap<usize, std::sync::Arc<str>>,
    /// When a buffer with records last came, and when a forced flush was last asked for.
    last_records: Instant,
    last_forced: Instant,
}

/// Records the flight recorder keeps (a few MB; at 100,000 kernels a second, the last second or
/// so, and minutes of a program that launches little).
pub const RING_RECORDS: usize = 65_536;
/// Distinct kernel names the ring's name cache holds before it starts again (names already in
/// the ring stay with their records).
const RING_NAMES: usize = 4_096;
/// A kernel name the ring keeps is cut to this many bytes (the longest template names seen are
/// a few KB; the ring then holds at most 65,536 × 64 KiB even with every name distinct).
const RING_NAME_BYTES: usize = 64 << 10;

/// Most bytes of unread requests kept from the monitor.
const MAX_INBOX: usize = 64 << 10;
/// Captures start at most this often (a flood of requests cannot stall the writer or fill the
/// disk).
const MIN_CAPTURE_GAP: Duration = Duration::from_secs(2);

/// A capture the library will act on, whatever the monitor checked: an absolute directory and
/// at most [`wire::MAX_CAPTURE_SECONDS`].
fn capture_is_sane(c: &wire::Capture) -> bool {
    c.dir.starts_with('/')
        && !c.dir.contains('\0')
        && (c.last || (1..=wire::MAX_CAPTURE_SECONDS).contains(&c.seconds))
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi writes a UUID.
pub(crate) fn uuid_text(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// Whether a runtime or driver call of this name launches a kernel (or a graph of them), so
/// that a kernel record is to follow: `cudaLaunchKernel`, `cuLaunchKernelEx`, the cooperative
/// launches, graph launches, with their `_ptsz` and version suffixes.
fn launches_kernels(name: &str) -> bool {
    let base = crate::decode::strip_version_suffix(name);
    [
        "cudaLaunchKernel",
        "cudaLaunchCooperativeKernel",
        "cudaGraphLaunch",
        "cuLaunchKernel",
        "cuLaunchCooperativeKernel",
        "cuGraphLaunch",
    ]
    .iter()
    .any(|p| base.starts_with(p))
}

/// This machine's name (`gethostname`), for the hello's `host` label.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "unknown-host".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The program's name (its first argument's file name), never its arguments.
fn command_name() -> String {
    std::env::args_os()
        .next()
        .map(|a| {
            let p = std::path::PathBuf::from(a);
            p.file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default()
}

fn hello(g: &Global) -> Hello {
    let d = g.config.distributed.as_ref();
    Hello {
        pid: std::process::id(),
        host: hostname(),
        command: command_name(),
        rank: d.and_then(|d| d.rank),
        local_rank: d.and_then(|d| d.local_rank),
        job: g.config.job.clone(),
    }
}

/// Connects to the monitor's socket without waiting: a monitor whose queue of pending
/// connections is full (or that is gone) is an error now, never a wait.
fn connect_now(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &b) in addr.sun_path.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    // SAFETY: a plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new socket this function owns from here on (closed on every return).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len()) as libc::socklen_t;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes, alive for the call.
    let r = unsafe { libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(UnixStream::from(owned))
}

/// The uid of the process that listens on the other end of `s` (SO_PEERCRED).
fn listener_uid(s: &UnixStream) -> Option<u32> {
    // SAFETY: ucred is plain data; all zeroes is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writes of len bytes; the fd is the open socket `s`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && len as usize == std::mem::size_of::<libc::ucred>()).then_some(cred.uid)
}

/// Whether a listener of `uid` may receive the summaries of a process of user `me`: the uid the
/// agent's environment names (`CUTRACE_MONITOR_UID`, `agent env` prints its own) when set, else
/// its own user's or root's. Root in a container is uid 0 too: the agent's environment pins it.
fn trusted_listener(uid: u32, me: u32, want: Option<u32>) -> bool {
    match want {
        Some(want) => uid == want,
        None => uid == me || uid == 0,
    }
}

fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// One line on stderr, written at once.
fn say(msg: &str) {
    use std::io::Write;
    let line = format!("cutrace: pid {}: {msg}\n", std::process::id());
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Sends what it can of `bytes` without waiting; how many bytes went, or the error that means
/// the peer is gone.
fn send_some(s: &UnixStream, bytes: &[u8]) -> std::io::Result<usize> {
    if bytes.is_empty() {
        return Ok(0);
    }
    // SAFETY: the pointer and length describe `bytes`, alive for the call; the fd is the open
    // socket `s` owns.
    let n = unsafe {
        libc::send(
            s.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(0),
        _ => Err(e),
    }
}

impl Monitor {
    pub(crate) fn new(g: &Global, path: &Path) -> Monitor {
        let now = Instant::now();
        let mut m = Monitor {
            path: path.to_path_buf(),
            stream: None,
            unsent: Vec::new(),
            unsent_records: 0,
            fold: Fold::default(),
            comm_names: HashMap::new(),
            kernel_calls: HashMap::new(),
            dropped_seen: 0,
            hello: hello(g),
            seq: 0,
            duty_on: true,
            duty_since: now,
            traced_before: Duration::ZERO,
            last_send: now,
            last_connect: None,
            dropped_by_cutrace: 0,
            told_foreign: false,
            listener_uid: g.config.monitor_uid,
            devices: crate::decode::Decoder::default(),
            inbox: Vec::new(),
            capture: None,
            last_capture: None,
            deaf: false,
            ring: std::collections::VecDeque::new(),
            ring_names: HashMap::new(),
            last_records: now,
            last_forced: now,
        };
        m.connect();
        m
    }

    /// Connects (at most once a second) and queues the hello first.
    fn connect(&mut self) {
        if self.stream.is_some()
            || self
                .last_connect
                .is_some_and(|t| t.elapsed() < RECONNECT_EVERY)
        {
            return;
        }
        self.last_connect = Some(Instant::now());
        if let Ok(s) = connect_now(&self.path) {
            // The listener must be this user's (or root's): anyone else who put a socket at
            // the path (a /tmp directory made before the agent) would read the summaries.
            match listener_uid(&s) {
                Some(uid) if trusted_listener(uid, current_uid(), self.listener_uid) => {}
                other => {
                    if !self.told_foreign {
                        self.told_foreign = true;
                        let who = other.map_or("an unknown user".into(), |u| format!("uid {u}"));
                        say(&format!(
                            "the monitor socket {} is served by {who}, not by this user: \
                             nothing is sent to it",
                            self.path.display()
                        ));
                    }
                    return;
                }
            }
            self.stream = Some(s);
            self.drop_unsent();
            self.unsent = wire::encode(&Message::Hello(self.hello.clone()));
        }
    }

    /// Frames that can no longer be sent whole (the peer went away) count as dropped.
    fn drop_unsent(&mut self) {
        self.dropped_by_cutrace += self.unsent_records;
        self.unsent_records = 0;
        self.unsent.clear();
    }

    /// Writes what the socket takes of the unsent bytes; whether none are left.
    fn push(&mut self) -> bool {
        let Some(s) = &self.stream else {
            return self.unsent.is_empty();
        };
        match send_some(s, &self.unsent) {
            Ok(n) => {
                self.unsent.drain(..n);
            }
            Err(_) => {
                self.stream = None;
                self.drop_unsent();
            }
        }
        if self.unsent.is_empty() {
            self.unsent_records = 0;
        }
        self.unsent.is_empty()
    }

    /// Folds the kernel, launch, copy and device records of one completed buffer (before the
    /// writer returns it to the pool).
    pub(crate) fn fold_buffer(&mut self, g: &Global, d: &Done) {
        if d.valid > 0 {
            self.last_records = Instant::now();
        }
        let buf = d.ptr as *mut u8;
        let end = d.ptr + d.valid;
        let mut cur: *mut u8 = std::ptr::null_mut();
        // SAFETY: buf is a completed CUPTI buffer with `valid` bytes, not yet returned.
        while let Ok(Some(rec)) = unsafe { g.cupti.next_record(buf, d.valid, cur) } {
            let at = rec as usize;
            if at < d.ptr || at >= end {
                break;
            }
            let len = (end - at).min(MAX_RECORD_PREFIX);
            // SAFETY: [at, at+len) lies inside the valid part of the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(rec as *const u8, len) };
            if let Some(a) = activity::decode(bytes) {
                self.fold_record(g, &a);
            }
            cur = rec;
        }
    }

    fn fold_record(&mut self, g: &Global, a: &Activity) {
        if !matches!(a, Activity::Device(_) | Activity::Other(_)) {
            if self.ring.len() >= RING_RECORDS {
                self.ring.pop_front();
            }
            let name = match a {
                Activity::Kernel(k) => Some(self.ring_name(k.name_ptr)),
                _ => None,
            };
            self.ring.push_back((a.clone(), name));
        }
        match a {
            // A forced flush hands over a kernel still running with start = end = 0 (seen on
            // the H200, CUPTI 13.0: gpu/flush_probe.cu); CUPTI sends no second record for it.
            Activity::Kernel(k) if k.start == 0 && k.end == 0 => {
                // SAFETY: as below.
                let name = unsafe { activity::cstr_at(k.name_ptr) }.unwrap_or_default();
                self.fold
                    .unfinished(k.device, k.stream, k.correlation_id, &name);
            }
            Activity::Kernel(k) => {
                let comm = *self.comm_names.entry(k.name_ptr).or_insert_with(|| {
                    // SAFETY: CUPTI keeps kernel names alive while it is loaded (or the pointer
                    // is null).
                    let name = unsafe { activity::cstr_at(k.name_ptr) }.unwrap_or_default();
                    cutrace_trace::comm::is_comm_kernel(&name)
                });
                if self.comm_names.len() > 65_536 {
                    self.comm_names.clear();
                }
                self.fold
                    .kernel(k.device, k.stream, k.start, k.end, comm, k.correlation_id);
            }
            Activity::Api(r) => {
                let kernel = *self
                    .kernel_calls
                    .entry((r.driver, r.cbid))
                    .or_insert_with(|| {
                        let domain = if r.driver {
                            CB_DOMAIN_DRIVER_API
                        } else {
                            CB_DOMAIN_RUNTIME_API
                        };
                        g.cupti
                            .callback_name(domain, r.cbid)
                            .is_some_and(|n| launches_kernels(&n))
                    });
                self.fold.launch(r.correlation_id, r.end, kernel);
            }
            Activity::Memcpy(m) => self.fold.copy(m.device, m.bytes, m.correlation_id),
            Activity::Device(d) => {
                self.devices.add_device(d);
                self.fold.device(d.id, uuid_text(&d.uuid))
            }
            _ => {}
        }
    }

    /// After each round of the writer: sends a batch when a flush period has passed (or
    /// `stopping`), and bounds what is held while the monitor does not keep up.
    /// Reads what the monitor sent (capture requests) without waiting. The first thing that
    /// is not a well-formed capture request ends the listening for good.
    fn read_requests(&mut self) {
        if self.deaf {
            return;
        }
        let Some(s) = &self.stream else { return };
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: buf is writable for its length; the fd is the open socket `s` owns.
            let n = unsafe {
                libc::recv(
                    s.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                break;
            }
            self.inbox.extend_from_slice(&buf[..n as usize]);
            if self.inbox.len() > MAX_INBOX {
                // Not a monitor of ours: stop listening to it.
                self.stop_listening();
                return;
            }
        }
        while let Some(r) = wire::split_frame(&self.inbox) {
            match r {
                Ok((Message::Capture(c), used)) if capture_is_sane(&c) => {
                    self.inbox.drain(..used);
                    let due = self
                        .last_capture
                        .is_none_or(|t| t.elapsed() >= MIN_CAPTURE_GAP);
                    if due {
                        self.last_capture = Some(Instant::now());
                        self.capture = Some(c);
                    }
                }
                _ => {
                    self.stop_listening();
                    return;
                }
            }
        }
    }

    fn stop_listening(&mut self) {
        self.inbox = Vec::new();
        self.deaf = true;
    }

    /// The flight recorder's records, oldest first, each kernel with its name.
    pub(crate) fn ring(&self) -> impl Iterator<Item = &(Activity, Option<std::sync::Arc<str>>)> {
        self.ring.iter()
    }

    /// A kernel's name for the ring, read now, as the trace writer reads it: when the writer
    /// thread takes the record's buffer, not when the ring is written out. A cached name is
    /// used only while the pointer still reads the same (a module unloaded and another loaded
    /// may reuse the memory).
    fn ring_name(&mut self, ptr: usize) -> std::sync::Arc<str> {
        if ptr == 0 {
            return std::sync::Arc::from("");
        }
        // SAFETY: ptr is the name pointer of a record CUPTI handed over in a buffer this thread
        // is reading now; CUPTI keeps the name alive while its module is loaded, as the trace
        // writer relies on for every kernel it names (decode.rs). Nonzero, checked above.
        let now = unsafe { std::ffi::CStr::from_ptr(ptr as *const std::ffi::c_char) }.to_bytes();
        let cut = &now[..now.len().min(RING_NAME_BYTES)];
        if let Some(n) = self.ring_names.get(&ptr) {
            if n.as_bytes() == cut {
                return n.clone();
            }
        }
        if self.ring_names.len() >= RING_NAMES {
            // Keep the names the ring still holds (they are shared, not copied per record).
            self.ring_names
                .retain(|_, n| std::sync::Arc::strong_count(n) > 1);
        }
        let name: std::sync::Arc<str> = String::from_utf8_lossy(cut).into();
        if self.ring_names.len() < RING_NAMES {
            self.ring_names.insert(ptr, name.clone());
        }
        name
    }

    /// A capture asked for: where, for how long, and the devices seen so far for its header.
    pub(crate) fn take_capture(
        &mut self,
    ) -> Option<(wire::Capture, Vec<cutrace_trace::native::DeviceInfo>)> {
        self.read_requests();
        let c = self.capture.take()?;
        Some((c, self.devices.devices.clone()))
    }

    /// How long records were on: since the start, or the duty cycle's on windows.
    /// The flag of the writer's next periodic flush: forced once the process has delivered no
    /// record for [`crate::config::Config::force_flush_after`] (and at most that often). CUPTI
    /// returns a buffer on an unforced flush only once every record in it is complete, so a
    /// kernel that never ends holds back its buffer, and with it every record after it: the
    /// hung kernel's launch, and the kernels before it (H200, 2026-12-02). A forced flush
    /// hands them over, the running kernel's record unfinished (its time is then lost to the
    /// unions: `unfinished_ended_total`).
    pub(crate) fn flush_flag(&mut self, g: &Global) -> u32 {
        let after = g.config.force_flush_after;
        if self.last_records.elapsed() >= after && self.last_forced.elapsed() >= after {
            self.last_forced = Instant::now();
            cutrace_cupti::api::FLUSH_FORCED
        } else {
            0
        }
    }

    fn traced(&self) -> Duration {
        if self.duty_on {
            self.traced_before + self.duty_since.elapsed()
        } else {
            self.traced_before
        }
    }

    /// Turns the records off at the end of the duty cycle's on window and on again at the
    /// start of the next period (never once another tool has CUPTI's buffers).
    fn cycle(&mut self, g: &Global) {
        let Some(d) = g.config.duty else { return };
        if crate::callbacks_taken() {
            return;
        }
        let in_phase = self.duty_since.elapsed();
        let (on, off) = (
            Duration::from_millis(d.on_ms),
            Duration::from_millis(d.period_ms - d.on_ms),
        );
        if self.duty_on && in_phase >= on {
            crate::set_records(g, false);
            self.traced_before += in_phase;
            self.duty_on = false;
            self.duty_since = Instant::now();
        } else if !self.duty_on && in_phase >= off {
            crate::set_records(g, true);
            self.duty_on = true;
            self.duty_since = Instant::now();
        }
    }

    pub(crate) fn tick(&mut self, g: &Global, period: Duration, stopping: bool) {
        if !stopping {
            self.cycle(g);
        }
        if self.stream.is_none() {
            self.connect();
        }
        let drained = self.push();
        if !drained || self.stream.is_none() {
            if self.fold.intervals() > MAX_HELD_INTERVALS {
                self.dropped_by_cutrace += self.fold.records();
                self.fold.discard();
            }
            return;
        }
        if self.last_send.elapsed() < period && !stopping {
            return;
        }
        self.last_send = Instant::now();
        let dropped_by_cupti = g
            .dropped_by_cupti
            .load(std::sync::atomic::Ordering::Relaxed);
        if dropped_by_cupti != self.dropped_seen {
            // Their kernels may be among what CUPTI dropped: never a stuck kernel for that.
            self.fold.forget_pending();
            self.dropped_seen = dropped_by_cupti;
        }
        let (launches_pending, oldest) = self.fold.pending_launches();
        let now = g.cupti.timestamp();
        let head = Batch {
            seq: 0,
            traced_ns: self.traced().as_nanos() as u64,
            dropped_by_cupti_total: dropped_by_cupti,
            dropped_by_cutrace_total: self.dropped_by_cutrace,
            launches_pending,
            oldest_pending_ns: match (now, oldest) {
                (Some(now), Some(end)) => now.saturating_sub(end),
                _ => 0,
            },
            oldest_pending_kernel: self.fold.oldest_unfinished().map(str::to_string),
            unfinished_ended_total: self.fold.unfinished_ended(),
            devices: Vec::new(),
        };
        let records = self.fold.records();
        let batch = self.fold.take(head);
        let seq = &mut self.seq;
        let parts = fold::split(batch, wire::MAX_PAYLOAD - 4096, &mut || {
            *seq += 1;
            *seq
        });
        for p in parts {
            self.unsent.extend(wire::encode(&Message::Batch(p)));
        }
        self.unsent_records = records;
        if self.unsent.len() > MAX_UNSENT_BYTES {
            self.drop_unsent();
        }
        self.push();
    }

    /// At the writer's end: the last batch, given [`FINAL_SEND`] to leave.
    pub(crate) fn finish(mut self, g: &Global) {
        let deadline = Instant::now() + FINAL_SEND;
        let drain = |m: &mut Monitor| {
            while !m.push() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        // The batch the socket is still taking first: the last one is built only once it
        // went (a tick with frames unsent holds the records folded).
        drain(&mut self);
        self.tick(g, Duration::ZERO, true);
        drain(&mut self);
    }
}

/// Tells the monitor, when there is one, that this process runs untraced and why: a hello and
/// the reason, connected and sent without waiting (this may run on the program's thread that
/// started CUDA), once.
pub(crate) fn tell_untraced(why: &str) {
    let (s, _) = cutrace_settings::Settings::from_process_env();
    let Some(path) = s.monitor_socket else { return };
    let Ok(stream) = connect_now(&path) else {
        return;
    };
    if !listener_uid(&stream).is_some_and(|u| trusted_listener(u, current_uid(), s.monitor_uid)) {
        return;
    }
    let h = Hello {
        pid: std::process::id(),
        host: hostname(),
        command: command_name(),
        ..Hello::default()
    };
    let mut bytes = wire::encode(&Message::Hello(h));
    bytes.extend(wire::encode(&Message::Untraced(why.to_string())));
    let _ = send_some(&stream, &bytes);
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_this_users_or_roots_listener_is_sent_to() {
        use super::{current_uid, listener_uid, trusted_listener};
        assert!(trusted_listener(1000, 1000, None) && trusted_listener(0, 1000, None));
        assert!(!trusted_listener(1001, 1000, None));
        // Pinned by the agent's environment: that uid only, root's neither.
        assert!(trusted_listener(999, 1000, Some(999)));
        assert!(!trusted_listener(0, 1000, Some(999)) && !trusted_listener(1000, 1000, Some(999)));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(listener_uid(&a), Some(current_uid()));
    }

    #[test]
    fn connecting_never_waits_and_names_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("cutrace-inject-mon-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.sock");
        assert!(super::connect_now(&path).is_err());
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let c = super::connect_now(&path).unwrap();
        let (mut a, _) = l.accept().unwrap();
        assert_eq!(super::send_some(&c, b"hi").unwrap(), 2);
        let mut got = [0u8; 2];
        std::io::Read::read_exact(&mut a, &mut got).unwrap();
        assert_eq!(&got, b"hi");
        let long = dir.join("x".repeat(200));
        assert!(super::connect_now(&long).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn kernel_launches_are_told_from_other_calls() {
        for n in [
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernel_ptsz_v7000",
            "cudaLaunchKernelExC_v11060",
            "cuLaunchKernel",
            "cuLaunchKernelEx_ptsz",
            "cudaGraphLaunch_v10000",
        ] {
            assert!(super::launches_kernels(n), "{n}");
        }
        for n in [
            "cudaMemcpyAsync_v3020",
            "cudaLaunchHostFunc_v10000",
            "cuMemsetD8Async",
        ] {
            assert!(!super::launches_kernels(n), "{n}");
        }
    }

    #[test]
    fn uuids_read_as_nvidia_smi_writes_them() {
        let u: [u8; 16] = std::array::from_fn(|i| i as u8 * 17);
        assert_eq!(
            super::uuid_text(&u),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
