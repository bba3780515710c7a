//! What an injected process keeps between two batches: its records folded into per-GPU
//! summaries (kernel intervals per stream, communication kernels, copies, launch-to-start
//! latency), pure and bounded, so the injected library only feeds it records.

use std::collections::{BTreeMap, HashMap};

use cutrace_trace::Ns;

use crate::wire::{Batch, DeviceBatch, Latency, StreamRuns, MAX_DEVICES};

/// Kernel launches kept while their kernel has not completed; past this the newest are not
/// kept (the oldest, which a stuck kernel is, stay).
const MAX_PENDING_LAUNCHES: usize = 65_536;

/// Bytes of an unfinished kernel's name kept and sent.
pub const MAX_NAME_BYTES: usize = 512;

/// Correlation ids kept waiting for their other half (a launch call for its kernel, or the
/// reverse), per generation; two generations are kept, so at most twice this.
const PENDING_PER_GENERATION: usize = 65_536;

#[derive(Debug, Default)]
struct DeviceAcc {
    /// Kernel intervals per stream, as they came.
    streams: BTreeMap<u32, Vec<(Ns, Ns)>>,
    comm: Vec<(Ns, Ns)>,
    compute: Vec<(Ns, Ns)>,
    kernels: u64,
    kernel_sum_ns: Ns,
    copies: u64,
    copy_bytes: u64,
    latency: Latency,
}

/// Two generations of a map, so the oldest entries fall out when it fills.
#[derive(Debug, Default)]
struct Pending<V> {
    new: HashMap<u32, V>,
    old: HashMap<u32, V>,
}

impl<V> Pending<V> {
    fn insert(&mut self, k: u32, v: V) {
        if self.new.len() >= PENDING_PER_GENERATION {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(k, v);
    }
    fn take(&mut self, k: u32) -> Option<V> {
        self.new.remove(&k).or_else(|| self.old.remove(&k))
    }
}

/// One process's records since its last batch.
#[derive(Debug, Default)]
pub struct Fold {
    devices: BTreeMap<u32, DeviceAcc>,
    uuids: BTreeMap<u32, String>,
    /// Launch calls' end by correlation id, waiting for their kernel.
    launches: Pending<Ns>,
    /// Kernels' (device, start) by correlation id, waiting for their launch call.
    kernels: Pending<(u32, Ns)>,
    /// Kernel launch calls whose kernel has not completed: (end of the call, correlation id),
    /// and the end by correlation id.
    pending: std::collections::BTreeSet<(Ns, u32)>,
    pending_by_corr: HashMap<u32, Ns>,
    /// Kernels CUPTI handed over before they ended (a forced flush; their record has no
    /// timestamps): (device, stream, name) by correlation id, while their launch is pending.
    unfinished: BTreeMap<u32, (u32, u32, String)>,
    /// Unfinished kernels known since to have ended (a later kernel of their stream
    /// completed): their time is in no union.
    unfinished_ended: u64,
    /// Records folded since the last batch.
    records: u64,
    /// Intervals held since the last batch.
    intervals: usize,
}

impl Fold {
    /// CUPTI's device record: the device's UUID, for every later batch.
    pub fn device(&mut self, device: u32, uuid: String) {
        self.uuids.insert(device, uuid);
    }

    fn acc(&mut self, device: u32) -> Option<&mut DeviceAcc> {
        if !self.devices.contains_key(&device) && self.devices.len() >= MAX_DEVICES {
            return None;
        }
        Some(self.devices.entry(device).or_default())
    }

    /// A kernel ran on `device`'s `stream` over `[start, end)`; `comm` when it is a
    /// communication kernel. Its launch latency is measured once its launch call is seen.
    pub fn kernel(&mut self, device: u32, stream: u32, start: Ns, end: Ns, comm: bool, corr: u32) {
        self.records += 1;
        self.unpend(corr);
        if !self.unfinished.is_empty() {
            // Kernels of one stream run in launch order: an unfinished kernel launched before
            // this one on its stream has ended.
            let done: Vec<u32> = self
                .unfinished
                .range(..corr)
                .filter(|(_, (d, s, _))| (*d, *s) == (device, stream))
                .map(|(&c, _)| c)
                .collect();
            for c in done {
                self.unfinished.remove(&c);
                self.unpend(c);
                self.unfinished_ended += 1;
            }
        }
        let launch_end = self.launches.take(corr);
        let Some(d) = self.acc(device) else { return };
        d.kernels += 1;
        d.kernel_sum_ns = d.kernel_sum_ns.saturating_add(end.saturating_sub(start));
        let mut held = 0;
        if end > start {
            d.streams.entry(stream).or_default().push((start, end));
            if comm {
                d.comm.push((start, end));
            } else {
                d.compute.push((start, end));
            }
            held = 2;
        }
        match launch_end {
            Some(api_end) => d.latency.add(start as i64 - api_end as i64),
            None => self.kernels.insert(corr, (device, start)),
        }
        self.intervals += held;
    }

