//! What monitor mode costs per record beside `record`'s path, and what the monitor costs per
//! record it reads, on hand-built CUPTI records (no GPU, no libcupti):
//!
//! - record: each record decoded and written into the native format (chunks encoded and
//!   deflated into a sink, as the writer thread does, without the file);
//! - monitor: each record decoded and folded (`cutrace_monitor::fold`, with the injection's
//!   kernel-name cache), a batch taken, split and encoded every 100,000 records;
//! - the monitor's side: those frames read back (`FrameReader`) and applied to a `State`.
//!
//! Thread CPU time, best of 3. `cargo run --release -p cutrace-inject --example bench_monitor`
//! (`-- N` for N kernels; each comes with its launch call, so 2N records).

use std::collections::HashMap;
use std::ffi::CString;
use std::time::Duration;

use cutrace_cupti::activity::{self, mock, Activity};
use cutrace_inject::decode::Decoder;
use cutrace_monitor::fold::{self, Fold};
use cutrace_monitor::wire::{self, Batch, FrameReader, Hello, Message};
use cutrace_monitor::State;
use cutrace_trace::native::{Header, Tail, Writer};

const BATCH: usize = 100_000;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn best_of_3(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = thread_cpu();
            f();
            thread_cpu() - t
        })
        .min()
        .unwrap_or_default()
}

/// 4 streams on 2 devices, 1–8 µs kernels with small gaps, one name in 16 NCCL's.
fn records(n: usize, names: &[CString]) -> Vec<Vec<u8>> {
    let mut v = Vec::with_capacity(2 * n);
    let mut t = [1_000_000u64; 4];
    for i in 0..n {
        let s = i % 4;
        let len = 1_000 + (i as u64 * 7919) % 7_000;
        let start = t[s] + 200;
        t[s] = start + len;
        let corr = i as u32 + 1;
        v.push(mock::runtime(211, start - 3_000, start - 1_500, corr));
        let name = names[i % names.len()].as_ptr() as usize;
        v.push(mock::kernel(
            start,
            start + len,
            (s / 2) as u32,
            7 + s as u32,
            corr,
            name,
        ));
    }
    v
}

fn record_path(recs: &[Vec<u8>]) -> usize {
    let mut w = Writer::new(std::io::sink(), &Header::default()).expect("a sink takes anything");
    let mut d = Decoder::default();
    let namer = |_: bool, _: u32| Some("cudaLaunchKernel".to_string());
    for (i, r) in recs.iter().enumerate() {
        if let Some(a) = activity::decode(r) {
            d.add(&mut w, &a, &namer);
        }
        if i % BATCH == BATCH - 1 {
            let _ = w.flush();
        }
    }
    let _ = w.finish(&Tail::default());
    recs.len()
}

/// The monitor path; the frames it would send.
fn monitor_path(recs: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Fold::default();
    let mut comm: HashMap<usize, bool> = HashMap::new();
    let mut out = Vec::new();
    let mut seq = 0;
    let mut send = |f: &mut Fold, out: &mut Vec<u8>| {
        let b = f.take(Batch::default());
        for p in fold::split(b, wire::MAX_PAYLOAD - 4096, &mut || {
            seq += 1;
            seq
        }) {
            out.extend(wire::encode(&Message::Batch(p)));
        }
    };
    for (i, r) in recs.iter().enumerate() {
        match activity::decode(r) {
            Some(Activity::Kernel(k)) => {
                let c = *comm.entry(k.name_ptr).or_insert_with(|| {
                    // SAFETY: the names live in `main` for the whole run.
                    let name = unsafe { activity::cstr_at(k.name_ptr) }.unwrap_or_default();
                    cutrace_trace::comm::is_comm_kernel(&name)
                });
                f.kernel(k.device, k.stream, k.start, k.end, c, k.correlation_id);
            }
            Some(Activity::Api(a)) => f.launch(a.correlation_id, a.end, a.cbid == 211),
            _ => {}
        }
        if i % BATCH == BATCH - 1 {
            send(&mut f, &mut out);
        }
    }
    send(&mut f, &mut out);
    out
}

fn apply(frames: &[u8]) -> State {
    let mut s = State::default();
    let mut hello = None;
    let pid = std::process::id();
    s.apply(
        pid,
        &mut hello,
        Message::Hello(Hello {
            pid,
            ..Hello::default()
        }),
    )
    .expect("a hello of our own pid");
    let mut r = FrameReader::default();
    let mut cur = std::io::Cursor::new(frames);
    while let Ok(Some(m)) = r.next(&mut cur) {
        let _ = s.apply(pid, &mut hello, m);
    }
    s
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let names: Vec<CString> = (0..16)
        .map(|i| {
            CString::new(if i == 0 {
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL".to_string()
            } else {
                format!("_Z6kernel{i}Pf")
            })
            .expect("no NUL")
        })
        .collect();
    let recs = records(n, &names);
    let per = |d: Duration| d.as_nanos() as f64 / recs.len() as f64;
    let rec = best_of_3(|| {
        std::hint::black_box(record_path(&recs));
    });
    let mut frames = Vec::new();
    let mon = best_of_3(|| frames = monitor_path(&recs));
    let before = peak_kib();
    let mut busy = 0;
    let agent = best_of_3(|| {
        let s = apply(&frames);
        busy = s.gpus.values().map(|g| g.busy.total_ns()).sum();
    });
    println!(
        "{} records ({n} kernels + their launch calls), {} bytes of frames ({:.2} per record)",
        recs.len(),
        frames.len(),
        frames.len() as f64 / recs.len() as f64
    );
    println!(
        "record path (decode + native chunks):  {:7.1} ns/record",
        per(rec)
    );
    println!(
        "monitor path (decode + fold + frames): {:7.1} ns/record ({:+.1} against record)",
        per(mon),
        per(mon) - per(rec)
    );
    println!(
        "monitor side (read + apply):           {:7.1} ns/record: {:.0} ms of CPU per million \
         records (ns per record = ms per million); process peak {} MiB before, {} MiB after; busy {busy} ns",
        per(agent),
        per(agent),
        before / 1024,
        peak_kib() / 1024
    );
}
