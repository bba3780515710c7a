//! Resource limits every reader enforces, so that a small hostile file cannot make cutrace
//! allocate without bound. The defaults are far above anything a real trace holds (docs/FORMAT.md
//! gives the measured figures); `--limit NAME=VALUE` raises one for an unusual trace.

use std::str::FromStr;

/// Bytes of strings a native part may hold per byte its chunks occupy in the file, beyond one
/// string of `string-bytes` ([`Limits::string_bytes_backed_by_part`]).
pub const STRING_BYTES_PER_STORED_BYTE: u64 = 64;
/// [`Limits::rows_per_stored_byte`] by default; the native writer stores a chunk uncompressed
/// rather than denser than this, so that its own parts always read.
pub const ROWS_PER_STORED_BYTE: u64 = 2;

/// The most threads any reader or job analysis uses, whatever `--threads` or
/// `CUTRACE_IMPORT_THREADS` asks: far more than the cores of any machine cutrace runs on, and
/// few enough that the work of cutting an input into one piece per thread stays small.
pub const MAX_THREADS: usize = 256;

/// The most threads one import runs on when not told how many: the Kineto importer's default
/// since it first scanned on several threads (BENCHMARKS.md measures it on 2 cores only).
pub const DEFAULT_IMPORT_THREADS_MAX: usize = 8;

/// The cores this process may run on (1 when that is unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The threads one import runs on: `asked` (0 counts as not asked), else one per core up to
/// [`DEFAULT_IMPORT_THREADS_MAX`]; never more than [`MAX_THREADS`]. Every reader that picks an
/// import's threads asks here: the Kineto importer for `None`, a job for each rank's share.
pub fn import_threads(asked: Option<usize>) -> usize {
    asked
        .filter(|&n| n > 0)
        .unwrap_or_else(|| cores().min(DEFAULT_IMPORT_THREADS_MAX))
        .min(MAX_THREADS)
}

/// Caps on what one piece of input may claim. Memory is then bounded by the records a trace
/// really holds, not by the counts it states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Native: bytes of one chunk, as stored and once decompressed.
    pub chunk_bytes: u64,
    /// Native: rows of one `RECS` chunk, and strings of one `STRS` chunk.
    pub chunk_rows: u64,
    /// Native: rows (or strings) a chunk may hold per byte it occupies in the file, beyond the
    /// first 4096. Recorded traces hold under 0.8 per byte; deflate alone could claim 1000.
    pub rows_per_stored_byte: u64,
    /// One string: a kernel or range name, a native `STRS` entry.
    pub string_bytes: u64,
    /// JSON: one event, or one top-level value other than `traceEvents`, in bytes.
    pub event_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            chunk_bytes: 64 << 20,
            chunk_rows: 4 << 20,
            rows_per_stored_byte: ROWS_PER_STORED_BYTE,
            string_bytes: 1 << 20,
            event_bytes: 32 << 20,
        }
    }
}

/// The names `--limit` takes, with what each bounds (for `--help` and errors).
pub const LIMIT_NAMES: [(&str, &str); 5] = [
    (
        "chunk-bytes",
        "bytes of one native chunk, stored or decompressed",
    ),
    ("chunk-rows", "rows (or strings) of one native chunk"),
    (
        "rows-per-byte",
        "rows a native chunk may hold per byte it occupies in the file",
    ),
    ("string-bytes", "bytes of one name or string"),
    ("event-bytes", "bytes of one JSON event or top-level value"),
];

impl Limits {
    /// Rows a chunk of `stored` bytes in the file may hold.
    pub fn rows_backed_by(&self, stored: u64) -> u64 {
        self.chunk_rows.min(
            stored
                .saturating_mul(self.rows_per_stored_byte)
                .saturating_add(4096),
        )
    }

    /// Rows (and strings) all the chunks of one part may hold together, once `stored` bytes of
    /// them have been read: as [`Limits::rows_backed_by`] for one chunk, with the first 4096
    /// free once per part, not once per chunk (5,000 chunks of 4,096 rows each once made a
    /// 920 KB part hold 20 million kernels).
    pub fn rows_backed_by_part(&self, stored: u64) -> u64 {
        stored
            .saturating_mul(self.rows_per_stored_byte)
            .saturating_add(4096)
    }

