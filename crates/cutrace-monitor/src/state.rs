//! What the monitor knows: every process that said hello, with its own busy per GPU, and each
//! GPU's busy as one union over all its processes (never their sum). Messages are applied in
//! the order each connection sends them; the state is bounded (processes, GPUs, open runs).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cutrace_trace::Ns;

use crate::peer::Peer;
use crate::union::WatermarkUnion;
use crate::wire::{
    Batch, CaptureReply, CaptureRequest, Hello, Latency, Message, MAX_CAPTURE_SECONDS, MAX_DEVICES,
};

/// Most processes kept; a hello past this is refused (and counted).
pub const MAX_PROCESSES: usize = 4096;
/// Most GPUs kept, across processes.
pub const MAX_GPUS: usize = 256;
/// Most (process, GPU) pairs kept: each is one series per per-process metric family.
pub const MAX_PROCESS_GPUS: usize = 16_384;
/// Streams of one process on one GPU that get a series of their own; the rest share one,
/// `stream="other"`.
pub const MAX_STREAMS_PER_GPU: usize = 8;
/// Open runs kept over every union together (about 48 bytes each): past it, the unions a batch
/// touches are cut to their share ([`WatermarkUnion::shrink_to`]) and what arrives below their
/// new watermarks is late.
pub const OPEN_RUN_BUDGET: usize = 1 << 20;
/// The least a union is cut to.
const MIN_RUN_SHARE: usize = 64;
/// Bytes of a label value kept from a hello (host, command, job id); longer ones are cut at a
/// character boundary.
pub const MAX_LABEL_BYTES: usize = 128;
/// Bytes of a process's stated reason for running untraced.
pub const MAX_REASON_BYTES: usize = 512;
/// A run longer than this (one day) is not a kernel's: refused as implausible.
pub const MAX_RUN_NS: Ns = 86_400_000_000_000;
/// How far past a GPU's newest end (plus the monitor's own time since it rose) a run may end:
/// further is a broken or hostile timestamp, which would otherwise hold the GPU's watermark
/// near the end of time and make every later record late.
pub const MAX_AHEAD_NS: Ns = 600_000_000_000;

/// A GPU: its UUID (`GPU-…`), or `unknown-device-N` before the process saw CUPTI's device
/// record (N its CUPTI device id). Processes share a GPU by UUID, whatever their device ids.
pub type GpuKey = String;

/// A GPU's union over its processes, with the device id its first process gave it.
#[derive(Debug, Default, Clone)]
pub struct Gpu {
    pub index: u32,
    pub busy: WatermarkUnion,
    /// When `busy`'s newest end last rose, by the monitor's clock.
    pub newest_at: Option<Instant>,
}

/// One process's figures on one GPU.
#[derive(Debug, Default, Clone)]
pub struct ProcessGpu {
    /// The process's CUPTI device id for it.
    pub index: u32,
    pub busy: WatermarkUnion,
    pub comm: WatermarkUnion,
    /// Every kernel but communication: communication is exposed where none of these ran.
    pub compute: WatermarkUnion,
    pub kernels: u64,
    pub kernel_sum_ns: Ns,
    pub copies: u64,
    pub copy_bytes: u64,
    pub latency: Latency,
    /// Kernel time per stream, for the first [`MAX_STREAMS_PER_GPU`] streams seen.
    pub streams: BTreeMap<u32, StreamBusy>,
    /// The kernel time of the streams past those, summed over them.
    pub other_streams_ns: Ns,
}

/// One stream's kernel time. A stream runs its kernels one after another, and its merged runs
/// come in time order (a context's records are handed over in order), so each run adds what
/// lies past the latest end seen: their union, without keeping the runs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StreamBusy {
    pub busy_ns: Ns,
    pub last_end: Ns,
}

impl StreamBusy {
    pub fn add(&mut self, start: Ns, end: Ns) {
        let from = start.max(self.last_end);
        self.busy_ns = self.busy_ns.saturating_add(end.saturating_sub(from));
        self.last_end = self.last_end.max(end);
    }
}

impl ProcessGpu {
    /// Adds a stream's run to its own figure, or to the other streams' once
    /// [`MAX_STREAMS_PER_GPU`] streams have one.
    fn add_stream_run(&mut self, stream: u32, start: Ns, end: Ns) {
        let n = self.streams.len();
        match self.streams.get_mut(&stream) {
            Some(b) => b.add(start, end),
            None if n < MAX_STREAMS_PER_GPU => {
                self.streams.entry(stream).or_default().add(start, end);
            }
            None => {
                self.other_streams_ns = self
                    .other_streams_ns
                    .saturating_add(end.saturating_sub(start));
            }
        }
    }

    /// Communication time during which no other kernel of the process ran on the GPU:
    /// union(all) − union(compute), which is union(comm) − union(comm) ∩ union(compute).
    pub fn exposed_comm_ns(&self) -> Ns {
        self.busy.total_ns().saturating_sub(self.compute.total_ns())
    }

    /// Open runs over its three unions.
    pub fn open_runs(&self) -> usize {
        self.busy.open_runs() + self.comm.open_runs() + self.compute.open_runs()
    }
}

