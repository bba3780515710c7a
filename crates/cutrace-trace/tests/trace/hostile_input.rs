//! Hostile and damaged input: what a small file claims must not become memory, one bad chunk
//! must not lose the chunks after it, and Kineto's odd but real shapes are read, not refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use cutrace_testkit::repo;
use cutrace_trace::native::{self, codec_id, tag, CHUNK_HEADER_LEN, MAGIC};
use cutrace_trace::*;

/// A fresh directory for one test, removed when dropped.
struct TempDir(cutrace_testkit::Dir);

impl TempDir {
    fn new(name: &str) -> Self {
        TempDir(cutrace_testkit::Dir::new(&format!("hostile-{name}")))
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn deflate(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

/// One chunk as a writer would store it (deflated when `deflated`), with a good checksum.
fn chunk(t: [u8; 4], raw: &[u8], deflated: bool) -> Vec<u8> {
    let stored = if deflated { deflate(raw) } else { raw.to_vec() };
    let mut c = Vec::with_capacity(CHUNK_HEADER_LEN + stored.len());
    c.extend_from_slice(&t);
    c.push(if deflated {
        codec_id::DEFLATE
    } else {
        codec_id::NONE
    });
    c.extend_from_slice(&[0, 0, 0]);
    c.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    c.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    c.extend_from_slice(&crc32fast::hash(&stored).to_le_bytes());
    c.extend_from_slice(&stored);
    c
}

fn part_with(chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&native::FORMAT_VERSION.to_le_bytes());
    for c in chunks {
        b.extend_from_slice(c);
    }
    b
}

fn read(p: &Path) -> Result<Trace, TraceError> {
    open(p, &mut |_, _| {})
}

#[test]
fn rows_without_columns_are_not_records() {
    // 10,000,000 kernel rows and no column: nothing backs them (each once became a record).
    let mut raw = vec![1u8];
    varint(&mut raw, 10_000_000);
    varint(&mut raw, 0);
    raw.resize(10_000, 0);
    let d = TempDir::new("nocols");
    let p = d.write("a.cutrace", &part_with(&[chunk(tag::RECS, &raw, false)]));
    let t = read(&p).unwrap();
    assert_eq!(t.kernels.len(), 0);
    assert!(t.meta.damaged_regions > 0, "{:?}", t.meta.incomplete_reason);
}

#[test]
fn a_deflate_bomb_of_rows_is_refused_by_the_bytes_it_occupies() {
    // 1,000,000 kernels of 17 all-zero columns: 17 MB raw, a few KB stored.
    let rows = 1_000_000u64;
    let c = zero_kernels_chunk(rows);
    assert!(c.len() < 100_000, "{}", c.len());
    let d = TempDir::new("bomb");
    let p = d.write("a.cutrace", &part_with(&[c.clone(), c]));
    let t = read(&p).unwrap();
    assert_eq!(t.kernels.len(), 0, "rows beyond what the stored bytes back");
    assert!(!t.meta.complete);
    let why = t.meta.incomplete_reason.unwrap();
    assert!(why.contains("over the limit"), "{why}");
    // Raised, the same chunk reads.
    let raised: Limits = "rows-per-byte=10000".parse().unwrap();
    let t = open_with(
        &p,
        &ReadOptions {
            limits: raised,
            ..Default::default()
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(t.kernels.len(), 2 * rows as usize);
}

#[test]
fn a_string_table_of_empty_strings_is_refused() {
    let n = 2_000_000u64;
    let mut raw = Vec::new();
    varint(&mut raw, 0);
    varint(&mut raw, n);
    raw.extend(std::iter::repeat_n(0u8, n as usize));
    let d = TempDir::new("strs");
    let p = d.write("a.cutrace", &part_with(&[chunk(tag::STRS, &raw, true)]));
    let t = read(&p).unwrap();
    assert!(t.strings.len() < 100_000, "{}", t.strings.len());
    assert!(t.meta.damaged_regions > 0);
}

/// One RECS chunk of `rows` kernels whose 17 columns are all zero (the first row absolute, the
/// rest deltas): a few hundred bytes stored.
fn zero_kernels_chunk(rows: u64) -> Vec<u8> {
    let mut raw = vec![1u8];
    varint(&mut raw, rows);
    varint(&mut raw, 17);
    for _ in 0..17 {
        varint(&mut raw, rows);
        raw.extend(std::iter::repeat_n(0u8, rows as usize));
    }
    chunk(tag::RECS, &raw, true)
}

#[test]
fn many_chunks_within_the_free_rows_each_do_not_add_up() {
    // 500 chunks of 4,096 rows: each within one chunk's allowance (4,096 rows free, beyond 2
    // per stored byte), together 2 million rows in ~40 KB, which once all became records.
    let c = zero_kernels_chunk(4096);
    let chunks: Vec<Vec<u8>> = (0..500).map(|_| c.clone()).collect();
    let part = part_with(&chunks);
    let d = TempDir::new("free-rows");
    let p = d.write("a.cutrace", &part);
    let t = read(&p).unwrap();
    let budget = 4096 + 2 * part.len();
    assert!(
        t.kernels.len() <= budget,
        "{} kernels from {} bytes",
        t.kernels.len(),
        part.len()
    );
    // The first chunk is within the part's budget, and what was refused is said.
    assert!(t.kernels.len() >= 4096);
    let why = t.meta.incomplete_reason.unwrap();
    assert!(why.contains("rows-per-byte"), "{why}");
}

#[test]
fn string_bytes_are_bounded_by_the_bytes_that_hold_them() {
    // 20 chunks of 10 distinct strings of 100 KiB each: 20 MB of names in ~20 KB.
    let mut chunks = Vec::new();
    let mut first = 0u64;
    for c in 0..20 {
        let mut raw = Vec::new();
        varint(&mut raw, first);
        varint(&mut raw, 10);
        for i in 0..10 {
            let s = format!("{c}-{i}-{}", "k".repeat(100 << 10));
            varint(&mut raw, s.len() as u64);
            raw.extend_from_slice(s.as_bytes());
        }
        first += 10;
        chunks.push(chunk(tag::STRS, &raw, true));
    }
    let part = part_with(&chunks);
    assert!(part.len() < 100_000, "{}", part.len());
    let d = TempDir::new("string-bytes");
    let p = d.write("a.cutrace", &part);
    let t = read(&p).unwrap();
    let held: usize = t.strings.iter().map(String::len).sum();
    let budget = (1usize << 20) + 64 * part.len();
    assert!(
        held <= budget,
        "{held} bytes of strings from {} bytes",
        part.len()
    );
    let why = t.meta.incomplete_reason.unwrap();
    assert!(why.contains("string-bytes"), "{why}");
}

/// Where a chunk is in a part: (offset, tag, stored length).
type ChunkAt = (usize, [u8; 4], usize);

/// A committed part with its chunks' offsets.
fn fixture_part(rel: &str) -> (Vec<u8>, Vec<ChunkAt>) {
    let bytes = std::fs::read(repo().join(rel)).unwrap();
    let mut chunks = Vec::new();
    let mut o = 12;
    while o + CHUNK_HEADER_LEN <= bytes.len() {
        let t = [bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]];
        let stored = u32::from_le_bytes(bytes[o + 8..o + 12].try_into().unwrap()) as usize;
        chunks.push((o, t, stored));
        o += CHUNK_HEADER_LEN + stored;
    }
    (bytes, chunks)
}

const PART: &str = "tests/fixtures/native/tiny_5000/vm-550.cutrace";

#[test]
fn one_bit_flipped_in_head_loses_only_head() {
    let whole = read(&repo().join(PART)).unwrap();
    let (mut bytes, chunks) = fixture_part(PART);
    let (o, t, _) = chunks[0];
    assert_eq!(t, tag::HEAD);
    bytes[o + CHUNK_HEADER_LEN + 5] ^= 0x10;
    let d = TempDir::new("head");
    let p = d.write("vm-550.cutrace", &bytes);
    let t = read(&p).unwrap();
    assert_eq!(t.kernels.len(), whole.kernels.len());
    assert_eq!(t.api_calls.len(), whole.api_calls.len());
    assert!(!t.meta.complete);
    assert_eq!(t.meta.damaged_regions, 1);
    assert!(t.meta.damaged_bytes > 0);
    assert_eq!(t.meta.pid, None, "the header was lost");
}

#[test]
fn a_damaged_length_field_resynchronises_at_the_next_chunk() {
    let whole = read(&repo().join(PART)).unwrap();
    let (bytes, chunks) = fixture_part(PART);
    // Every chunk, its stored length made huge, then made a little too long: the other chunks
    // are all read.
    for (i, &(o, t, _)) in chunks.iter().enumerate() {
        for bad in [u32::MAX, 7] {
            let mut b = bytes.clone();
            let old = u32::from_le_bytes(b[o + 8..o + 12].try_into().unwrap());
            b[o + 8..o + 12].copy_from_slice(&old.wrapping_add(bad).to_le_bytes());
            let d = TempDir::new(&format!("len{i}-{bad}"));
            let p = d.write("vm-550.cutrace", &b);
            let got = read(&p).unwrap();
            assert!(!got.meta.complete);
            if t == tag::TAIL {
                continue;
            }
            assert_eq!(got.meta.damaged_regions, 1, "chunk {i} ({bad})");
            if t != tag::RECS && t != tag::STRS {
                assert_eq!(got.kernels.len(), whole.kernels.len(), "chunk {i}");
            }
        }
    }
}

#[test]
fn a_cut_file_is_not_damaged() {
    let (bytes, chunks) = fixture_part(PART);
    let (o, _, stored) = chunks[chunks.len() - 2];
    let d = TempDir::new("cut");
    let p = d.write(
        "vm-550.cutrace",
        &bytes[..o + CHUNK_HEADER_LEN + stored / 2],
    );
    let t = read(&p).unwrap();
    assert!(!t.meta.complete);
    assert_eq!(t.meta.damaged_regions, 0, "{:?}", t.meta.incomplete_reason);
}

#[test]
fn an_unreadable_part_is_left_out_like_a_foreign_file() {
    let dir = repo().join("tests/fixtures/native/multiproc");
    let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cutrace"))
        .collect();
    parts.sort();
    let all = native::read_parts(&parts, &mut |_, _| {}).unwrap();
    // A part gone between listing and reading (or one without read permission) is unreadable.
    let gone = dir.join("vm-999.cutrace");
    parts.push(gone.clone());
    let t = native::read_parts(&parts, &mut |_, _| {}).unwrap();
    assert_eq!(t.kernels.len(), all.kernels.len());
    assert!(!t.meta.complete);
    let why = t.meta.incomplete_reason.unwrap();
    assert!(
        why.contains("vm-999.cutrace: left out, unreadable"),
        "{why}"
    );
    // Alone, it is an error.
    assert!(native::read_parts(&[gone], &mut |_, _| {}).is_err());
}

fn kineto(events: &str, extra: &str) -> String {
    format!("{{{extra}\"traceEvents\": [{events}]}}")
}

const KERNEL: &str = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 1000, "args": {"device": 0, "stream": 7, "correlation": 1}}"#;

#[test]
fn a_complete_gzip_with_trailing_bytes_is_not_called_cut_off() {
    let d = TempDir::new("trail");
    // Two zero bytes (too short for a gzip header: once read as a stream cut off) and a longer
    // tail (once "corrupt").
    for tail in [&b"\0\0"[..], b"\0\0\0\0trailing"] {
        let mut gz = gzip(kineto(KERNEL, "").as_bytes());
        gz.extend_from_slice(tail);
        let p = d.write("t.json.gz", &gz);
        let t = read(&p).unwrap();
        assert_eq!(t.kernels.len(), 1);
        assert!(
            t.meta
                .notes
                .iter()
                .any(|n| n.text.contains("after the end of its gzip stream")),
            "{:?}",
            t.meta.notes
        );
    }
    // A cut one still is.
    let gz = gzip(kineto(KERNEL, "").as_bytes());
    let p = d.write("c.json.gz", &gz[..gz.len() - 3]);
    let e = read(&p).unwrap_err().to_string();
    assert!(e.contains("cut off"), "{e}");
}

#[test]
fn a_pid_past_32_bits_is_counted_not_wrapped() {
    let far = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 4294967297, "tid": 7, "ts": 10, "dur": 5}"#;
    let d = TempDir::new("pid");
    let p = d.write("t.json", kineto(&format!("{KERNEL}, {far}"), "").as_bytes());
    let t = read(&p).unwrap();
    assert_eq!(t.kernels.len(), 1);
    assert!(t.kernels.iter().all(|k| k.device == 0));
    assert!(
        t.meta
            .skipped_events
            .iter()
            .any(|(k, n)| k.contains("pid over 32 bits") && *n == 1),
        "{:?}",
        t.meta.skipped_events
    );
}

#[test]
fn a_time_base_past_2_64_is_refused_not_saturated() {
    let d = TempDir::new("base");
    let extra = format!("\"cutrace\": {{\"time_base_ns\": {}}}, ", u64::MAX);
    let p = d.write("t.json", kineto(KERNEL, &extra).as_bytes());
    let e = read(&p).unwrap_err().to_string();
    assert!(e.contains("time_base_ns"), "{e}");
    // One that fits is applied.
    let p = d.write(
        "u.json",
        kineto(KERNEL, "\"cutrace\": {\"time_base_ns\": 1000}, ").as_bytes(),
    );
    let t = read(&p).unwrap();
    assert_eq!(t.kernels[0].end_ns - t.kernels[0].start_ns, 1_000_000);
}

#[test]
fn a_negative_duration_is_counted_and_the_rest_is_read() {
    let neg = r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": -2}"#;
    let d = TempDir::new("neg");
    let p = d.write("t.json", kineto(&format!("{neg}, {KERNEL}"), "").as_bytes());
    let t = read(&p).unwrap();
    assert_eq!((t.kernels.len(), t.api_calls.len()), (1, 0));
    assert!(
        t.meta
            .skipped_events
            .iter()
            .any(|(k, n)| k.contains("negative dur") && *n == 1),
        "{:?}",
        t.meta.skipped_events
    );
}

#[test]
fn a_giant_name_in_a_small_gzip_is_a_limit_error_with_its_position() {
    // 12 MiB of name compresses to about 12 KB; the event limit set below it stops the read
    // before the buffer grows to hold it.
    let name = "a".repeat(12 << 20);
    let ev = KERNEL.replace("\"name\": \"k\"", &format!("\"name\": \"{name}\""));
    let gz = gzip(kineto(&format!("{KERNEL}, {ev}"), "").as_bytes());
    assert!(gz.len() < 1 << 20);
    let d = TempDir::new("giant");
    let p = d.write("t.json.gz", &gz);
    let small: Limits = "event-bytes=9M,string-bytes=1G".parse().unwrap();
    match open_with(
        &p,
        &ReadOptions {
            limits: small,
            ..Default::default()
        },
        &mut |_, _| {},
    ) {
        Err(TraceError::Limit { limit, offset, .. }) => {
            assert_eq!(limit, "event-bytes");
            assert!(offset > 0);
        }
        other => panic!("{other:?}"),
    }
    // With the default limits, a name of 2 MiB is over the string limit.
    let ev = KERNEL.replace(
        "\"name\": \"k\"",
        &format!("\"name\": \"{}\"", &name[..2 << 20]),
    );
    let p = d.write("s.json.gz", &gzip(kineto(&ev, "").as_bytes()));
    match read(&p) {
        Err(TraceError::Limit { limit, .. }) => assert_eq!(limit, "string-bytes"),
        other => panic!("{other:?}"),
    }
    let raised: Limits = "string-bytes=4M".parse().unwrap();
    assert_eq!(
        open_with(
            &p,
            &ReadOptions {
                limits: raised,
                ..Default::default()
            },
            &mut |_, _| {}
        )
        .unwrap()
        .kernels
        .len(),
        1
    );
}

#[test]
fn deep_nesting_neither_overflows_the_stack_nor_is_read_as_data() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let ev = KERNEL.replace("\"dur\": 1000", &format!("\"dur\": 1000, \"x\": {deep}"));
    let d = TempDir::new("deep");
    // In an event, before or after its fields: refused past 128 levels, without recursion.
    let first = KERNEL.replace("{\"ph\"", &format!("{{\"x\": {deep}, \"ph\""));
    for (name, text) in [("a.json", kineto(&ev, "")), ("b.json", kineto(&first, ""))] {
        let p = d.write(name, text.as_bytes());
        assert!(read(&p).is_err(), "{name}");
    }
    // A top-level value nobody reads is skipped (serde_json skips without recursion).
    let p = d.write(
        "c.json",
        kineto(KERNEL, &format!("\"other\": {deep}, ")).as_bytes(),
    );
    assert_eq!(read(&p).unwrap().kernels.len(), 1);
}

