//! Fixed hostile shapes, run once per fuzz run before the random cases: inputs of a few KB or
//! MB that once cost gigabytes or never finished. Each is made here, not committed, and judged
//! like every case (no crash, no hang, peak RSS within the ceiling beyond what it writes).
//!
//! - A native part of 1.7 KB whose 2,000 kernels on 100 devices share one 1 MiB name: the
//!   report once copied that name into every gap and neighbour entry (3.9 GB and an abort).
//! - A 10 MB Kineto trace whose first member is not one a trace starts with and that holds the
//!   text `cutrace_rank_summary`: the rank-summary sniff once parsed it whole (853 MB).
//! - A native part of 10 kernels whose mangled names double in length at each of 23 levels of
//!   substitution: each once took a second or more to demangle, in the report and the exports.
//! - Doctor roots: 100 command lines of 1.9 MB, a 246,238-line loader cache file, a sparse
//!   16 GB libcupti (3.8 GB and an abort, over 120 s, 109 s).
//! - `--threads` (and `CUTRACE_IMPORT_THREADS`) of 2^64-1 on a Kineto trace: the parallel
//!   scanner once looped over it.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use cutrace_trace::native::Writer;
use cutrace_trace::{Header, Kernel, Launch};

use super::{Case, Feed};

/// One case of the shapes: `args` on inputs already written, writing `outputs`.
fn case(args: Vec<OsString>, outputs: Vec<PathBuf>, what: String) -> Case {
    Case {
        args,
        feed: Feed::File,
        outputs,
        input: Vec::new(),
        input_name: String::new(),
        what,
        env: Vec::new(),
    }
}

fn os(s: &str) -> OsString {
    s.into()
}

/// A native part of one process's kernels on stream 7, `(device, name)` each, in that order, one
/// microsecond long with a microsecond's gap after each, 2,000 to a chunk.
fn kernels_part(kernels: impl IntoIterator<Item = (u32, String)>) -> io::Result<Vec<u8>> {
    let header = Header {
        cutrace_version: "fuzz".into(),
        pid: Some(4242),
        kinds: vec!["CONCURRENT_KERNEL".into()],
        ..Header::default()
    };
    // As dense as deflate makes it: these parts press the readers' limits.
    let mut w = Writer::new(Vec::new(), &header)?.unpadded();
    for (i, (device, name)) in (0u64..).zip(kernels) {
        let k = Kernel {
            device,
            context: 1,
            stream: 7,
            correlation_id: i + 1,
            start_ns: 1_000_000 + i * 2_000,
            end_ns: 1_000_000 + i * 2_000 + 1_000,
            name: w.intern(&name),
            launch: 0,
        };
        w.push_kernel(&k, &Launch::default());
        // A chunk a second's records, as a recorder flushes.
        if w.pending_rows() >= 2_000 {
            w.flush()?;
        }
    }
    w.finish(&Default::default())
}

/// A native part of PC samples (table 10) made to cost: 1,000 functions and 1,000 source lines
/// sharing one 1 MiB file name and one 1 MiB stall-reason name, and sample counts near 2^64 that
/// overflow any unchecked sum.
pub fn hostile_pc_part() -> io::Result<Vec<u8>> {
    let header = Header {
        cutrace_version: "fuzz".into(),
        pid: Some(4242),
        ..Header::default()
    };
    let mut w = Writer::new(Vec::new(), &header)?.unpadded();
    let file = w.intern(&"f".repeat(1 << 20));
    let reason = w.intern(&format!(
        "smsp__pcsamp_warps_issue_stalled_{}",
        "r".repeat(1 << 20)
    ));
    for i in 0..1_000u32 {
        let function = w.intern(&format!("k{i}"));
        for pc in 0..2u64 {
            w.push_pc_sample(&cutrace_trace::PcSample {
                device: 0,
                process: 4242,
                correlation_id: 0,
                function,
                function_index: i,
                pc_offset: pc * 16,
                cubin_crc: 7,
                stall_reason: reason,
                samples: u64::MAX - 5,
                source_file: Some(file),
                source_line: i * 2 + pc as u32 + 1,
            });
        }
    }
    w.finish(&Default::default())
}

