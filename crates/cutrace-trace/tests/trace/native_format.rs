//! Native format: round trip, truncation at every chunk boundary and at random offsets, and
//! random bytes. The reader must never panic and must say "incomplete" whenever data is missing.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use cutrace_trace::native::{self, Header, MarkerEvent, Meta, Tail, Writer};
use cutrace_trace::*;
use proptest::prelude::*;

/// A temporary directory for one test, removed on drop.
fn tmpdir(name: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("native-{name}"))
}

/// A small trace with every record kind, written in three flushes; returns bytes and the
/// offsets at which chunks end.
fn sample_bytes() -> (Vec<u8>, Vec<usize>) {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(42),
        cupti_version: Some(130001),
        cuda_driver_version: Some(13000),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let mut ends = vec![w.bytes_written() as usize];
    for batch in 0..3u64 {
        let kname = w.intern("_Z4gemmPfS_");
        let aname = w.intern("cudaLaunchKernel");
        for i in 0..50u64 {
            let corr = batch * 100 + i + 1;
            let start = 1_000_000 + corr * 5_000;
            w.push_kernel(
                &Kernel {
                    device: 0,
                    context: 1,
                    stream: 7 + (i % 2),
                    correlation_id: corr,
                    start_ns: start,
                    end_ns: start + 3_000 + i,
                    name: kname,
                    launch: 0,
                },
                &Launch {
                    grid: [1, 1, 1],
                    block: [32, 1, 1],
                    registers_per_thread: 16,
                    static_shared_bytes: 0,
                    dynamic_shared_bytes: 0,
                    graph_id: 0,
                },
            );
            w.push_api(&ApiCall {
                kind: ApiKind::Runtime,
                name: aname,
                cbid: 211,
                process: 42,
                thread: 43,
                correlation_id: corr,
                start_ns: start - 900,
                end_ns: start - 800,
                return_value: 0,
            });
        }
        w.push_memcpy(&Memcpy {
            kind: CopyKind::HtoD,
            bytes: 4096,
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: batch * 100 + 99,
            start_ns: 10,
            end_ns: 20,
        });
        w.push_sync(
            &Synchronization {
                kind: SyncKind::StreamSynchronize,
                device: 0,
                context: 1,
                stream: Some(7),
                correlation_id: batch * 100 + 98,
                start_ns: 30,
                end_ns: 40,
                wait_on_stream: None,
                event_record_correlation: None,
            },
            false,
        );
        let r = w.intern("step");
        let d = w.intern("");
        w.push_marker(&MarkerEvent {
            ts_ns: 100 + batch,
            id: batch as u32 + 1,
            flags: 2,
            name: r,
            domain: d,
            process: 42,
            thread: 43,
        });
        w.push_marker(&MarkerEvent {
            ts_ns: 200 + batch,
            id: batch as u32 + 1,
            flags: 4,
            name: u32::MAX,
            domain: d,
            process: 42,
            thread: 43,
        });
        w.flush().unwrap();
        ends.push(w.bytes_written() as usize);
    }
    w.write_meta(&Meta {
        dropped_by_cupti: Some(3),
        ..Meta::default()
    })
    .unwrap();
    ends.push(w.bytes_written() as usize);
    let out = w
        .finish(&Tail {
            dropped_by_cupti: 3,
            ..Tail::default()
        })
        .unwrap()
        .into_inner();
    let total = out.len();
    ends.push(total);
    (out, ends)
}

fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> Result<Trace, TraceError> {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    native::read(&p, &mut |_, _| {})
}

#[test]
fn round_trip_keeps_every_record() {
    let dir = tmpdir("rt");
    let (bytes, _) = sample_bytes();
    assert!(native::looks_native(&bytes[..16]));
    let t = read_bytes(&dir, "a.cutrace", &bytes).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert_eq!(t.kernels.len(), 150);
    assert_eq!(t.api_calls.len(), 150);
    assert_eq!(t.memcpys.len(), 3);
    assert_eq!(t.syncs.len(), 3);
    assert_eq!(t.ranges.len(), 3);
    assert_eq!(t.meta.dropped_by_cupti, 3);
    assert_eq!(t.meta.pid, Some(42));
    assert_eq!(t.meta.cupti_version, Some(130001));
    assert_eq!(t.syncs[0].stream, Some(7));
    assert_eq!(t.syncs[0].device, 0, "device resolved from the context");
    let k = t.kernels.iter().find(|k| k.correlation_id == 3).unwrap();
    assert_eq!(t.str(k.name), "_Z4gemmPfS_");
    assert_eq!(k.end_ns - k.start_ns, 3_002);
    assert_eq!(t.launch(k).block, [32, 1, 1]);
    assert_eq!(t.launch(k).registers_per_thread, 16);
    let a = t.api_calls.iter().find(|a| a.correlation_id == 3).unwrap();
    assert_eq!(t.str(a.name), "cudaLaunchKernel");
    assert_eq!(t.str(t.ranges[0].name), "step");
    // Through the generic entry point too.
    let t2 = cutrace_trace::open(&dir.join("a.cutrace"), &mut |_, _| {}).unwrap();
    assert_eq!(t2.kernels.len(), 150);
}