#[derive(Debug, Default, Clone)]
pub struct Process {
    /// What it said of itself, but its pid: the monitor's view of it (`SO_PEERCRED`).
    pub hello: Hello,
    /// Its pid in its own pid namespace, when that is another (`peer::Peer`).
    pub ns_pid: Option<u32>,
    /// Its uid, by the kernel's word.
    pub uid: u32,
    /// Its mount namespace, when it could be read (`peer::Peer::mnt_ns`).
    pub mnt_ns: Option<String>,
    /// Its container and pod, from its cgroup (`peer::Peer`).
    pub container_id: Option<String>,
    pub pod_uid: Option<String>,
    pub gpus: BTreeMap<GpuKey, ProcessGpu>,
    pub last_seq: u64,
    /// Batches whose sequence numbers never arrived.
    pub batches_lost: u64,
    pub traced_ns: Ns,
    pub dropped_by_cupti: u64,
    pub dropped_by_cutrace: u64,
    /// From its last batch: kernel launches not completed, and the oldest one's age.
    pub launches_pending: u64,
    pub oldest_pending_ns: Ns,
    /// The oldest pending launch's kernel, when CUPTI named it (its unfinished record).
    pub oldest_pending_kernel: Option<String>,
    /// Kernels handed over unfinished that ended since: their time is in no union.
    pub unfinished_ended: u64,
    /// Said already that its oldest launch is stuck (until it completes), and when it last did.
    pub stuck_told: bool,
    pub stuck_at: Option<Instant>,
    /// Set when the process said it runs untraced.
    pub untraced: Option<String>,
    /// Its connection closed (it exited, or stopped sending).
    pub ended: bool,
    /// When it ended, for [`State::forget_ended`].
    pub ended_at: Option<Instant>,
}

/// The monitor's whole view.
#[derive(Debug, Default)]
pub struct State {
    /// By pid.
    pub processes: BTreeMap<u32, Process>,
    /// Each GPU's union over all its processes.
    pub gpus: BTreeMap<GpuKey, Gpu>,
    /// Frames refused, by reason (`wire::WireError::reason`, `peer_uid`, `peer_pid`, …).
    pub rejected: BTreeMap<&'static str, u64>,
    pub connections_total: u64,
    pub connections_open: u64,
    /// Why nothing may be traced, set by the binary (no CUDA driver, …).
    pub untraced_reason: Option<String>,
    /// How long an ended process's own series are kept ([`State::forget_ended`]).
    pub forget_after: Option<Duration>,
    /// Processes forgotten so far.
    pub forgotten: u64,
    /// GPUs dropped so far to make room (no kept process reported on them).
    pub gpus_forgotten: u64,
    /// Runs refused for an implausible time ([`MAX_RUN_NS`], [`MAX_AHEAD_NS`]).
    pub implausible_runs: u64,
    /// Open runs over every union (bounded by about [`OPEN_RUN_BUDGET`]).
    pub open_runs: usize,
    /// (process, GPU) pairs kept (at most [`MAX_PROCESS_GPUS`]).
    pub process_gpus: usize,
    /// A group whose members' processes may report too (`cutrace agent --group`), besides
    /// this user's.
    pub group: Option<u32>,
    /// A launch pending this long is a stuck kernel: told once per hang in [`State::stuck`].
    pub stuck_after_ns: Option<Ns>,
    /// Stuck kernels seen and not yet taken by the binary (to log, and to dump the flight
    /// recorder); at most [`MAX_STUCK_EVENTS`].
    pub stuck: Vec<Stuck>,
    /// The open run budget when not [`OPEN_RUN_BUDGET`].
    pub run_budget: Option<usize>,
    /// Each connected process's connection, to send it a capture request
    /// ([`State::capture`]).
    pub writers: BTreeMap<u32, std::os::unix::net::UnixStream>,
    /// Open connections by the sender's pid (at most [`MAX_CONNECTIONS_PER_PEER`] each).
    pub connections_by_peer: BTreeMap<u32, u32>,
}

/// A process whose oldest kernel launch has gone unanswered past the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub pid: u32,
    pub command: String,
    pub rank: Option<u32>,
    pub age_ns: Ns,
    /// The kernel's name, when CUPTI handed over its unfinished record.
    pub kernel: Option<String>,
}

/// At most one stuck-kernel event per process this often (a sender toggling its pending age
/// cannot flood the log).
pub const STUCK_EVENT_EVERY: Duration = Duration::from_secs(60);

/// Stuck-kernel events kept until the binary takes them.
pub const MAX_STUCK_EVENTS: usize = 1024;

/// Connections one process may hold open at once.
pub const MAX_CONNECTIONS_PER_PEER: u32 = 4;

/// Whether process `p` resolves paths as `requester` does: the same mount namespace, both
/// known. A uid alone is not enough: containers share uids (root is 0 in each), and a directory
/// named by one would be created inside another's file system.
fn same_mounts(p: &Process, requester: &Peer) -> bool {
    matches!((&p.mnt_ns, &requester.mnt_ns), (Some(a), Some(b)) if a == b)
}

/// Whether `u` reads as a GPU's UUID as nvidia-smi writes it (`GPU-…` or `MIG-…`, hex digits
/// and dashes, at most 64 bytes): anything else is kept as `unknown-device-N`, so a label value
/// stays short whatever a sender says.
fn is_uuid(u: &str) -> bool {
    (u.starts_with("GPU-") || u.starts_with("MIG-"))
        && u.len() <= 64
        && u[4..].bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut n = max;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.truncate(n);
    }
    s
}

/// Why a message was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("a batch before the hello")]
    NoHello,
    #[error("a second hello on one connection")]
    SecondHello,
    #[error("the hello names another pid than the sender's")]
    PeerPid,
    #[error("too many processes")]
    TooManyProcesses,
    #[error("a hello for a process whose connection is still open")]
    PidConnected,
    #[error("too many GPUs")]
    TooManyGpus,
    #[error("too many (process, GPU) pairs")]
    TooManySeries,
    #[error("a batch sequence number that does not rise")]
    Replay,
    #[error("a message a process does not send")]
    Unexpected,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::NoHello => "no_hello",
            Refused::SecondHello => "second_hello",
            Refused::PeerPid => "peer_pid",
            Refused::TooManyProcesses => "too_many_processes",
            Refused::PidConnected => "pid_connected",
            Refused::TooManyGpus => "too_many_gpus",
            Refused::TooManySeries => "too_many_series",
            Refused::Replay => "replay",
            Refused::Unexpected => "unexpected_message",
        }
    }
}