    fn unpend(&mut self, corr: u32) {
        if let Some(end) = self.pending_by_corr.remove(&corr) {
            self.pending.remove(&(end, corr));
        }
    }

    /// A kernel record CUPTI handed over before the kernel ended (a forced flush while it ran:
    /// start and end are 0). Its launch stays pending, now with the kernel's name, until a
    /// later kernel of its stream completes; its time is in no union.
    pub fn unfinished(&mut self, device: u32, stream: u32, corr: u32, name: &str) {
        self.records += 1;
        if self.unfinished.len() < MAX_PENDING_LAUNCHES {
            let name = crate::state::cut(name.to_string(), MAX_NAME_BYTES);
            self.unfinished.insert(corr, (device, stream, name));
        }
    }

    /// The name of the oldest pending launch's kernel, when CUPTI handed over its unfinished
    /// record.
    pub fn oldest_unfinished(&self) -> Option<&str> {
        let &(_, corr) = self.pending.first()?;
        self.unfinished.get(&corr).map(|(_, _, n)| n.as_str())
    }

    /// Unfinished kernels known to have ended since (their time is lost to the unions).
    pub fn unfinished_ended(&self) -> u64 {
        self.unfinished_ended
    }

    /// A launch call (runtime or driver API record) ended at `end`; `kernel` when it launches
    /// a kernel (or a graph of them), whose completion is then waited for.
    pub fn launch(&mut self, corr: u32, end: Ns, kernel: bool) {
        self.records += 1;
        match self.kernels.take(corr) {
            Some((device, start)) => {
                if let Some(d) = self.acc(device) {
                    d.latency.add(start as i64 - end as i64);
                }
            }
            None => {
                self.launches.insert(corr, end);
                if kernel && self.pending.len() < MAX_PENDING_LAUNCHES {
                    self.pending.insert((end, corr));
                    self.pending_by_corr.insert(corr, end);
                }
            }
        }
    }

    /// Kernel launches whose kernel has not completed, and when the oldest of them returned.
    pub fn pending_launches(&self) -> (u64, Option<Ns>) {
        (
            self.pending.len() as u64,
            self.pending.first().map(|&(end, _)| end),
        )
    }

    /// Forgets the pending launches: CUPTI dropped records, so their kernels may never be seen.
    pub fn forget_pending(&mut self) {
        self.pending.clear();
        self.pending_by_corr.clear();
        self.unfinished.clear();
    }

    /// A copy of `bytes` on `device`; its correlation id is not waited for.
    pub fn copy(&mut self, device: u32, bytes: u64, corr: u32) {
        self.records += 1;
        let _ = self.launches.take(corr);
        if let Some(d) = self.acc(device) {
            d.copies += 1;
            d.copy_bytes = d.copy_bytes.saturating_add(bytes);
        }
    }

    /// Records folded since the last batch.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Kernel intervals held since the last batch (the caller bounds it).
    pub fn intervals(&self) -> usize {
        self.intervals
    }

    /// Whether anything arrived since the last batch.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Forgets what was folded since the last batch (it could not be sent); the pending joins
    /// and UUIDs stay.
    pub fn discard(&mut self) {
        self.devices.clear();
        self.records = 0;
        self.intervals = 0;
    }

