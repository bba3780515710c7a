//! The pc_sample table (`cutrace profile --pc-sampling`'s stall counts): a round trip through
//! the writer with every column at its edges, the PC sampling facts in META, the merge of two
//! processes' parts, and a reader that does not know the table skipping it and keeping the rest.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use cutrace_trace::native::{self, Header, Meta, Tail, Writer};
use cutrace_trace::*;

use super::kernel_metrics::retable;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("cutrace-pc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const LONG_SB: &str = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
const WAIT: &str = "smsp__pcsamp_warps_issue_stalled_wait";
const CHAIN: &str = "_Z5chainPKjPji";

fn info(device: u32, total: u64) -> PcSamplingInfo {
    PcSamplingInfo {
        stall_reasons: vec![LONG_SB.into(), WAIT.into()],
        sampling_period: Some(8),
        collection_mode: "continuous".into(),
        devices: vec![device],
        samples_total: total,
        samples_dropped: 3,
        samples_non_user: 10,
        hardware_buffer_full: 1,
        pcs_lost: 2,
        records_odd: 1,
        rows_dropped_queue: 0,
        cubins_not_kept: 0,
        error: None,
    }
}

/// A part of process `pid` on GPU `uuid` with a kernel (so the GPU is known) and three PC rows:
/// two reasons at one PC with source line, one at a PC whose cubin has no line information.
fn part(pid: u32, uuid: &str, corr: u64) -> Vec<u8> {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let f = w.intern(CHAIN);
    let sb = w.intern(LONG_SB);
    let wait = w.intern(WAIT);
    let file = w.intern("/src/gpu/pc_sampling_probe.cu");
    let row = |stall_reason, samples, pc_offset, source_file, source_line| PcSample {
        device: 0,
        process: pid,
        correlation_id: corr,
        function: f,
        function_index: 7,
        pc_offset,
        cubin_crc: u64::MAX - 1,
        stall_reason,
        samples,
        source_file,
        source_line,
    };
    w.push_pc_sample(&row(sb, 90_000, 0x1a0, Some(file), 52));
    w.push_pc_sample(&row(wait, 4, 0x1a0, Some(file), 52));
    w.push_pc_sample(&row(wait, u64::from(u32::MAX), 0x10, None, 0));
    w.write_meta(&Meta {
        devices: vec![native::DeviceInfo {
            device: 0,
            uuid: Some(uuid.into()),
            ..native::DeviceInfo::default()
        }],
        pc_sampling: Some(info(0, 200_000)),
        ..Meta::default()
    })
    .unwrap();
    w.finish(&Tail::default()).unwrap().into_inner()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn rows_round_trip_with_every_column() {
    let d = TempDir::new("rt");
    let p = write(&d.0, "a.cutrace", &part(42, "GPU-a", 0));
    let t = native::read(&p, &mut |_, _| {}).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert!(
        t.meta.skipped_events.is_empty(),
        "{:?}",
        t.meta.skipped_events
    );
    assert_eq!(t.pc_samples.len(), 3);
    let mut rows = t.pc_samples.clone();
    rows.sort_by_key(|r| (r.pc_offset, r.samples));
    let r = &rows[2];
    assert_eq!(t.str(r.function), CHAIN);
    assert_eq!(t.str(r.stall_reason), LONG_SB);
    assert_eq!((r.device, r.process, r.correlation_id), (0, 42, 0));
    assert_eq!(
        (r.pc_offset, r.cubin_crc, r.function_index),
        (0x1a0, u64::MAX - 1, 7)
    );
    assert_eq!(r.samples, 90_000);
    assert_eq!(
        t.str(r.source_file.unwrap()),
        "/src/gpu/pc_sampling_probe.cu"
    );
    assert_eq!(r.source_line, 52);
    // No line information: no file (not string 0), line 0.
    let r = &rows[0];
    assert_eq!((r.pc_offset, r.source_file, r.source_line), (0x10, None, 0));
    assert_eq!(r.samples, u64::from(u32::MAX));
    assert_eq!(t.str(r.stall_reason), WAIT);
    assert_eq!(t.meta.pc_sampling, Some(info(0, 200_000)));
}

#[test]
fn parts_merge_their_rows_ids_and_facts() {
    let d = TempDir::new("merge");
    // Two processes on two GPUs that each call GPU 0; the second's launches are correlated.
    let a = write(&d.0, "h-1.cutrace", &part(1, "GPU-a", 0));
    let b = write(&d.0, "h-2.cutrace", &part(2, "GPU-b", 5));
    let t = native::read_parts(&[a, b], &mut |_, _| {}).unwrap();
    assert_eq!(t.pc_samples.len(), 6);
    for r in &t.pc_samples {
        assert_eq!(t.str(r.function), CHAIN);
        assert!([LONG_SB, WAIT].contains(&t.str(r.stall_reason)));
        if let Some(f) = r.source_file {
            assert_eq!(t.str(f), "/src/gpu/pc_sampling_probe.cu");
        }
        match r.process {
            // Correlation id 0 ("none") stays 0; the second part's ids are offset by 2^32.
            1 => assert_eq!((r.device, r.correlation_id), (0, 0)),
            2 => assert_eq!((r.device, r.correlation_id), (1, (1 << 32) + 5)),
            p => panic!("process {p}"),
        }
    }
    let info = t.meta.pc_sampling.as_ref().unwrap();
    assert_eq!(info.devices, [0, 1]);
    assert_eq!(info.samples_total, 400_000);
    assert_eq!(
        (info.samples_dropped, info.samples_non_user, info.pcs_lost),
        (6, 20, 4)
    );
    assert_eq!(info.stall_reasons, [LONG_SB, WAIT]);
    assert_eq!(info.sampling_period, Some(8));
}

#[test]
fn a_reader_that_does_not_know_the_table_skips_it_and_keeps_the_rest() {
    assert_eq!(native::Table::PcSample as u8, 10);
    assert_eq!(native::Table::from_id(10), Some(native::Table::PcSample));
    let d = TempDir::new("skip");
    // Table 10 renamed to an id no reader knows, as a reader older than table 10 sees it.
    let (bytes, changed) = retable(&part(42, "GPU-a", 0), 10, 201);
    assert_eq!(changed, 1);
    let p = write(&d.0, "a.cutrace", &bytes);
    let t = native::read(&p, &mut |_, _| {}).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert!(t.pc_samples.is_empty());
    assert_eq!(
        t.meta.skipped_events,
        vec![("native_table_201".to_string(), 3)]
    );
    // Its META member is ignored by such a reader the same way: unknown JSON members are.
    let m: Meta = serde_json::from_str(r#"{"notes": ["n"], "pc_sampling_v9": {"x": 1}}"#).unwrap();
    assert_eq!(m.notes, ["n"]);
}