impl State {
    /// Drops the processes that ended more than [`State::forget_after`] before `now`: their
    /// own series go (label cardinality stays bounded), their time stays in their GPUs' unions.
    pub fn forget_ended(&mut self, now: Instant) {
        let Some(after) = self.forget_after else {
            return;
        };
        let before = self.processes.len();
        let mut pairs = 0;
        self.processes.retain(|_, p| {
            let keep = p
                .ended_at
                .is_none_or(|t| now.saturating_duration_since(t) < after);
            if !keep {
                pairs += p.gpus.len();
            }
            keep
        });
        self.process_gpus -= pairs;
        self.forgotten += (before - self.processes.len()) as u64;
    }

    /// Makes room for `n` more GPUs when the table is full, by dropping GPUs no kept process
    /// reports on, those whose time last rose longest ago first (so the table cannot stay full
    /// of GPUs that are gone, or of names a process made up). A GPU dropped and used again
    /// starts a new counter, which Prometheus's rate() reads as a reset. Whether room was made.
    fn make_room_for_gpus(&mut self, n: usize) -> bool {
        let over = (self.gpus.len() + n).saturating_sub(MAX_GPUS);
        if over == 0 {
            return true;
        }
        let procs = &self.processes;
        let mut unused: Vec<(Option<Instant>, GpuKey)> = self
            .gpus
            .iter()
            .filter(|(k, _)| !procs.values().any(|p| p.gpus.contains_key(*k)))
            .map(|(k, g)| (g.newest_at, k.clone()))
            .collect();
        if unused.len() < over {
            return false;
        }
        unused.sort();
        for (_, k) in unused.into_iter().take(over) {
            if let Some(g) = self.gpus.remove(&k) {
                self.open_runs -= g.busy.open_runs();
                self.gpus_forgotten += 1;
            }
        }
        true
    }

    /// A copy for reading: every figure, none of the open runs (cheap to take under the lock,
    /// rendered after it is released).
    pub fn snapshot(&self) -> State {
        let processes = self
            .processes
            .iter()
            .map(|(&pid, p)| {
                let gpus = p
                    .gpus
                    .iter()
                    .map(|(k, g)| {
                        let g = ProcessGpu {
                            busy: g.busy.frozen(),
                            comm: g.comm.frozen(),
                            compute: g.compute.frozen(),
                            streams: g.streams.clone(),
                            ..*g
                        };
                        (k.clone(), g)
                    })
                    .collect();
                let p = Process {
                    hello: p.hello.clone(),
                    gpus,
                    untraced: p.untraced.clone(),
                    container_id: p.container_id.clone(),
                    pod_uid: p.pod_uid.clone(),
                    mnt_ns: p.mnt_ns.clone(),
                    oldest_pending_kernel: p.oldest_pending_kernel.clone(),
                    ..*p
                };
                (pid, p)
            })
            .collect();
        let gpus = self
            .gpus
            .iter()
            .map(|(k, g)| {
                let g = Gpu {
                    index: g.index,
                    busy: g.busy.frozen(),
                    newest_at: g.newest_at,
                };
                (k.clone(), g)
            })
            .collect();
        State {
            processes,
            gpus,
            rejected: self.rejected.clone(),
            untraced_reason: self.untraced_reason.clone(),
            connections_by_peer: BTreeMap::new(),
            writers: BTreeMap::new(),
            stuck: Vec::new(),
            ..*self
        }
    }

    /// Asks the processes `r` names to capture, those of `requester`'s own user only (a capture
    /// makes them write files: no one may have another user's processes write); the told and
    /// why none were. Sent without waiting (a process whose socket is full is not told).
    pub fn capture(&mut self, requester: &Peer, r: &CaptureRequest) -> CaptureReply {
        let c = &r.capture;
        let refuse = |why: String| CaptureReply {
            told: Vec::new(),
            refused: Some(why),
        };
        if !c.last && !(1..=MAX_CAPTURE_SECONDS).contains(&c.seconds) {
            return refuse(format!("seconds must be 1 to {MAX_CAPTURE_SECONDS}"));
        }
        if !c.dir.starts_with('/') {
            return refuse("the directory must be an absolute path".into());
        }
        let targets: Vec<u32> = self
            .processes
            .iter()
            .filter(|(pid, p)| !p.ended && r.pid.is_none_or(|want| want == **pid))
            .filter(|(_, p)| p.uid == requester.uid && same_mounts(p, requester))
            .map(|(&pid, _)| pid)
            .collect();
        let frame = crate::wire::encode(&Message::Capture(c.clone()));
        let mut told = Vec::new();
        for pid in targets {
            let Some(w) = self.writers.get(&pid) else {
                continue;
            };
            let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
            if rustix::net::send(w, &frame, flags).is_ok_and(|n| n == frame.len()) {
                told.push(pid);
            }
        }
        let refused = told.is_empty().then(|| self.why_not(requester, r.pid));
        CaptureReply { told, refused }
    }

    /// Why a capture for `pid` (or all) asked nothing.
    fn why_not(&self, requester: &Peer, pid: Option<u32>) -> String {
        let Some(p) = pid else {
            return "no process of yours (in your mount namespace) is reporting here now".into();
        };
        match self.processes.get(&p) {
            Some(x) if x.uid != requester.uid => format!("process {p} is another user's"),
            Some(x) if !same_mounts(x, requester) => format!(
                "process {p} sees other mounts than yours (another container): the directory \
                 would not be the one you name"
            ),
            Some(x) if !x.ended => format!("process {p} could not be told (its socket is full)"),
            _ => format!("no process {p} is reporting here now"),
        }
    }

    /// A connection of the process `peer_pid` closed.
    pub fn closed(&mut self, peer_pid: u32) {
        self.connections_open -= 1;
        if let Some(n) = self.connections_by_peer.get_mut(&peer_pid) {
            *n -= 1;
            if *n == 0 {
                self.connections_by_peer.remove(&peer_pid);
            }
        }
    }

    pub fn reject(&mut self, reason: &'static str) {
        *self.rejected.entry(reason).or_default() += 1;
    }