#[test]
fn bytes_per_kernel_with_launch_is_small() {
    let header = Header::default();
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let kname = w.intern("_Z5emptyv");
    let aname = w.intern("cudaLaunchKernel");
    let n = 100_000u64;
    let mut t = 5_000_000_000u64;
    let mut x = 0x2545f4914f6cdd1du64;
    for corr in 1..=n {
        // Realistic jitter: launches every ~3.9 µs, kernels ~1.5 µs.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let jitter = x % 700;
        t += 3_600 + jitter;
        w.push_api(&ApiCall {
            kind: ApiKind::Runtime,
            name: aname,
            cbid: 211,
            process: 9,
            thread: 9,
            correlation_id: corr,
            start_ns: t,
            end_ns: t + 2_100 + jitter / 3,
            return_value: 0,
        });
        w.push_kernel(
            &Kernel {
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: corr,
                start_ns: t + 5_000,
                end_ns: t + 6_400 + jitter % 50,
                name: kname,
                launch: 0,
            },
            &Launch {
                grid: [1, 1, 1],
                block: [1, 1, 1],
                registers_per_thread: 4,
                static_shared_bytes: 0,
                dynamic_shared_bytes: 0,
                graph_id: 0,
            },
        );
        if corr % 40_000 == 0 {
            w.flush().unwrap();
        }
    }
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let per = bytes.len() as f64 / n as f64;
    eprintln!("{per:.2} bytes per kernel + launch record");
    assert!(per <= 24.0, "{per} bytes per kernel");
}

#[test]
fn truncation_at_every_chunk_boundary_reads_what_was_complete() {
    let dir = tmpdir("trunc");
    let (bytes, ends) = sample_bytes();
    let mut prev_kernels = 0;
    for (i, &end) in ends.iter().enumerate() {
        let t = read_bytes(&dir, "t.cutrace", &bytes[..end]).unwrap();
        let last = i == ends.len() - 1;
        assert_eq!(t.meta.complete, last, "cut at {end}");
        if !last {
            assert!(t.meta.incomplete_reason.is_some());
        }
        assert!(t.kernels.len() >= prev_kernels);
        prev_kernels = t.kernels.len();
        // One byte short of every boundary: the partial chunk is dropped, earlier ones kept.
        if end > 12 {
            let t = read_bytes(&dir, "t.cutrace", &bytes[..end - 1]).unwrap();
            assert!(!t.meta.complete);
        }
    }
    assert_eq!(prev_kernels, 150);
    // Kernel counts at the boundaries grow by one flush (50) at a time.
    let t = read_bytes(&dir, "t.cutrace", &bytes[..ends[1]]).unwrap();
    assert_eq!(t.kernels.len(), 50);
}

#[test]
fn truncation_and_corruption_at_random_offsets_never_panics() {
    let dir = tmpdir("rand");
    let (bytes, _) = sample_bytes();
    let mut x = 0x9e3779b97f4a7c15u64;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let cut = (x % bytes.len() as u64) as usize;
        match read_bytes(&dir, "r.cutrace", &bytes[..cut]) {
            Ok(t) => assert!(!t.meta.complete),
            Err(e) => assert!(cut < 8, "cut at {cut}: {e}"),
        }
        let mut flipped = bytes.clone();
        let at = 12 + (x as usize >> 8) % (bytes.len() - 12);
        flipped[at] ^= 1 << (x % 8);
        let t = read_bytes(&dir, "f.cutrace", &flipped).unwrap();
        let _ = t.kernels.len();
    }
}

#[test]
fn directory_of_parts_merges_and_reports_incomplete_parts() {
    let dir = tmpdir("dir");
    let (bytes, ends) = sample_bytes();
    std::fs::write(dir.join(native::part_file_name("h", 1, 0)), &bytes).unwrap();
    std::fs::write(
        dir.join(native::part_file_name("h", 2, 0)),
        &bytes[..ends[2]],
    )
    .unwrap();
    std::fs::write(dir.join("ignored.txt"), b"x").unwrap();
    let t = native::read(&dir, &mut |_, _| {}).unwrap();
    assert_eq!(t.kernels.len(), 250);
    assert!(!t.meta.complete);
    assert!(t
        .meta
        .incomplete_reason
        .as_deref()
        .unwrap()
        .contains("h-2.cutrace"));
    assert!(t.kernels.iter().all(|k| t.str(k.name) == "_Z4gemmPfS_"));
    let empty = tmpdir("empty");
    assert!(native::read(&empty, &mut |_, _| {}).is_err());
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/native")
        .join(rel)
}