/// The part of the first shape: `devices` × `per_device` kernels named by one string of
/// `name_bytes` (held once: the writer interns it).
pub fn shared_name_part(devices: u32, per_device: u64, name_bytes: usize) -> io::Result<Vec<u8>> {
    let name = "k".repeat(name_bytes);
    kernels_part(
        (0..devices)
            .flat_map(|d| (0..per_device).map(move |_| d))
            .map(|d| (d, name.clone())),
    )
}

/// A mangled name of about 100 bytes whose demangled form doubles at each of 23 levels of
/// substitution (`X<a, a>`, each `a` the `X<…>` before): 2^23 copies of its first argument.
pub fn doubling_mangled_name(tag: u32) -> String {
    let sub = |i: u32| match i {
        0 => "S_".to_string(),
        i => format!(
            "S{}_",
            char::from_digit(i - 1, 36).map_or('0', |c| c.to_ascii_uppercase())
        ),
    };
    let mut n = format!("_Z2f{tag}1A1XIS_S_E");
    for level in 2..25 {
        n += &format!("S0_I{}{}E", sub(level), sub(level));
    }
    n
}

/// A native part of `kernels` kernels, each named by a [`doubling_mangled_name`] (ten kinds).
pub fn doubling_names_part(kernels: u32) -> io::Result<Vec<u8>> {
    kernels_part((0..kernels).map(|i| (0, doubling_mangled_name(i % 10))))
}

/// A Kineto trace of about `bytes` whose first member is `trace_id` and one of whose kernels is
/// named `cutrace_rank_summary`.
pub fn late_trace_key_json(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 4096);
    out.extend_from_slice(b"{\"trace_id\": \"fuzz\", \"traceEvents\": [\n");
    let mut i: u64 = 0;
    while out.len() < bytes {
        let name = if i == 7 {
            "cutrace_rank_summary"
        } else {
            "gemm"
        };
        let _ = write!(
            out,
            "{}{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{name}\", \"pid\": 0, \"tid\": 7, \
             \"ts\": {}.000, \"dur\": 1.000, \"args\": {{\"device\": 0, \"stream\": 7, \
             \"correlation\": {}}}}}",
            if i == 0 { "" } else { ",\n" },
            1_000 + i * 2,
            i + 1
        );
        i += 1;
    }
    out.extend_from_slice(b"\n]}\n");
    out
}

/// A JSON object of about `bytes` whose first member (`meta`) holds tiny objects, each a value
/// of its own once parsed (a parse into generic values takes ~40 times the file), with a
/// `traceEvents` member after it and the text `cutrace_rank_summary` at the end.
pub fn small_values_json(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 128);
    out.extend_from_slice(b"{\"meta\": [");
    while out.len() < bytes {
        out.extend_from_slice(b"{\"a\":0},");
    }
    out.extend_from_slice(b"{}], \"traceEvents\": [], \"note\": \"cutrace_rank_summary\"}\n");
    out
}

/// Writes `bytes` at `rel` under `root`, with its directories.
fn put(root: &Path, rel: &str, bytes: &[u8]) -> io::Result<()> {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(p, bytes)
}

/// Doctor roots that once cost gigabytes or minutes: 100 processes whose command lines link to
/// one 1.9 MB file of `a\0`; one 1.9 MB `ld.so.conf.d` file of 246,238 distinct lines; and a
/// sparse 16 GB libcupti (a 64-byte ELF header, 4 KB on disk). Each is a case of its own.
fn doctor_roots(dir: &Path) -> io::Result<Vec<(PathBuf, &'static str)>> {
    let cmdlines = dir.join("doctor-cmdlines");
    let mut big = b"nv-hostengine\0".to_vec();
    while big.len() < 1_900_000 {
        big.extend_from_slice(b"a\0");
    }
    put(&cmdlines, "big", &big)?;
    for pid in 100..200 {
        put(&cmdlines, &format!("proc/{pid}/comm"), b"nv-hostengine\n")?;
        std::os::unix::fs::symlink("../../big", cmdlines.join(format!("proc/{pid}/cmdline")))?;
    }
    let ldconf = dir.join("doctor-ldconf");
    let mut conf = String::with_capacity(2 << 20);
    for i in 0..246_238u32 {
        conf.push_str(&format!("/x/{i:06x}\n"));
    }
    put(&ldconf, "etc/ld.so.conf.d/many.conf", conf.as_bytes())?;
    let sparse = dir.join("doctor-sparse");
    let mut h = vec![0u8; 64];
    h[..8].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    h[16..18].copy_from_slice(&3u16.to_le_bytes());
    h[18..20].copy_from_slice(&62u16.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes());
    let lib = "usr/local/cuda/lib64/libcupti.so.13";
    put(&sparse, lib, &h)?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(sparse.join(lib))?
        .set_len(16 << 30)?;
    Ok(vec![
        (
            cmdlines,
            "a doctor root: 100 command lines linked to one 1.9 MB file",
        ),
        (
            ldconf,
            "a doctor root: one ld.so.conf.d file of 246,238 lines",
        ),
        (sparse, "a doctor root: a sparse 16 GB libcupti.so.13"),
    ])
}