    /// The batch of what was folded, each stream's intervals merged, and a fresh start.
    /// `seq`, `traced_ns` and the totals are the sender's.
    pub fn take(&mut self, head: Batch) -> Batch {
        let devices = std::mem::take(&mut self.devices);
        self.records = 0;
        self.intervals = 0;
        let mut b = head;
        b.devices = devices
            .into_iter()
            .map(|(device, mut d)| DeviceBatch {
                device,
                uuid: self.uuids.get(&device).cloned(),
                kernels: d.kernels,
                kernel_sum_ns: d.kernel_sum_ns,
                comm_runs: cutrace_analysis::merged_runs(&mut d.comm),
                compute_runs: cutrace_analysis::merged_runs(&mut d.compute),
                copies: d.copies,
                copy_bytes: d.copy_bytes,
                latency: d.latency,
                streams: d
                    .streams
                    .into_iter()
                    .map(|(stream, mut iv)| StreamRuns {
                        stream,
                        runs: cutrace_analysis::merged_runs(&mut iv),
                    })
                    .collect(),
            })
            .collect();
        b
    }
}

/// Splits a batch whose payload would pass `max_payload` bytes into several, each under it:
/// runs are cut between runs, and a device's counts go with its first piece. Each part gets its
/// own sequence number from `next_seq`.
pub fn split(b: Batch, max_payload: usize, next_seq: &mut dyn FnMut() -> u64) -> Vec<Batch> {
    // Runs per list in a piece: the first piece holds two lists (communication and compute),
    // so each list gets half of what fits beside one device's fixed fields.
    let per_piece = (max_payload.saturating_sub(1024) / 32).max(1);
    let head = Batch {
        devices: Vec::new(),
        ..b.clone()
    };
    let mut parts = vec![head.clone()];
    let empty = head.encoded_len();
    let mut used = empty;
    for d in b.devices {
        let mut pieces: Vec<DeviceBatch> = Vec::new();
        let bare = |comm_runs: Vec<(Ns, Ns)>, compute_runs: Vec<(Ns, Ns)>| DeviceBatch {
            device: d.device,
            uuid: d.uuid.clone(),
            comm_runs,
            compute_runs,
            ..DeviceBatch::default()
        };
        let mut comm = d.comm_runs.chunks(per_piece);
        let mut compute = d.compute_runs.chunks(per_piece);
        pieces.push(DeviceBatch {
            comm_runs: comm.next().unwrap_or_default().to_vec(),
            compute_runs: compute.next().unwrap_or_default().to_vec(),
            streams: Vec::new(),
            ..d.clone()
        });
        pieces.extend(comm.map(|c| bare(c.to_vec(), Vec::new())));
        pieces.extend(compute.map(|c| bare(Vec::new(), c.to_vec())));
        for s in &d.streams {
            for c in s.runs.chunks(per_piece) {
                let mut p = bare(Vec::new(), Vec::new());
                p.streams.push(StreamRuns {
                    stream: s.stream,
                    runs: c.to_vec(),
                });
                pieces.push(p);
            }
        }
        for p in pieces {
            // Counted as a device of its own: at most that much, when it joins the last one.
            let len = Batch {
                devices: vec![p.clone()],
                ..Batch::default()
            }
            .encoded_len()
                - empty;
            if used + len > max_payload && used > empty {
                parts.push(head.clone());
                used = empty;
            }
            used += len;
            let last = parts.last_mut().expect("never empty");
            // Pieces of one device in one part join.
            match last.devices.last_mut() {
                Some(x)
                    if x.device == p.device
                        && p.kernels == 0
                        && p.comm_runs.is_empty()
                        && p.compute_runs.is_empty() =>
                {
                    x.streams.extend(p.streams)
                }
                _ => last.devices.push(p),
            }
        }
    }
    for p in &mut parts {
        p.seq = next_seq();
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_merge_per_stream_and_latency_joins_either_way() {
        let mut f = Fold::default();
        f.device(0, "GPU-x".into());
        f.launch(1, 90, true);
        f.kernel(0, 7, 100, 200, false, 1); // latency 10
        f.kernel(0, 7, 200, 300, false, 2); // touching: one run
        f.launch(2, 150, true); // latency 50
        f.launch(5, 400, true); // its kernel never comes
        assert_eq!(f.pending_launches(), (1, Some(400)));
        f.kernel(0, 9, 150, 250, true, 3);
        f.copy(0, 4096, 4);
        let b = f.take(Batch::default());
        assert!(f.is_empty());
        let d = &b.devices[0];
        assert_eq!(d.uuid.as_deref(), Some("GPU-x"));
        assert_eq!((d.kernels, d.kernel_sum_ns), (3, 300));
        assert_eq!(d.streams[0].runs, vec![(100, 300)]);
        assert_eq!(d.streams[1].runs, vec![(150, 250)]);
        assert_eq!(d.comm_runs, vec![(150, 250)]);
        assert_eq!(d.compute_runs, vec![(100, 300)]);
        assert_eq!((d.copies, d.copy_bytes), (1, 4096));
        assert_eq!((d.latency.count(), d.latency.sum_ns), (2, 60));
    }

    #[test]
    fn a_large_batch_is_split_under_the_limit_and_keeps_every_run() {
        let mut f = Fold::default();
        for i in 0..10_000u64 {
            f.kernel(
                (i % 2) as u32,
                (i % 3) as u32,
                i * 10,
                i * 10 + 5,
                false,
                i as u32,
            );
        }
        let b = f.take(Batch::default());
        let want: usize = b
            .devices
            .iter()
            .flat_map(|d| &d.streams)
            .map(|s| s.runs.len())
            .sum();
        let mut seq = 0;
        let parts = split(b, 16 * 1024, &mut || {
            seq += 1;
            seq
        });
        assert!(parts.len() > 5);
        assert!(parts.iter().all(|p| p.encoded_len() <= 16 * 1024));
        let got: usize = parts
            .iter()
            .flat_map(|p| &p.devices)
            .flat_map(|d| &d.streams)
            .map(|s| s.runs.len())
            .sum();
        assert_eq!(got, want);
        let compute: usize = parts
            .iter()
            .flat_map(|p| &p.devices)
            .map(|d| d.compute_runs.len())
            .sum();
        assert_eq!(compute, 10_000);
        let kernels: u64 = parts
            .iter()
            .flat_map(|p| &p.devices)
            .map(|d| d.kernels)
            .sum();
        assert_eq!(kernels, 10_000);
        assert_eq!(parts.last().unwrap().seq, parts.len() as u64);
    }

    #[test]
    fn an_unfinished_kernel_stays_pending_with_its_name_until_its_stream_goes_on() {
        let mut f = Fold::default();
        f.launch(1, 100, true);
        f.unfinished(0, 7, 1, "ncclDevKernel_AllReduce");
        f.launch(2, 110, true);
        f.unfinished(0, 9, 2, "other_stream");
        assert_eq!(f.pending_launches(), (2, Some(100)));
        assert_eq!(f.oldest_unfinished(), Some("ncclDevKernel_AllReduce"));
        // A later kernel of another stream says nothing of stream 7's.
        f.launch(3, 120, true);
        f.kernel(0, 13, 500, 600, false, 3);
        assert_eq!(f.pending_launches(), (2, Some(100)));
        // Nor does an earlier kernel of stream 7, or one of another device's stream 7.
        f.kernel(0, 7, 50, 60, false, 0);
        f.kernel(1, 7, 700, 800, false, 4);
        assert_eq!(f.unfinished_ended(), 0);
        f.launch(5, 130, true);
        f.kernel(0, 7, 900, 950, false, 5);
        assert_eq!(f.pending_launches(), (1, Some(110)));
        assert_eq!(f.oldest_unfinished(), Some("other_stream"));
        assert_eq!(f.unfinished_ended(), 1);
        // Its time is in no union: only the complete kernels ran.
        let b = f.take(Batch::default());
        let runs: Vec<_> = b.devices[0]
            .streams
            .iter()
            .flat_map(|s| s.runs.clone())
            .collect();
        assert_eq!(runs, vec![(50, 60), (900, 950), (500, 600)]);
    }

    #[test]
    fn unfinished_names_are_cut_and_their_count_bounded() {
        let mut f = Fold::default();
        let long = "k".repeat(3 * MAX_NAME_BYTES);
        f.launch(1, 100, true);
        f.unfinished(0, 7, 1, &long);
        assert_eq!(f.oldest_unfinished().map(str::len), Some(MAX_NAME_BYTES));
        for c in 2..(MAX_PENDING_LAUNCHES as u32 + 10) {
            f.unfinished(0, 7, c, "x");
        }
        assert_eq!(f.unfinished.len(), MAX_PENDING_LAUNCHES);
        f.forget_pending();
        assert_eq!(f.oldest_unfinished(), None);
    }
}