/// A committed fixture part copied into `dir` as `name`; returns its kernel count alone.
fn copy_fixture_part(dir: &Path, name: &str) -> usize {
    let src = fixture("two_streams/vm-466.cutrace");
    std::fs::copy(&src, dir.join(name)).unwrap();
    native::read(&src, &mut |_, _| {}).unwrap().kernels.len()
}

/// What a worker killed between creating its part and its first write leaves (0 bytes), or one
/// killed inside the magic (a prefix of it): an empty, incomplete part named in the reason; the
/// other parts are read as usual.
#[test]
fn a_part_shorter_than_the_magic_is_an_empty_incomplete_part() {
    for (case, bytes) in [("empty", &b""[..]), ("prefix", &native::MAGIC[..3])] {
        let dir = tmpdir(&format!("short-{case}"));
        let kernels = copy_fixture_part(&dir, "h-1.cutrace");
        std::fs::write(dir.join("h-2.cutrace"), bytes).unwrap();
        let t = native::read(&dir, &mut |_, _| {}).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(t.kernels.len(), kernels, "{case}");
        assert!(!t.meta.complete, "{case}");
        let reason = t.meta.incomplete_reason.clone().unwrap();
        assert!(
            reason.contains("h-2.cutrace") && reason.contains(&format!("{} bytes", bytes.len())),
            "{case}: {reason}"
        );
        assert_eq!(t.meta.paths.len(), 2, "{case}");
        // The part is listed, with no records and not complete.
        let p = &t.meta.parts[1];
        assert!(p.path.ends_with("h-2.cutrace"), "{case}: {p:?}");
        assert_eq!(
            (p.first_ns, p.pid, p.complete),
            (None, None, false),
            "{case}"
        );
        assert!(t.meta.parts[0].complete && t.meta.parts[0].first_ns.is_some());
        // Alone (as a file, through the generic entry point too): an empty incomplete trace.
        for t in [
            native::read(&dir.join("h-2.cutrace"), &mut |_, _| {}).unwrap(),
            cutrace_trace::open(&dir.join("h-2.cutrace"), &mut |_, _| {}).unwrap(),
        ] {
            assert_eq!(t.bounds_ns(), None, "{case}");
            assert!(!t.meta.complete, "{case}");
        }
    }
}

/// A file of the same length that is not a prefix of the magic is not a part: alone it is
/// refused with an error naming it; among good parts it is left out, and the trace says so.
#[test]
fn a_file_that_is_not_a_part_is_named_and_left_out_of_a_directory() {
    let dir = tmpdir("not-a-part");
    let kernels = copy_fixture_part(&dir, "h-1.cutrace");
    std::fs::write(dir.join("h-2.cutrace"), b"\x89CUX").unwrap();
    let alone = native::read(&dir.join("h-2.cutrace"), &mut |_, _| {}).unwrap_err();
    assert!(alone.to_string().contains("h-2.cutrace"), "{alone}");
    assert!(alone.to_string().contains("bad magic"), "{alone}");
    let t = native::read(&dir, &mut |_, _| {}).unwrap();
    assert_eq!(t.kernels.len(), kernels);
    assert!(!t.meta.complete);
    let reason = t.meta.incomplete_reason.unwrap();
    assert!(
        reason.contains("h-2.cutrace") && reason.contains("not a cutrace part"),
        "{reason}"
    );
    assert_eq!(t.meta.paths.len(), 1, "the file left out was not read");
    // A directory whose only part is not one is refused, naming the file.
    let only = tmpdir("not-a-part-only");
    std::fs::write(only.join("h-3.cutrace"), b"hello, world").unwrap();
    let e = native::read(&only, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("h-3.cutrace"), "{e}");
}