/// A part of 60,000 devices with 3 kernels each, all of one 4 KB name: a report's per-device
/// sections and page lanes, 60,000 of them.
pub fn many_devices_part() -> io::Result<Vec<u8>> {
    let name = "d".repeat(4096);
    kernels_part(
        (0..60_000u32)
            .flat_map(|d| [d, d, d])
            .map(|d| (d, name.clone())),
    )
}

/// A part of 1,000,000 kernels, each of a name of its own (`k0`, `k1`, …): per-name rows and
/// their matching in `diff`, a million of them.
pub fn distinct_names_part() -> io::Result<Vec<u8>> {
    kernels_part((0..1_000_000u32).map(|i| (0, format!("k{i}"))))
}

/// `diff` of the distinct-names part with itself: as text, as a page, and with 100,000 rows
/// asked for as JSON (the sides' reports keep none of theirs; stdout is not counted as output
/// here, so the shape asks for 100,000 rows, not all).
fn distinct_names_diffs(dir: &Path, name: &str, what: &str) -> Vec<Case> {
    let d = dir.join(name).into_os_string();
    let html = dir.join("distinct-names-diff.html");
    vec![
        case(
            vec![os("diff"), d.clone(), d.clone()],
            vec![],
            what.to_owned(),
        ),
        case(
            vec![
                os("diff"),
                d.clone(),
                d.clone(),
                os("--html"),
                html.clone().into(),
            ],
            vec![html],
            what.to_owned(),
        ),
        case(
            vec![
                os("diff"),
                d.clone(),
                d,
                os("--top"),
                os("100000"),
                os("--format"),
                os("json"),
            ],
            vec![],
            what.to_owned(),
        ),
    ]
}

