//! Large genuine native traces: the committed recordings' records written again and again, time
//! and ids moved on each round, into one valid part of about 10 MB (the largest input the
//! memory ceiling covers). Nothing is damaged: the part reads back whole, so what cutrace keeps
//! is every record a real trace of that size holds, and the case checks that a command on it
//! stays under the ceiling. A part holds about 0.35 records per byte, as recorded ones do.

use std::io;
use std::path::Path;

use cutrace_trace::native::Writer;
use cutrace_trace::{Header, Trace};

use super::{Case, Feed};
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

    /// The recording and the chunk size of a run's large parts.
    fn pick(&self, rng: &mut Rng) -> (&str, &Trace, usize) {
        let (name, src) = rng.pick(&self.sources);
        (name, src, *rng.pick(&[2_000usize, 4_000, 20_000]))
    }

    /// The part of about `bytes` that run `seed`'s large cases read (see [`LargeNative::cases`]);
    /// returns the records written.
    pub fn write(&self, out: &mut Vec<u8>, seed: u64, bytes: u64) -> io::Result<u64> {
        let (_, src, rows_per_chunk) = self.pick(&mut Rng::new(seed));
        write_large(src, bytes, rows_per_chunk, out)
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

impl LargeNative {
    /// The large-trace cases of a run: one genuine part of [`PART_BYTES`] (a recording and a
    /// chunk size picked by `rng`) run through every main command (`report` as text, JSON and
    /// HTML, every `convert`), and `diff` of a part of half
    /// that size with itself (its two inputs together are [`PART_BYTES`]). Their inputs are
    /// written under `dir`; a failure is replayed from the seed (`--write-large`), not kept.
    pub fn cases(&self, rng: &mut Rng, dir: &Path) -> io::Result<Vec<Case>> {
        let (name, src, rows_per_chunk) = self.pick(rng);
        let write = |sub: &str, bytes: u64| -> io::Result<(std::path::PathBuf, String)> {
            let mut part = Vec::with_capacity(bytes as usize + (1 << 20));
            let records = write_large(src, bytes, rows_per_chunk, &mut part)?;
            let trace = dir.join(sub);
            std::fs::create_dir_all(&trace)?;
            std::fs::write(trace.join("vm-4242.cutrace"), &part)?;
            let what = format!(
                "a valid native part of {} bytes, {records} records: {name}'s records repeated, \
                 {rows_per_chunk} rows a chunk",
                part.len()
            );
            Ok((trace, what))
        };
        let (full, what) = write("trace", PART_BYTES)?;
        let out = dir.join("out");
        let mut cases = Vec::new();
        let case =
            |args: Vec<std::ffi::OsString>, outputs: Vec<std::path::PathBuf>, what: &str| Case {
                args,
                feed: Feed::File,
                outputs,
                input: Vec::new(),
                input_name: "large".into(),
                what: what.to_string(),
                env: Vec::new(),
            };
        let input = full.into_os_string();
        cases.push(case(vec!["report".into(), input.clone()], vec![], &what));
        cases.push(case(
            vec![
                "report".into(),
                input.clone(),
                "--format".into(),
                "json".into(),
            ],
            vec![],
            &what,
        ));
        // The page is its output; its timeline must not keep per-record state for millions of
        // kernels.
        let page = dir.join("page.html");
        cases.push(case(
            vec![
                "report".into(),
                input.clone(),
                "--html".into(),
                page.clone().into_os_string(),
            ],
            vec![page],
            &what,
        ));
        for flag in ["--csv", "--parquet", "--chrome", "--perfetto"] {
            cases.push(case(
                vec![
                    "convert".into(),
                    input.clone(),
                    flag.into(),
                    out.join(&flag[2..]).into_os_string(),
                ],
                vec![out.join(&flag[2..])],
                &what,
            ));
        }
        let (half, what) = write("half", PART_BYTES / 2)?;
        cases.push(case(
            vec![
                "diff".into(),
                half.clone().into_os_string(),
                half.into_os_string(),
            ],
            vec![],
            &format!("{what}, compared with itself"),
        ));
        Ok(cases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_part_is_valid_and_reads_back_whole() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let large = LargeNative::load(&repo).unwrap();
        for (name, src) in &large.sources {
            let mut part = Vec::new();
            let records = write_large(src, 400_000, 4_000, &mut part).unwrap();
            assert!(part.len() >= 300_000, "{name}: {} bytes", part.len());
            let t = cutrace_trace::native::read_stream(
                Path::new("large.cutrace"),
                &part[..],
                Some(part.len() as u64),
                &cutrace_trace::Limits::default(),
                &mut |_, _| {},
            )
            .unwrap();
            assert!(t.meta.complete, "{name}: {:?}", t.meta.incomplete_reason);
            assert_eq!(t.meta.damaged_bytes, 0, "{name}");
            assert_eq!((t.kernels.len() + t.api_calls.len()) as u64, records);
            // More than one round: ids moved on, launches and names kept.
            assert!(t.kernels.len() > src.kernels.len(), "{name}");
            let max_corr = |t: &Trace| t.kernels.iter().map(|k| k.correlation_id).max();
            assert!(max_corr(&t) > max_corr(src), "{name}");
            for k in &t.kernels {
                assert!(src.launches.contains(&t.launch(k)), "{name}");
                assert!(src.strings.iter().any(|s| s == t.str(k.name)), "{name}");
            }
        }
    }
}