    /// Applies `m`, sent on a connection whose sender is `peer_pid` and which has said hello
    /// as `*hello_pid` so far (set here by a hello).
    pub fn apply(
        &mut self,
        peer_pid: u32,
        hello_pid: &mut Option<u32>,
        m: Message,
    ) -> Result<(), Refused> {
        self.apply_from(&Peer::pid_only(peer_pid), hello_pid, m)
    }

    /// [`State::apply`], the sender known by [`Peer`]: a hello may name its pid in its own pid
    /// namespace (a container's); the process is kept, and labelled, by its pid here.
    pub fn apply_from(
        &mut self,
        peer: &Peer,
        hello_pid: &mut Option<u32>,
        m: Message,
    ) -> Result<(), Refused> {
        let peer_pid = peer.pid;
        match m {
            Message::Hello(h) => {
                if hello_pid.is_some() {
                    return Err(Refused::SecondHello);
                }
                self.forget_ended(Instant::now());
                if !peer.is(h.pid) {
                    return Err(Refused::PeerPid);
                }
                let h = Hello { pid: peer_pid, ..h };
                match self.processes.get(&h.pid) {
                    // Its connection is still open: one voice per process.
                    Some(p) if !p.ended => return Err(Refused::PidConnected),
                    Some(_) => {}
                    None if self.processes.len() >= MAX_PROCESSES => {
                        return Err(Refused::TooManyProcesses)
                    }
                    None => {}
                }
                *hello_pid = Some(h.pid);
                let hello = Hello {
                    host: cut(h.host, MAX_LABEL_BYTES),
                    command: cut(h.command, MAX_LABEL_BYTES),
                    job: h.job.map(|j| cut(j, MAX_LABEL_BYTES)),
                    ..h
                };
                // A pid seen again after it ended is a new process (pids are reused): its
                // figures start anew (the old one's runs were given back when it ended).
                let old = self.processes.insert(
                    hello.pid,
                    Process {
                        hello,
                        ns_pid: peer.ns_pid,
                        uid: peer.uid,
                        mnt_ns: peer.mnt_ns.clone(),
                        container_id: peer.container_id.clone(),
                        pod_uid: peer.pod_uid.clone(),
                        ..Process::default()
                    },
                );
                if let Some(old) = old {
                    self.process_gpus -= old.gpus.len();
                }
                Ok(())
            }
            Message::Untraced(why) => {
                let pid = hello_pid.ok_or(Refused::NoHello)?;
                if let Some(p) = self.processes.get_mut(&pid) {
                    p.untraced = Some(cut(why, MAX_REASON_BYTES));
                }
                Ok(())
            }
            Message::Batch(b) => {
                let pid = hello_pid.ok_or(Refused::NoHello)?;
                self.apply_batch(pid, b)
            }
            Message::Capture(_) | Message::CaptureRequest(_) | Message::CaptureReply(_) => {
                Err(Refused::Unexpected)
            }
        }
    }

    fn apply_batch(&mut self, pid: u32, b: Batch) -> Result<(), Refused> {
        let Some(p) = self.processes.get_mut(&pid) else {
            return Err(Refused::NoHello);
        };
        if b.seq <= p.last_seq {
            return Err(Refused::Replay);
        }
        // Every key first: a batch naming too many GPUs changes nothing.
        let keys: Vec<GpuKey> = b
            .devices
            .iter()
            .map(|d| match &d.uuid {
                Some(u) if is_uuid(u) => u.clone(),
                _ => format!("unknown-device-{}", d.device),
            })
            .collect();
        // A GPU named twice in one batch (the sender's devices can repeat a UUID) is one GPU:
        // the counts below are of distinct names.
        let distinct: std::collections::BTreeSet<&GpuKey> = keys.iter().collect();
        let new = distinct
            .iter()
            .filter(|k| !self.gpus.contains_key(**k))
            .count();
        let mine = distinct
            .iter()
            .filter(|k| !p.gpus.contains_key(**k))
            .count();
        if p.gpus.len() + mine > MAX_DEVICES {
            return Err(Refused::TooManyGpus);
        }
        if self.process_gpus + mine > MAX_PROCESS_GPUS {
            return Err(Refused::TooManySeries);
        }
        if !self.make_room_for_gpus(new) {
            return Err(Refused::TooManyGpus);
        }
        let Some(p) = self.processes.get_mut(&pid) else {
            return Err(Refused::NoHello);
        };
        self.process_gpus += mine;
        p.batches_lost += b.seq - p.last_seq - 1;
        p.last_seq = b.seq;
        p.traced_ns = p.traced_ns.max(b.traced_ns);
        p.dropped_by_cupti = p.dropped_by_cupti.max(b.dropped_by_cupti_total);
        p.dropped_by_cutrace = p.dropped_by_cutrace.max(b.dropped_by_cutrace_total);
        p.launches_pending = b.launches_pending;
        p.oldest_pending_ns = b.oldest_pending_ns;
        // Demangled (bounded, and kept only while that launch is the oldest pending).
        p.oldest_pending_kernel = b.oldest_pending_kernel.map(|k| {
            cut(
                cutrace_analysis::names::display_name(&k).into_owned(),
                MAX_LABEL_BYTES,
            )
        });
        p.unfinished_ended = p.unfinished_ended.max(b.unfinished_ended_total);
        if let Some(after) = self.stuck_after_ns {
            if b.oldest_pending_ns >= after && !p.stuck_told && self.stuck.len() < MAX_STUCK_EVENTS
            {
                p.stuck_told = true;
                self.stuck.push(Stuck {
                    pid,
                    command: p.hello.command.clone(),
                    rank: p.hello.rank,
                    age_ns: b.oldest_pending_ns,
                    kernel: p.oldest_pending_kernel.clone(),
                });
            }
            if b.oldest_pending_ns < after {
                // It completed: a later hang is told again.
                p.stuck_told = false;
            }
        }
        let now = Instant::now();
        let (mut open, mut implausible) = (0isize, 0u64);
        let mut touched = Vec::with_capacity(keys.len());
        for (d, key) in b.devices.into_iter().zip(keys) {
            let gpu = self.gpus.entry(key.clone()).or_insert_with(|| Gpu {
                index: d.device,
                ..Gpu::default()
            });
            let mine = p.gpus.entry(key.clone()).or_insert_with(|| ProcessGpu {
                index: d.device,
                ..ProcessGpu::default()
            });
            let before = gpu.busy.open_runs() + mine.open_runs();
            let (newest, at) = (gpu.busy.newest_end(), gpu.newest_at);
            // Nothing may end further ahead of the GPU's newest end than the time since it rose
            // (and a margin for records still on their way).
            let limit = at.map_or(Ns::MAX, |t| {
                let since = now.saturating_duration_since(t).as_nanos();
                newest
                    .saturating_add(Ns::try_from(since).unwrap_or(Ns::MAX))
                    .saturating_add(MAX_AHEAD_NS)
            });
            let plausible = |&&(s, e): &&(Ns, Ns)| e <= limit && e.saturating_sub(s) <= MAX_RUN_NS;
            for s in &d.streams {
                for &(start, end) in s.runs.iter().filter(plausible) {
                    mine.busy.add(start, end);
                    gpu.busy.add(start, end);
                    mine.add_stream_run(s.stream, start, end);
                }
                implausible += s.runs.iter().filter(|r| !plausible(r)).count() as u64;
            }
            for &(start, end) in d.comm_runs.iter().filter(plausible) {
                mine.comm.add(start, end);
            }
            for &(start, end) in d.compute_runs.iter().filter(plausible) {
                mine.compute.add(start, end);
            }
            if gpu.busy.newest_end() > newest {
                gpu.newest_at = Some(now);
            }
            mine.kernels = mine.kernels.saturating_add(d.kernels);
            mine.kernel_sum_ns = mine.kernel_sum_ns.saturating_add(d.kernel_sum_ns);
            mine.copies = mine.copies.saturating_add(d.copies);
            mine.copy_bytes = mine.copy_bytes.saturating_add(d.copy_bytes);
            mine.latency.merge(&d.latency);
            open += (gpu.busy.open_runs() + mine.open_runs()) as isize - before as isize;
            touched.push(key);
        }
        self.implausible_runs += implausible;
        self.open_runs = self.open_runs.saturating_add_signed(open);
        if self.open_runs > self.run_budget.unwrap_or(OPEN_RUN_BUDGET) {
            self.shrink(pid, &touched);
        }
        Ok(())
    }