/// A part whose header and later `META` chunks carry notes (as the injection writes them).
fn part_with_notes(pid: u32) -> Vec<u8> {
    let header = Header {
        pid: Some(pid),
        notes: vec![
            "using the libcupti the program had already loaded (libcupti.so.13)".into(),
            "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER not set".into(),
        ],
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    for notes in [
        vec![
            "another CUPTI tool in the program tried to subscribe".to_string(),
            "a buffer could not be walked to its end: 1".to_string(),
        ],
        vec!["a buffer could not be walked to its end: 1".to_string()],
    ] {
        w.write_meta(&Meta {
            notes,
            ..Meta::default()
        })
        .unwrap();
    }
    w.finish(&Tail::default()).unwrap().into_inner()
}

#[test]
fn notes_from_head_and_meta_chunks_are_kept_once_per_part() {
    let dir = tmpdir("notes");
    let t = read_bytes(&dir, "h-7.cutrace", &part_with_notes(7)).unwrap();
    let texts: Vec<&str> = t.meta.notes.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "using the libcupti the program had already loaded (libcupti.so.13)",
            "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER not set",
            "another CUPTI tool in the program tried to subscribe",
            "a buffer could not be walked to its end: 1",
        ]
    );
    let part = dir.join("h-7.cutrace").display().to_string();
    assert!(t
        .meta
        .notes
        .iter()
        .all(|n| n.pid == Some(7) && n.part.as_deref() == Some(part.as_str())));
    // Parts keep their own notes, each tagged with its process.
    let parts = tmpdir("notes-parts");
    for pid in [1, 2] {
        std::fs::write(
            parts.join(native::part_file_name("h", pid, 0)),
            part_with_notes(pid),
        )
        .unwrap();
    }
    let t = native::read(&parts, &mut |_, _| {}).unwrap();
    assert_eq!(t.meta.notes.len(), 8);
    assert!(t.meta.notes[..4].iter().all(|n| n.pid == Some(1)));
    assert!(t.meta.notes[4..].iter().all(|n| n.pid == Some(2)
        && n.part
            .as_deref()
            .is_some_and(|p| p.ends_with("h-2.cutrace"))));
    // A trace without notes has none.
    let (bytes, _) = sample_bytes();
    assert!(read_bytes(&dir, "a.cutrace", &bytes)
        .unwrap()
        .meta
        .notes
        .is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn random_bytes_after_magic_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tmpdir("prop");
        let mut bytes = b"\x89CUTRACE\x01\x00\x00\x00".to_vec();
        bytes.extend_from_slice(&tail);
        let t = read_bytes(&dir, "p.cutrace", &bytes).unwrap();
        prop_assert!(!t.meta.complete || !tail.is_empty());
    }

    #[test]
    fn random_chunk_payloads_with_valid_framing_never_panic(
        tagi in 0usize..5, body in proptest::collection::vec(any::<u8>(), 0..512), deflate in any::<bool>()
    ) {
        let tags = [b"HEAD", b"STRS", b"RECS", b"META", b"TAIL"];
        let stored = if deflate {
            use std::io::Write;
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&body).unwrap();
            e.finish().unwrap()
        } else { body.clone() };
        let mut bytes = b"\x89CUTRACE\x01\x00\x00\x00".to_vec();
        bytes.extend_from_slice(tags[tagi]);
        bytes.extend_from_slice(&[u8::from(deflate), 0, 0, 0]);
        bytes.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&stored).to_le_bytes());
        bytes.extend_from_slice(&stored);
        let dir = tmpdir("prop2");
        let _ = read_bytes(&dir, "q.cutrace", &bytes).unwrap();
    }
}

/// Records as regular as a loop of one kernel at a fixed rate deflate to 25 rows a byte; the
/// writer pads such a chunk's deflate stream to 2 rows a byte, so that a reader's default
/// `rows-per-byte` takes its own part whole, and the part stays about half a byte a row.
#[test]
fn a_part_of_perfectly_regular_records_reads_whole_with_the_default_limits() {
    let d = tmpdir("regular");
    let header = Header {
        cutrace_version: "test".into(),
        pid: Some(7),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let name = w.intern("_Z4fakePf");
    let launch = cutrace_testkit::records::KERNEL_LAUNCH;
    for i in 0..100_000u64 {
        w.push_kernel(
            &Kernel {
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: 0,
                start_ns: 1_000_000 + i * 1_000,
                end_ns: 1_000_300 + i * 1_000,
                name,
                launch: 0,
            },
            &launch,
        );
        if i % 25_000 == 24_999 {
            w.flush().unwrap();
        }
    }
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    assert!(
        bytes.len() < 60_000,
        "{} bytes for 100,000 kernels",
        bytes.len()
    );
    let p = d.join("regular.cutrace");
    std::fs::write(&p, &bytes).unwrap();
    let t = native::read(&p, &mut |_, _| {}).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert_eq!(t.meta.damaged_bytes, 0);
    assert_eq!(t.kernels.len(), 100_000);
    assert_eq!(t.kernels[99_999].end_ns, 1_000_300 + 99_999 * 1_000);
}
