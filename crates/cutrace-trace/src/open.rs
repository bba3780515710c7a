//! Opens any trace cutrace reads, choosing the reader from the file's first bytes.

use std::io::Read;
use std::path::Path;

use crate::error::TraceError;
use crate::model::Trace;

/// Progress callback: (bytes consumed so far, total bytes if known).
pub type Progress<'a> = &'a mut dyn FnMut(u64, Option<u64>);

/// What the first bytes of a file say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    Gzip,
    Json,
    Native,
    Unknown,
}

pub fn detect(head: &[u8]) -> Detected {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Detected::Gzip;
    }
    if crate::native::looks_native(head) {
        return Detected::Native;
    }
    match head.iter().find(|b| !b.is_ascii_whitespace()) {
        // Only whitespace so far: let the JSON reader say whether anything follows.
        Some(b'{') | Some(b'[') | None if !head.is_empty() => Detected::Json,
        _ => Detected::Unknown,
    }
}

/// How to read a trace; the default suits every caller but a benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Threads the Kineto importer scans a block on (1 = sequential; `None`: up to 8, one per
    /// core).
    pub import_threads: Option<usize>,
}

/// Reads a trace: a native cutrace trace, or a Kineto JSON (`.json`, `.json.gz`).
pub fn open(path: &Path, progress: Progress<'_>) -> Result<Trace, TraceError> {
    open_with(path, progress, &ReadOptions::default())
}

/// [`open`] with options.
pub fn open_with(
    path: &Path,
    progress: Progress<'_>,
    opts: &ReadOptions,
) -> Result<Trace, TraceError> {
    let mut head = [0u8; 16];
    let n = {
        let mut f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
        read_up_to(&mut f, &mut head).map_err(|e| TraceError::io(path, e))?
    };
    // A part cut shorter than its magic (empty among them: the recorder was killed before its
    // first write) is too short to detect; its name says what it is, and the native reader
    // reads it as an empty, incomplete part.
    let short_part = n < crate::native::MAGIC.len()
        && head[..n] == crate::native::MAGIC[..n]
        && path.extension().and_then(|x| x.to_str()) == Some(crate::native::PART_EXTENSION);
    match detect(&head[..n]) {
        _ if short_part => crate::native::read(path, progress),
        Detected::Native => crate::native::read(path, progress),
        Detected::Gzip | Detected::Json => {
            crate::kineto::import_on_threads(path, progress, opts.import_threads)
        }
        Detected::Unknown if n == 0 => Err(TraceError::Malformed {
            path: path.into(),
            offset: 0,
            what: "the file is empty".into(),
            hint: "expected a cutrace trace or a torch.profiler JSON trace".into(),
        }),
        Detected::Unknown => Err(TraceError::Unsupported {
            path: path.into(),
            what: "not a cutrace trace nor a JSON trace (the first bytes are neither); \
                   expected the output of `cutrace record` or torch.profiler's export_chrome_trace"
                .into(),
        }),
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