    /// Cuts the unions of `pid`'s GPUs `keys` (and those GPUs' own) to their share of the open
    /// run budget.
    fn shrink(&mut self, pid: u32, keys: &[GpuKey]) {
        let unions = 3 * self.process_gpus + self.gpus.len();
        let budget = self.run_budget.unwrap_or(OPEN_RUN_BUDGET);
        let share = (budget / unions.max(1)).max(MIN_RUN_SHARE);
        let mut freed = 0;
        for key in keys {
            if let Some(g) = self.gpus.get_mut(key) {
                let n = g.busy.open_runs();
                g.busy.shrink_to(share);
                freed += n - g.busy.open_runs();
            }
            if let Some(g) = self
                .processes
                .get_mut(&pid)
                .and_then(|p| p.gpus.get_mut(key))
            {
                let n = g.open_runs();
                for u in [&mut g.busy, &mut g.comm, &mut g.compute] {
                    u.shrink_to(share);
                }
                freed += n - g.open_runs();
            }
        }
        self.open_runs -= freed;
    }

    /// The connection of process `pid` closed.
    /// Its unions are sealed: their totals stay, their runs are given back.
    pub fn ended(&mut self, pid: u32) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.ended = true;
            p.ended_at = Some(Instant::now());
            // Nothing is pending in a process that is gone.
            p.launches_pending = 0;
            p.oldest_pending_ns = 0;
            p.oldest_pending_kernel = None;
            let mut freed = 0;
            for g in p.gpus.values_mut() {
                freed += g.open_runs();
                g.busy.seal();
                g.comm.seal();
                g.compute.seal();
            }
            self.open_runs -= freed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{DeviceBatch, StreamRuns};

    fn hello(pid: u32) -> Message {
        Message::Hello(Hello {
            pid,
            host: "h".into(),
            command: "app".into(),
            ..Hello::default()
        })
    }

    fn batch(seq: u64, runs: Vec<(Ns, Ns)>) -> Message {
        Message::Batch(Batch {
            seq,
            devices: vec![DeviceBatch {
                device: 0,
                uuid: Some("GPU-a".into()),
                kernels: runs.len() as u64,
                streams: vec![StreamRuns { stream: 7, runs }],
                ..DeviceBatch::default()
            }],
            ..Batch::default()
        })
    }