/// Every shape's cases, their inputs written under `dir`.
pub fn cases(dir: &Path) -> io::Result<Vec<Case>> {
    let mut out = Vec::new();
    let part_dir = dir.join("shared-name");
    std::fs::create_dir_all(&part_dir)?;
    let part = shared_name_part(100, 20, 1 << 20)?;
    let what = format!(
        "a native part of {} bytes: 100 devices x 20 kernels sharing one 1 MiB name",
        part.len()
    );
    std::fs::write(part_dir.join("fuzz-4242.cutrace"), &part)?;
    let html = dir.join("shared-name.html");
    let p = part_dir.clone().into_os_string();
    out.push(case(vec![os("report"), p.clone()], vec![], what.clone()));
    out.push(case(
        vec![os("report"), p.clone(), os("--format"), os("json")],
        vec![],
        what.clone(),
    ));
    out.push(case(
        vec![os("report"), p.clone(), os("--html"), html.clone().into()],
        vec![html],
        what.clone(),
    ));
    out.push(case(vec![os("diff"), p.clone(), p], vec![], what));

    let part_dir = dir.join("doubling-names");
    std::fs::create_dir_all(&part_dir)?;
    let part = doubling_names_part(10)?;
    let what = format!(
        "a native part of {} bytes: 10 kernels whose mangled names double at each substitution",
        part.len()
    );
    std::fs::write(part_dir.join("fuzz-4242.cutrace"), &part)?;
    let p = part_dir.into_os_string();
    out.push(case(vec![os("report"), p.clone()], vec![], what.clone()));
    let chrome = dir.join("doubling.json");
    out.push(case(
        vec![os("convert"), p, os("--chrome"), chrome.clone().into()],
        vec![chrome],
        what,
    ));

    let json = dir.join("late-key.json");
    std::fs::write(&json, late_trace_key_json(10_000_000))?;
    let what = "a 10 MB Kineto trace, first member trace_id, a kernel named cutrace_rank_summary"
        .to_string();
    let j = json.clone().into_os_string();
    let late = j.clone();
    out.push(case(vec![os("report"), j.clone()], vec![], what.clone()));
    out.push(case(
        vec![os("diff"), j.clone(), j.clone()],
        vec![],
        what.clone(),
    ));
    let csv = dir.join("late-key-csv");
    out.push(case(
        vec![os("convert"), j, os("--csv"), csv.clone().into()],
        vec![csv],
        what,
    ));

    let json = dir.join("small-values.json");
    std::fs::write(&json, small_values_json(10_000_000))?;
    let what =
        "a 10 MB JSON object of tiny values, then traceEvents and cutrace_rank_summary".to_string();
    let j = json.into_os_string();
    out.push(case(vec![os("report"), j.clone()], vec![], what.clone()));
    out.push(case(vec![os("diff"), j.clone(), j], vec![], what));

    // Report paths over very many devices and very many names; the diff of the second holds
    // one trace at a time (it once held both, and every name of each, at 597 MB).
    for (name, part, args, what) in [
        (
            "many-devices",
            many_devices_part()?,
            vec![os("--html"), dir.join("many-devices.html").into()],
            "a native part: 60,000 devices of 3 kernels sharing one 4 KB name",
        ),
        (
            "distinct-names",
            distinct_names_part()?,
            vec![os("--format"), os("json")],
            "a native part: 1,000,000 kernels, each of a name of its own",
        ),
    ] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join("fuzz-4242.cutrace"), &part)?;
        let mut a = vec![os("report"), d.into_os_string()];
        let outputs = if args[0] == "--html" {
            vec![PathBuf::from(&args[1])]
        } else {
            vec![]
        };
        a.extend(args);
        let what = format!("{what} ({} bytes)", part.len());
        out.push(case(a, outputs, what.clone()));
        if name == "distinct-names" {
            out.extend(distinct_names_diffs(dir, name, &what));
        }
    }

    let d = dir.join("hostile-pc");
    std::fs::create_dir_all(&d)?;
    let part = hostile_pc_part()?;
    std::fs::write(d.join("fuzz-4242.cutrace"), &part)?;
    let what = format!(
        "a native part of {} bytes: PC samples of 1,000 functions sharing one 1 MiB file and one \
         1 MiB stall reason, counts near 2^64",
        part.len()
    );
    let p = d.into_os_string();
    out.push(case(vec![os("report"), p.clone()], vec![], what.clone()));
    out.push(case(
        vec![os("report"), p.clone(), os("--format"), os("json")],
        vec![],
        what.clone(),
    ));
    out.push(case(
        vec![os("diff"), p.clone(), p.clone()],
        vec![],
        what.clone(),
    ));
    let prof = dir.join("hostile-pc.pb.gz");
    out.push(case(
        vec![os("convert"), p, os("--pprof"), prof.clone().into()],
        vec![prof],
        what,
    ));

    for (root, what) in doctor_roots(dir)? {
        out.push(case(
            vec![os("doctor"), os("--root"), root.into_os_string()],
            vec![],
            what.into(),
        ));
    }

    for env in [false, true] {
        let mut args = vec![os("report"), late.clone()];
        if !env {
            args.extend([os("--threads"), os("18446744073709551615")]);
        }
        let mut c = case(
            args,
            vec![],
            "--threads 2^64-1 on a 10 MB Kineto trace".into(),
        );
        if env {
            c.env.push((
                os(cutrace_settings::var::IMPORT_THREADS),
                os("18446744073709551615"),
            ));
            c.what = format!(
                "{}=2^64-1 on a 10 MB Kineto trace",
                cutrace_settings::var::IMPORT_THREADS
            );
        }
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_are_what_they_say() {
        let part = shared_name_part(100, 20, 1 << 20).unwrap();
        assert!(part.len() < 4096, "{} bytes", part.len());
        let t = cutrace_trace::native::read_stream(
            Path::new("p.cutrace"),
            &part[..],
            None,
            &Default::default(),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(t.kernels.len(), 2000);
        assert_eq!(t.str(t.kernels[1999].name).len(), 1 << 20);
        let j = late_trace_key_json(100_000);
        assert!(j.len() >= 100_000);
        let v: serde_json::Value = serde_json::from_slice(&j).unwrap();
        assert_eq!(v["traceEvents"][7]["name"], "cutrace_rank_summary");
        let v: serde_json::Value = serde_json::from_slice(&small_values_json(1000)).unwrap();
        assert_eq!(v["note"], "cutrace_rank_summary");
    }
}
