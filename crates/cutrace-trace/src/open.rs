//! Opens any trace cutrace reads, choosing the reader from the input's first bytes, in one pass:
//! the bytes sniffed are handed on to the reader, so a pipe, a FIFO or stdin (`-`) reads like a
//! file.

use std::io::Read;
use std::path::Path;

use crate::error::TraceError;
use crate::limits::ReadOptions;
use crate::model::Trace;
use crate::progress::Progress;

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

/// Reads a trace with the default [`ReadOptions`]; see [`open_with`].
pub fn open(path: &Path, progress: Progress<'_>) -> Result<Trace, TraceError> {
    open_with(path, &ReadOptions::default(), progress)
}

/// Reads a trace: a native cutrace trace (a part, or a directory of parts), or a Kineto JSON
/// (`.json`, `.json.gz`). `-` is standard input; any other path may be a pipe or a FIFO, as it
/// is read once, from start to end.
pub fn open_with(
    path: &Path,
    opts: &ReadOptions,
    progress: Progress<'_>,
) -> Result<Trace, TraceError> {
    let limits = &opts.limits;
    let stdin = path.as_os_str() == "-";
    if !stdin && path.is_dir() {
        return crate::native::read_with(path, limits, progress);
    }
    let (mut input, total): (Box<dyn Read>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
        // Only a regular file's length says how much is coming (a FIFO's is 0).
        let total = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        (Box::new(f), total)
    };
    let mut head = [0u8; 16];
    let n = read_up_to(&mut input, &mut head).map_err(|e| TraceError::io(path, e))?;
    let whole = std::io::Cursor::new(head[..n].to_vec()).chain(input);
    // A part cut shorter than its magic (empty among them: the recorder was killed before its
    // first write) is too short to detect; its name says what it is, and the native reader
    // reads it as an empty, incomplete part.
    let short_part = n < crate::native::MAGIC.len()
        && head[..n] == crate::native::MAGIC[..n]
        && path.extension().and_then(|x| x.to_str()) == Some(crate::native::PART_EXTENSION);
    match detect(&head[..n]) {
        _ if short_part => crate::native::read_stream(path, whole, total, limits, progress),
        Detected::Native => crate::native::read_stream(path, whole, total, limits, progress),
        d @ (Detected::Gzip | Detected::Json) => {
            crate::kineto::import_stream(path, whole, d == Detected::Gzip, total, opts, progress)
        }
        Detected::Unknown if n == 0 => Err(TraceError::Malformed {
            path: path.into(),
            offset: 0,
            what: "the file is empty".into(),
            hint: "expected a cutrace trace or a torch.profiler JSON trace".into(),
        }),
        Detected::Unknown => Err(TraceError::Unsupported {
            path: path.into(),
            what: known_other(path, &head[..n]).unwrap_or_else(|| {
                "not a cutrace trace nor a JSON trace (the first bytes are neither); expected \
                 the output of `cutrace record` or torch.profiler's export_chrome_trace"
                    .into()
            }),
        }),
    }
}

/// What a file that is not a trace cutrace reads is, when its name or first bytes say, with
/// what to do instead.
fn known_other(path: &Path, head: &[u8]) -> Option<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let ends = |s: &str| name.ends_with(s);
    let instead = "record the program with `cutrace record -o DIR -- CMD` (the same CUPTI \
                   records), or give a torch.profiler trace (prof.export_chrome_trace(\"t.json\"))";
    let what = if ends(".nsys-rep") || ends(".qdrep") {
        format!("an Nsight Systems report, which cutrace does not read (nor its `nsys export --type sqlite` database): {instead}")
    } else if head.starts_with(b"SQLite format 3\0") {
        format!("an SQLite database (an `nsys export --type sqlite` export?), which cutrace does not read: {instead}")
    } else if ends(".ncu-rep") {
        "an Nsight Compute report, which cutrace does not read: per-kernel counters come from \
         `cutrace profile -o DIR -- CMD`"
            .to_string()
    } else if ends(".pftrace") || ends(".perfetto-trace") {
        "a Perfetto protobuf trace: cutrace writes these (`convert --perfetto`) but reads only \
         its own traces and torch.profiler's JSON; open it in ui.perfetto.dev"
            .to_string()
    } else if ends(".xplane.pb") {
        format!("a TensorBoard XPlane profile (JAX or TensorFlow), which cutrace does not read: {instead}")
    } else if head.starts_with(b"PK\x03\x04")
        || (head.first() == Some(&0x80) && head.get(1).is_some_and(|v| (2..=5).contains(v)))
    {
        if [".pt", ".pth", ".bin", ".ckpt", ".safetensors"]
            .iter()
            .any(|e| ends(e))
            || head[0] == 0x80
        {
            format!("a PyTorch model or tensor file (torch.save), not a trace: {instead}")
        } else {
            format!("a zip archive, not a trace (unpack it and give the trace inside): {instead}")
        }
    } else {
        return None;
    };
    Some(what)
}

/// Reads until `buf` is full or the input ends; the bytes read.
pub(crate) fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