    #[test]
    fn each_stream_keeps_its_kernel_time_and_streams_past_eight_share_one() {
        let mut s = State::default();
        let mut c = None;
        s.apply(10, &mut c, hello(10)).unwrap();
        let streams = (0..10u32)
            .map(|k| StreamRuns {
                stream: 100 + k,
                runs: vec![(
                    1_000 * u64::from(k),
                    1_000 * u64::from(k) + 10 + u64::from(k),
                )],
            })
            .collect();
        let b = |seq, streams| {
            Message::Batch(Batch {
                seq,
                devices: vec![DeviceBatch {
                    device: 0,
                    uuid: Some("GPU-a".into()),
                    streams,
                    ..DeviceBatch::default()
                }],
                ..Batch::default()
            })
        };
        s.apply(10, &mut c, b(1, streams)).unwrap();
        // Stream 100 again, in a later batch: a run that touches the last and one that overlaps
        // it add only what is new.
        let again = vec![StreamRuns {
            stream: 100,
            runs: vec![(10, 20), (15, 40)],
        }];
        s.apply(10, &mut c, b(2, again)).unwrap();
        let g = &s.processes[&10].gpus["GPU-a"];
        assert_eq!(g.streams.len(), MAX_STREAMS_PER_GPU);
        assert_eq!(g.streams[&100].busy_ns, 10 + 30);
        assert_eq!(g.streams[&107].busy_ns, 17);
        // Streams 108 and 109, past the first eight: 18 + 19 ns together.
        assert_eq!(g.other_streams_ns, 37);
        let total: Ns = g.streams.values().map(|b| b.busy_ns).sum::<Ns>() + g.other_streams_ns;
        assert_eq!(total, g.busy.total_ns());
        let text = crate::prom::render(&s, "h");
        let value = |stream: &str| {
            let want = format!("stream=\"{stream}\"");
            text.lines()
                .find(|l| !l.starts_with('#') && l.contains(&want))
                .and_then(|l| l.rsplit_once(' '))
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(value("100").as_deref(), Some("0.000000040"), "{text}");
        assert_eq!(value("other").as_deref(), Some("0.000000037"), "{text}");
        assert_eq!(value("108"), None, "{text}");
    }

    #[test]
    fn two_processes_on_one_gpu_give_a_union_not_a_sum() {
        let mut s = State::default();
        let (mut a, mut b) = (None, None);
        s.apply(10, &mut a, hello(10)).unwrap();
        s.apply(11, &mut b, hello(11)).unwrap();
        s.apply(10, &mut a, batch(1, vec![(0, 100), (200, 300)]))
            .unwrap();
        s.apply(11, &mut b, batch(1, vec![(50, 250)])).unwrap();
        let key = "GPU-a";
        assert_eq!(s.processes[&10].gpus[key].busy.total_ns(), 200);
        assert_eq!(s.processes[&11].gpus[key].busy.total_ns(), 200);
        assert_eq!(s.gpus[key].busy.total_ns(), 300);
    }

    #[test]
    fn senders_cannot_speak_for_others_or_replay() {
        let mut s = State::default();
        let mut c = None;
        assert_eq!(
            s.apply(10, &mut c, batch(1, vec![(0, 1)])),
            Err(Refused::NoHello)
        );
        assert_eq!(s.apply(10, &mut c, hello(99)), Err(Refused::PeerPid));
        s.apply(10, &mut c, hello(10)).unwrap();
        assert_eq!(s.apply(10, &mut c, hello(10)), Err(Refused::SecondHello));
        s.apply(10, &mut c, batch(2, vec![(0, 1)])).unwrap();
        assert_eq!(
            s.apply(10, &mut c, batch(2, vec![(5, 6)])),
            Err(Refused::Replay)
        );
        assert_eq!(s.processes[&10].batches_lost, 1);
    }

    #[test]
    fn ended_processes_are_forgotten_after_their_time_and_the_gpu_keeps_theirs() {
        let mut s = State {
            forget_after: Some(Duration::from_secs(60)),
            ..State::default()
        };
        let mut c = None;
        s.apply(10, &mut c, hello(10)).unwrap();
        s.apply(10, &mut c, batch(1, vec![(0, 100)])).unwrap();
        s.ended(10);
        let t = s.processes[&10].ended_at.unwrap();
        s.forget_ended(t + Duration::from_secs(59));
        assert_eq!(s.processes.len(), 1);
        s.forget_ended(t + Duration::from_secs(61));
        assert!(s.processes.is_empty());
        assert_eq!((s.forgotten, s.gpus["GPU-a"].busy.total_ns()), (1, 100));
    }

    fn batch_on(seq: u64, keys: &[String], runs: Vec<(Ns, Ns)>) -> Message {
        Message::Batch(Batch {
            seq,
            devices: keys
                .iter()
                .enumerate()
                .map(|(i, k)| DeviceBatch {
                    device: i as u32,
                    uuid: Some(k.clone()),
                    streams: vec![StreamRuns {
                        stream: 1,
                        runs: runs.clone(),
                    }],
                    ..DeviceBatch::default()
                })
                .collect(),
            ..Batch::default()
        })
    }

    #[test]
    fn a_live_process_cannot_be_spoken_for_by_a_second_connection() {
        let mut s = State::default();
        let (mut a, mut b) = (None, None);
        s.apply(10, &mut a, hello(10)).unwrap();
        assert_eq!(s.apply(10, &mut b, hello(10)), Err(Refused::PidConnected));
        s.apply(10, &mut a, batch(1, vec![(0, 100)])).unwrap();
        s.ended(10);
        // Once it ended, its pid may be a new process's.
        s.apply(10, &mut b, hello(10)).unwrap();
        assert_eq!(s.processes[&10].gpus.len(), 0);
        assert_eq!(s.process_gpus, 0);
    }

    #[test]
    fn a_timestamp_near_the_end_of_time_cannot_freeze_a_gpu() {
        let mut s = State::default();
        let (mut a, mut b) = (None, None);
        s.apply(10, &mut a, hello(10)).unwrap();
        s.apply(11, &mut b, hello(11)).unwrap();
        let t = 1_700_000_000_000_000_000;
        s.apply(10, &mut a, batch(1, vec![(t, t + 100)])).unwrap();
        // A broken record far ahead, and one a day and a half long: both refused.
        s.apply(
            11,
            &mut b,
            batch(1, vec![(Ns::MAX - 10, Ns::MAX), (t, t + 2 * MAX_RUN_NS)]),
        )
        .unwrap();
        assert_eq!(s.implausible_runs, 2);
        s.apply(10, &mut a, batch(2, vec![(t + 1_000, t + 1_500)]))
            .unwrap();
        assert_eq!(s.gpus["GPU-a"].busy.total_ns(), 600);
        assert_eq!(s.gpus["GPU-a"].busy.late_ns(), 0);
    }

    #[test]
    fn a_pending_kernels_name_is_demangled_cut_and_gone_once_nothing_is_pending() {
        let mut s = State {
            stuck_after_ns: Some(1_000),
            ..State::default()
        };
        let mut c = None;
        s.apply(10, &mut c, hello(10)).unwrap();
        let pending = |seq, name: Option<String>, age| {
            Message::Batch(Batch {
                seq,
                launches_pending: 1,
                oldest_pending_ns: age,
                oldest_pending_kernel: name,
                ..Batch::default()
            })
        };
        s.apply(
            10,
            &mut c,
            pending(1, Some("_Z13wait_for_hostPVi".into()), 5_000),
        )
        .unwrap();
        assert_eq!(
            s.processes[&10].oldest_pending_kernel.as_deref(),
            Some("wait_for_host(int volatile*)")
        );
        assert_eq!(
            s.stuck[0].kernel.as_deref(),
            Some("wait_for_host(int volatile*)")
        );
        s.apply(10, &mut c, pending(2, Some("é".repeat(4096)), 5_000))
            .unwrap();
        let k = s.processes[&10].oldest_pending_kernel.clone().unwrap();
        assert!(
            k.len() <= MAX_LABEL_BYTES && k.chars().all(|ch| ch == 'é'),
            "{k}"
        );
        s.apply(10, &mut c, pending(3, None, 0)).unwrap();
        assert_eq!(s.processes[&10].oldest_pending_kernel, None);
    }

    #[test]
    fn labels_are_cut_to_their_bound_at_a_character_boundary() {
        let mut s = State::default();
        let mut c = None;
        let long = "é".repeat(4000);
        let h = Message::Hello(Hello {
            pid: 3,
            host: long.clone(),
            command: long.clone(),
            job: Some(long.clone()),
            ..Hello::default()
        });
        s.apply(3, &mut c, h).unwrap();
        s.apply(3, &mut c, Message::Untraced(long)).unwrap();
        let p = &s.processes[&3];
        assert_eq!((p.hello.host.len(), p.hello.command.len()), (128, 128));
        assert_eq!(p.hello.job.as_deref().map(str::len), Some(128));
        assert_eq!(p.untraced.as_deref().map(str::len), Some(MAX_REASON_BYTES));
    }

    #[test]
    fn the_series_are_bounded_over_all_processes() {
        let mut s = State::default();
        let keys: Vec<String> = (0..MAX_DEVICES).map(|i| format!("GPU-{i}")).collect();
        let procs = (MAX_PROCESS_GPUS / MAX_DEVICES) as u32;
        for pid in 1..=procs + 1 {
            let mut c = None;
            s.apply(pid, &mut c, hello(pid)).unwrap();
            let r = s.apply(pid, &mut c, batch_on(1, &keys, vec![(0, 10)]));
            if pid <= procs {
                r.unwrap();
            } else {
                assert_eq!(r, Err(Refused::TooManySeries));
            }
        }
        assert_eq!(s.process_gpus, MAX_PROCESS_GPUS);
    }

    #[test]
    fn a_full_gpu_table_makes_room_by_dropping_gpus_no_process_reports_on() {
        let mut s = State {
            forget_after: Some(Duration::from_secs(1)),
            ..State::default()
        };
        // Four processes fill the table with 256 made-up GPUs, then end and are forgotten.
        for pid in 1..=4u32 {
            let keys: Vec<String> = (0..MAX_DEVICES).map(|i| format!("GPU-{pid}-{i}")).collect();
            let mut c = None;
            s.apply(pid, &mut c, hello(pid)).unwrap();
            s.apply(pid, &mut c, batch_on(1, &keys, vec![(0, 10)]))
                .unwrap();
        }
        assert_eq!(s.gpus.len(), MAX_GPUS);
        let mut c = None;
        s.apply(9, &mut c, hello(9)).unwrap();
        // While they live, their GPUs are theirs: no room.
        assert_eq!(
            s.apply(9, &mut c, batch(1, vec![(0, 1)])),
            Err(Refused::TooManyGpus)
        );
        for pid in 1..=4 {
            s.ended(pid);
        }
        s.forget_ended(Instant::now() + Duration::from_secs(2));
        s.apply(9, &mut c, batch(2, vec![(0, 1)])).unwrap();
        assert_eq!((s.gpus.len(), s.gpus_forgotten), (MAX_GPUS, 1));
        assert!(s.gpus.contains_key("GPU-a"));
    }

    #[test]
    fn open_runs_stay_within_the_budget() {
        let mut s = State {
            run_budget: Some(1_000),
            ..State::default()
        };
        for pid in 1..=8u32 {
            let mut c = None;
            s.apply(pid, &mut c, hello(pid)).unwrap();
            for seq in 1..=10u64 {
                // 100 disjoint runs a batch, interleaved between processes: nothing merges.
                let base = seq * 1_000_000 + pid as u64 * 10;
                let runs = (0..100)
                    .map(|k| (base + k * 1000, base + k * 1000 + 1))
                    .collect();
                s.apply(pid, &mut c, batch(seq, runs)).unwrap();
                let exact: usize = s.gpus.values().map(|g| g.busy.open_runs()).sum::<usize>()
                    + s.processes
                        .values()
                        .flat_map(|p| p.gpus.values())
                        .map(|g| g.open_runs())
                        .sum::<usize>();
                assert_eq!(s.open_runs, exact);
                assert!(s.open_runs <= 1_000 + 2 * 100, "{}", s.open_runs);
            }
        }
        // Every process's own busy is still exact: its runs were retired, not lost.
        assert!(s
            .processes
            .values()
            .all(|p| p.gpus["GPU-a"].busy.total_ns() == 1_000));
    }

    #[test]
    fn a_snapshot_renders_as_the_state_does_and_holds_no_runs() {
        let mut s = State::default();
        let mut c = None;
        s.apply(10, &mut c, hello(10)).unwrap();
        s.apply(10, &mut c, batch(1, vec![(0, 100), (200, 300)]))
            .unwrap();
        let snap = s.snapshot();
        assert_eq!(
            crate::prom::render(&snap, "h"),
            crate::prom::render(&s, "h")
        );
        assert_eq!(snap.gpus["GPU-a"].busy.open_runs(), 0);
        assert_eq!(snap.gpus["GPU-a"].busy.total_ns(), 200);
    }

    #[test]
    fn a_process_in_a_container_is_kept_by_its_pid_here_with_its_container_and_pod() {
        let mut s = State::default();
        let peer = Peer {
            pid: 4242,
            uid: 1000,
            mnt_ns: None,
            ns_pid: Some(7),
            container_id: Some("c".repeat(64)),
            pod_uid: Some("p".into()),
        };
        let mut c = None;
        // It names its own pid, 7, which is not another process's claim.
        s.apply_from(&peer, &mut c, hello(7)).unwrap();
        s.apply_from(&peer, &mut c, batch(1, vec![(0, 100)]))
            .unwrap();
        let p = &s.processes[&4242];
        assert_eq!((p.hello.pid, p.ns_pid), (4242, Some(7)));
        assert_eq!(p.container_id.as_deref(), Some("c".repeat(64).as_str()));
        let t = crate::prom::render(&s, "h");
        assert!(t.contains("pid=\"4242\""), "{t}");
        assert!(t.contains("pod_uid=\"p\""), "{t}");
        // Any other pid is still refused.
        let mut d = None;
        assert_eq!(s.apply_from(&peer, &mut d, hello(8)), Err(Refused::PeerPid));
    }

    #[test]
    fn a_capture_reaches_only_the_requesters_own_live_processes() {
        let mut s = State::default();
        let ns = |n: &str| Some(format!("mnt:[{n}]"));
        let mine = Peer {
            pid: 10,
            uid: 1000,
            mnt_ns: ns("1"),
            ..Peer::default()
        };
        let theirs = Peer {
            pid: 11,
            uid: 1001,
            mnt_ns: ns("1"),
            ..Peer::default()
        };
        // Same user, another container.
        let elsewhere = Peer {
            pid: 12,
            uid: 1000,
            mnt_ns: ns("2"),
            ..Peer::default()
        };
        let (mut a, mut b, mut e) = (None, None, None);
        s.apply_from(&mine, &mut a, hello(10)).unwrap();
        s.apply_from(&theirs, &mut b, hello(11)).unwrap();
        s.apply_from(&elsewhere, &mut e, hello(12)).unwrap();
        let (far_away, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
        s.writers.insert(12, far_away);
        let (ours, mut ours_far) = std::os::unix::net::UnixStream::pair().unwrap();
        let (other, mut other_far) = std::os::unix::net::UnixStream::pair().unwrap();
        s.writers.insert(10, ours);
        s.writers.insert(11, other);
        let req = |pid, dir: &str, seconds| CaptureRequest {
            pid,
            capture: crate::wire::Capture {
                dir: dir.into(),
                seconds,
                last: false,
            },
        };
        let me = Peer {
            pid: 99,
            uid: 1000,
            mnt_ns: ns("1"),
            ..Peer::default()
        };
        let r = s.capture(&me, &req(None, "/cap", 5));
        assert_eq!((r.told, r.refused), (vec![10], None));
        let r = s.capture(&me, &req(Some(12), "/cap", 5));
        assert!(r.told.is_empty() && r.refused.unwrap().contains("other mounts"));
        let r = s.capture(&me, &req(Some(11), "/cap", 5));
        assert!(r.told.is_empty() && r.refused.unwrap().contains("another user's"));
        for bad in [
            req(None, "relative", 5),
            req(None, "/cap", 0),
            req(None, "/cap", 3601),
        ] {
            assert!(s.capture(&me, &bad).told.is_empty());
        }
        // Process 10 got one capture frame, process 11 none.
        ours_far.set_nonblocking(true).unwrap();
        other_far.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut ours_far, &mut got);
        let (m, used) = crate::wire::split_frame(&got).unwrap().unwrap();
        assert_eq!(used, got.len());
        assert!(matches!(m, Message::Capture(c) if c.dir == "/cap" && c.seconds == 5));
        let mut none = Vec::new();
        let _ = std::io::Read::read_to_end(&mut other_far, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn the_gpus_idle_gaps_count_once_they_are_final() {
        let mut s = State::default();
        let mut c = None;
        s.apply(10, &mut c, hello(10)).unwrap();
        let t0 = 1_700_000_000_000_000_000;
        let s_ = 1_000_000_000;
        // Runs of 1 s with gaps of 2 s, 50 µs and 30 s, then one 200 s later.
        let runs = vec![
            (t0, t0 + s_),
            (t0 + 3 * s_, t0 + 4 * s_),
            (t0 + 4 * s_ + 50_000, t0 + 5 * s_),
            (t0 + 35 * s_, t0 + 36 * s_),
        ];
        s.apply(10, &mut c, batch(1, runs)).unwrap();
        // Nothing is final yet: the newest end is within the horizon of every run.
        assert_eq!(s.gpus["GPU-a"].busy.gaps().buckets.iter().sum::<u64>(), 0);
        s.apply(10, &mut c, batch(2, vec![(t0 + 236 * s_, t0 + 237 * s_)]))
            .unwrap();
        // Every run ending 120 s before the newest is retired: the three gaps between them.
        let g = s.gpus["GPU-a"].busy.gaps();
        assert_eq!(g.sum_ns, 2 * s_ + 50_000 + 30 * s_);
        assert_eq!(g.buckets[2], 1); // 50 µs: ≤ 100 µs
        assert_eq!(g.buckets[7], 1); // 2 s: ≤ 10 s
        assert_eq!(g.buckets[8], 1); // 30 s: ≤ 100 s
        let t = crate::prom::render(&s, "h");
        assert!(
            t.contains(
                "cutrace_gpu_idle_gap_seconds_count{gpu_uuid=\"GPU-a\",gpu=\"0\",host=\"h\"} 3"
            ),
            "{t}"
        );
    }
}
