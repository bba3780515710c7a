//! Large genuine native traces: the committed recordings' records written again and again, time
//! and ids moved on each round, into one valid part of about 10 MB (the largest input the
//! memory ceiling covers). Nothing is damaged: the part reads back whole, so what cutrace keeps
//! is every record a real trace of that size holds, and the case checks that a command on it
//! stays under the ceiling. A part holds about 0.35 records per byte, as recorded ones do.

use std::io;
use std::path::Path;

use cutrace_trace::native::Writer;
use cutrace_trace::{Header, Trace};

use super::{Case, Feed, Target};
use crate::rng::Rng;

/// Size of the parts made: the largest input.
pub const PART_BYTES: u64 = 10_000_000;

/// The committed recordings with the most records, read once.
pub struct LargeNative {
    sources: Vec<(String, Trace)>,
}

impl LargeNative {
    pub fn load(repo: &Path) -> io::Result<Self> {
        let mut sources = Vec::new();
        for rel in [
            "tests/fixtures/native/sigkill",
            "tests/fixtures/native/lean/tiny_5000",
        ] {
            let t = cutrace_trace::native::read(&repo.join(rel), &mut |_, _| {})
                .map_err(|e| io::Error::other(format!("{rel}: {e}")))?;
            sources.push((rel.to_string(), t));
        }
        Ok(LargeNative { sources })
    }

    /// One part of about `bytes` from source `which` (0: the SIGKILLed recording, 1: lean
    /// tiny_5000), 4,000 rows a chunk; returns the records written.
    pub fn write(&self, out: &mut Vec<u8>, which: u64, bytes: u64) -> io::Result<u64> {
        let src = &self.sources[which as usize % self.sources.len()].1;
        write_large(src, bytes, 4_000, out)
    }
}

/// Writes `src`'s records round after round, each round shifted past the last in time and in
/// correlation id, flushing a chunk every `rows_per_chunk` rows as a recorder flushes its buffers,
/// until the part reaches `bytes`. Returns the records written. A chunk holds at most one round
/// (`rows_per_chunk` is capped to it): two copies of the same records in one chunk would deflate
/// to almost nothing, which no recording does.
pub fn write_large(
    src: &Trace,
    bytes: u64,
    rows_per_chunk: usize,
    out: &mut Vec<u8>,
) -> io::Result<u64> {
    let header = Header {
        cutrace_version: "fuzz".into(),
        host: Some("fuzz".into()),
        pid: Some(4242),
        kinds: vec!["CONCURRENT_KERNEL".into(), "RUNTIME".into()],
        ..Header::default()
    };
    let mut w = Writer::new(std::mem::take(out), &header)?;
    let ids: Vec<u32> = src.strings.iter().map(|s| w.intern(s)).collect();
    let re = |id: u32| ids.get(id as usize).copied().unwrap_or(0);
    let (lo, hi) = src.bounds_ns().unwrap_or((0, 1));
    let span = hi - lo + 1_000;
    let corr_span = src
        .kernels
        .iter()
        .map(|k| k.correlation_id)
        .chain(src.api_calls.iter().map(|a| a.correlation_id))
        .max()
        .unwrap_or(0)
        + 1;
    let rows_per_chunk = rows_per_chunk
        .min(src.kernels.len() + src.api_calls.len())
        .max(1);
    let mut round = 0u64;
    // Leave room for the last round's chunks and the tail.
    while w.bytes_written() + 64 * 1024 < bytes {
        let dt = round * span;
        let dc = round * corr_span;
        let (mut k, mut a) = (0, 0);
        while k < src.kernels.len() || a < src.api_calls.len() {
            if k < src.kernels.len() {
                let mut r = src.kernels[k].clone();
                r.start_ns += dt;
                r.end_ns += dt;
                r.correlation_id += dc;
                r.name = re(r.name);
                w.push_kernel(&r, &src.launch(&src.kernels[k]));
                k += 1;
            }
            if a < src.api_calls.len() {
                let mut r = src.api_calls[a].clone();
                r.start_ns += dt;
                r.end_ns += dt;
                r.correlation_id += dc;
                r.name = re(r.name);
                w.push_api(&r);
                a += 1;
            }
            if w.pending_rows() >= rows_per_chunk {
                w.flush()?;
                if w.bytes_written() >= bytes {
                    break;
                }
            }
        }
        round += 1;
    }
    let records = w.records();
    *out = w.finish(&Default::default())?;
    Ok(records)
}

impl Target for LargeNative {
    fn name(&self) -> &'static str {
        "native-10mb"
    }

    fn generate(&self, rng: &mut Rng, dir: &Path) -> io::Result<Case> {
        let (name, src) = rng.pick(&self.sources);
        let rows_per_chunk = *rng.pick(&[2_000usize, 4_000, 20_000]);
        let mut part = Vec::with_capacity(PART_BYTES as usize + (1 << 20));
        let records = write_large(src, PART_BYTES, rows_per_chunk, &mut part)?;
        let input = dir.join("trace");
        std::fs::create_dir_all(&input)?;
        std::fs::write(input.join("vm-4242.cutrace"), &part)?;
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut outputs = Vec::new();
        let command = rng.below(8);
        let out = dir.join("out");
        match command {
            0 => args.extend(["report".into(), input.clone().into_os_string()]),
            1 => {
                args.extend(["report".into(), input.clone().into_os_string()]);
                args.extend(["--format".into(), "json".into()]);
            }
            2 => {
                args.extend(["diff".into(), input.clone().into_os_string()]);
                args.push(input.clone().into_os_string());
            }
            _ => {
                let flag = ["--csv", "--parquet", "--chrome", "--perfetto", "--csv"][command - 3];
                args.extend(["convert".into(), input.clone().into_os_string()]);
                args.extend([flag.into(), out.clone().into_os_string()]);
                outputs.push(out);
            }
        }
        Ok(Case {
            args,
            feed: Feed::File,
            outputs,
            // The input is kept only as what made it: it is 10 MB, and the seed remakes it.
            input: Vec::new(),
            input_name: format!("large-{}", name.replace('/', "-")),
            what: format!(
                "a valid {} MB native part of {records} records: {name}'s records repeated, \
                 {rows_per_chunk} rows a chunk",
                part.len() >> 20
            ),
        })
    }
}
