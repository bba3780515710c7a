//! What the monitor knows: every process that said hello, with its own busy per GPU, and each
//! GPU's busy as one union over all its processes (never their sum). Messages are applied in
//! the order each connection sends them; the state is bounded (processes, GPUs, open runs).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cutrace_trace::Ns;

use crate::union::WatermarkUnion;
use crate::wire::{Batch, Hello, Latency, Message, MAX_DEVICES};

/// Most processes kept; a hello past this is refused (and counted).
pub const MAX_PROCESSES: usize = 4096;
/// Most GPUs kept, across processes.
pub const MAX_GPUS: usize = 256;

/// A GPU: its UUID (`GPU-…`), or `unknown-device-N` before the process saw CUPTI's device
/// record (N its CUPTI device id). Processes share a GPU by UUID, whatever their device ids.
pub type GpuKey = String;

/// A GPU's union over its processes, with the device id its first process gave it.
#[derive(Debug, Default, Clone)]
pub struct Gpu {
    pub index: u32,
    pub busy: WatermarkUnion,
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
}

impl ProcessGpu {
    /// Communication time during which no other kernel of the process ran on the GPU:
    /// union(all) − union(compute), which is union(comm) − union(comm) ∩ union(compute).
    pub fn exposed_comm_ns(&self) -> Ns {
        self.busy.total_ns().saturating_sub(self.compute.total_ns())
    }
}

#[derive(Debug, Default, Clone)]
pub struct Process {
    pub hello: Hello,
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
    #[error("too many GPUs")]
    TooManyGpus,
    #[error("a batch sequence number that does not rise")]
    Replay,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::NoHello => "no_hello",
            Refused::SecondHello => "second_hello",
            Refused::PeerPid => "peer_pid",
            Refused::TooManyProcesses => "too_many_processes",
            Refused::TooManyGpus => "too_many_gpus",
            Refused::Replay => "replay",
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
        self.processes.retain(|_, p| {
            p.ended_at
                .is_none_or(|t| now.saturating_duration_since(t) < after)
        });
        self.forgotten += (before - self.processes.len()) as u64;
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
        match m {
            Message::Hello(h) => {
                if hello_pid.is_some() {
                    return Err(Refused::SecondHello);
                }
                self.forget_ended(Instant::now());
                if h.pid != peer_pid {
                    return Err(Refused::PeerPid);
                }
                if !self.processes.contains_key(&h.pid) && self.processes.len() >= MAX_PROCESSES {
                    return Err(Refused::TooManyProcesses);
                }
                *hello_pid = Some(h.pid);
                // A pid seen again is a new process (pids are reused): its figures start anew.
                self.processes.insert(
                    h.pid,
                    Process {
                        hello: h,
                        ..Process::default()
                    },
                );
                Ok(())
            }
            Message::Untraced(why) => {
                let pid = hello_pid.ok_or(Refused::NoHello)?;
                if let Some(p) = self.processes.get_mut(&pid) {
                    p.untraced = Some(why);
                }
                Ok(())
            }
            Message::Batch(b) => {
                let pid = hello_pid.ok_or(Refused::NoHello)?;
                self.apply_batch(pid, b)
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
            .map(|d| {
                d.uuid
                    .clone()
                    .unwrap_or_else(|| format!("unknown-device-{}", d.device))
            })
            .collect();
        let new = keys.iter().filter(|k| !self.gpus.contains_key(*k)).count();
        let mine = keys.iter().filter(|k| !p.gpus.contains_key(*k)).count();
        if self.gpus.len() + new > MAX_GPUS || p.gpus.len() + mine > MAX_DEVICES {
            return Err(Refused::TooManyGpus);
        }
        p.batches_lost += b.seq - p.last_seq - 1;
        p.last_seq = b.seq;
        p.traced_ns = p.traced_ns.max(b.traced_ns);
        p.dropped_by_cupti = p.dropped_by_cupti.max(b.dropped_by_cupti_total);
        p.dropped_by_cutrace = p.dropped_by_cutrace.max(b.dropped_by_cutrace_total);
        p.launches_pending = b.launches_pending;
        p.oldest_pending_ns = b.oldest_pending_ns;
        for (d, key) in b.devices.into_iter().zip(keys) {
            let gpu = self.gpus.entry(key.clone()).or_insert_with(|| Gpu {
                index: d.device,
                busy: WatermarkUnion::default(),
            });
            let mine = p.gpus.entry(key).or_insert_with(|| ProcessGpu {
                index: d.device,
                ..ProcessGpu::default()
            });
            for s in &d.streams {
                for &(start, end) in &s.runs {
                    mine.busy.add(start, end);
                    gpu.busy.add(start, end);
                }
            }
            for &(start, end) in &d.comm_runs {
                mine.comm.add(start, end);
            }
            for &(start, end) in &d.compute_runs {
                mine.compute.add(start, end);
            }
            mine.kernels = mine.kernels.saturating_add(d.kernels);
            mine.kernel_sum_ns = mine.kernel_sum_ns.saturating_add(d.kernel_sum_ns);
            mine.copies = mine.copies.saturating_add(d.copies);
            mine.copy_bytes = mine.copy_bytes.saturating_add(d.copy_bytes);
            mine.latency.merge(&d.latency);
        }
        Ok(())
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
            for g in p.gpus.values_mut() {
                g.busy.seal();
                g.comm.seal();
                g.compute.seal();
            }
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
}