    /// Bytes of strings all the chunks of one part may hold together, once `stored` bytes of
    /// them have been read: one string of the longest kind, and [`STRING_BYTES_PER_STORED_BYTE`]
    /// per stored byte (deflate alone could claim 1,000; recorded names compress 5 to 20 times).
    pub fn string_bytes_backed_by_part(&self, stored: u64) -> u64 {
        stored
            .saturating_mul(STRING_BYTES_PER_STORED_BYTE)
            .saturating_add(self.string_bytes)
    }

    /// Applies one `NAME=VALUE` setting (see [`LIMIT_NAMES`]). VALUE is an integer, optionally
    /// with a binary suffix `K`, `M` or `G`.
    pub fn set(&mut self, setting: &str) -> Result<(), LimitError> {
        let bad = || LimitError(setting.to_string());
        let (name, value) = setting.split_once('=').ok_or_else(bad)?;
        let value = value.trim();
        let (digits, shift) = match value.char_indices().last() {
            Some((i, 'K' | 'k')) => (&value[..i], 10),
            Some((i, 'M' | 'm')) => (&value[..i], 20),
            Some((i, 'G' | 'g')) => (&value[..i], 30),
            _ => (value, 0),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let n = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
        let slot = match name.trim() {
            "chunk-bytes" => &mut self.chunk_bytes,
            "chunk-rows" => &mut self.chunk_rows,
            "rows-per-byte" => &mut self.rows_per_stored_byte,
            "string-bytes" => &mut self.string_bytes,
            "event-bytes" => &mut self.event_bytes,
            _ => return Err(bad()),
        };
        *slot = n;
        Ok(())
    }
}

impl FromStr for Limits {
    type Err = LimitError;

    /// Settings separated by commas, applied over the defaults: `string-bytes=16M,chunk-rows=8M`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut l = Limits::default();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            l.set(part)?;
        }
        Ok(l)
    }
}

/// A `--limit` setting that is not `NAME=VALUE` with a known name and an integer value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad limit {0:?}: expected NAME=VALUE (VALUE an integer, optionally with K, M or G), NAME one of {names}", names = limit_names())]
pub struct LimitError(pub String);

fn limit_names() -> String {
    let names: Vec<&str> = LIMIT_NAMES.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_runs_on_the_threads_asked_else_one_per_core_up_to_8() {
        assert_eq!(import_threads(Some(3)), 3);
        assert_eq!(import_threads(Some(MAX_THREADS + 1)), MAX_THREADS);
        let default = cores().min(DEFAULT_IMPORT_THREADS_MAX);
        assert_eq!(import_threads(None), default);
        assert_eq!(import_threads(Some(0)), default);
    }

    #[test]
    fn settings_parse_and_bad_ones_are_refused() {
        let l: Limits = "string-bytes=16M, chunk-rows=5".parse().unwrap();
        assert_eq!((l.string_bytes, l.chunk_rows), (16 << 20, 5));
        assert_eq!(l.event_bytes, Limits::default().event_bytes);
        for bad in [
            "string-bytes",
            "nope=1",
            "chunk-rows=x",
            "chunk-rows=99999999999G",
        ] {
            assert!(bad.parse::<Limits>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rows_are_backed_by_stored_bytes() {
        let l = Limits::default();
        assert_eq!(l.rows_backed_by(0), 4096);
        assert_eq!(l.rows_backed_by(1000), 2 * 1000 + 4096);
        assert_eq!(l.rows_backed_by(u64::MAX), l.chunk_rows);
    }
}

/// How to read a trace; the default suits every caller but a benchmark or a user raising a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Threads the Kineto importer scans a block on (1 = sequential; `None`: one per core, up
    /// to 8, as [`import_threads`] decides).
    pub import_threads: Option<usize>,
    /// What a reader accepts before it calls the input hostile (docs/FORMAT.md, "Limits").
    pub limits: Limits,
}