#[test]
fn overlapping_fake_chunks_do_not_make_the_search_quadratic() {
    // After a damaged chunk, a header every 20 bytes, each claiming 1 MB that follows it (with
    // a wrong checksum): unbounded, the search would hash 1 MB at each of 150,000 positions.
    let mut fake = Vec::new();
    fake.extend_from_slice(b"RECS");
    fake.extend_from_slice(&[codec_id::NONE, 0, 0, 0]);
    fake.extend_from_slice(&(1u32 << 20).to_le_bytes());
    fake.extend_from_slice(&(1u32 << 20).to_le_bytes());
    fake.extend_from_slice(&[1, 2, 3, 4]);
    let mut bad = chunk(tag::META, b"{}", false);
    bad[16] ^= 1;
    let mut b = part_with(&[chunk(tag::META, b"{}", false), bad]);
    for _ in 0..150_000 {
        b.extend_from_slice(&fake);
    }
    let d = TempDir::new("quadratic");
    let p = d.write("a.cutrace", &b);
    let started = std::time::Instant::now();
    let t = read(&p).unwrap();
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let why = t.meta.incomplete_reason.unwrap();
    assert!(why.contains("gave up"), "{why}");
    assert_eq!(t.meta.damaged_regions, 1);
}

#[test]
fn a_json_chunk_that_inflates_far_past_its_bytes_is_damaged() {
    // A HEAD of 60 MiB of one letter deflates to about 60 KB: eight such parts once took a
    // report to 989 MB. cutrace writes HEAD, META and TAIL uncompressed.
    let mode = "A".repeat(60 << 20);
    let head = format!(r#"{{"format_version":1,"api_records":{{"mode":"{mode}"}}}}"#);
    let c = chunk(tag::HEAD, head.as_bytes(), true);
    assert!(c.len() < 200_000, "{}", c.len());
    let note = format!(r#"{{"notes":["{mode}"]}}"#);
    let d = TempDir::new("jsonbomb");
    let p = d.write(
        "a.cutrace",
        &part_with(&[c, chunk(tag::META, note.as_bytes(), true)]),
    );
    let t = read(&p).unwrap();
    assert!(t.meta.parts[0].header.api_records.is_none());
    assert!(t.meta.notes.is_empty());
    assert!(
        t.meta.damaged_regions >= 1,
        "{:?}",
        t.meta.incomplete_reason
    );
    let why = t.meta.incomplete_reason.unwrap();
    assert!(why.contains("bytes of JSON"), "{why}");
    // A small deflated HEAD (as another writer might make) still reads.
    let head = r#"{"format_version":1,"host":"h","api_records":{"mode":"lean"}}"#;
    let p = d.write(
        "b.cutrace",
        &part_with(&[chunk(tag::HEAD, head.as_bytes(), true)]),
    );
    let t = read(&p).unwrap();
    assert_eq!(t.meta.parts[0].header.host.as_deref(), Some("h"));
}
