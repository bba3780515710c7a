//! The memory tables (table 11, allocations and frees; table 12, CUDA memory pools): a round trip through the writer with
//! every column at its edges and every unknown kept unknown, in the order written for rows at
//! one nanosecond.

use std::io::Cursor;

use cutrace_trace::native::{self, Header, Tail, Writer};
use cutrace_trace::*;

fn event(ts_ns: Ns, op: MemoryOp, address: Option<u64>, bytes: Option<u64>) -> MemoryEvent {
    MemoryEvent {
        ts_ns,
        process: 42,
        thread: u64::MAX,
        place: MemoryPlace::Gpu,
        device: 3,
        level: MemoryLevel::Driver,
        op,
        address,
        bytes,
        total_allocated: None,
        total_reserved: None,
        correlation_id: 7,
    }
}

#[test]
fn rows_round_trip_with_every_column() {
    let mut rows = vec![
        event(100, MemoryOp::Alloc, Some(u64::MAX), Some(u64::MAX)),
        // Two at one ns: read back in the order written (the replay's order for ties).
        event(200, MemoryOp::Free, Some(0x7f00), Some(4096)),
        event(200, MemoryOp::Alloc, Some(0x7f00), Some(8192)),
        event(50, MemoryOp::Unknown, None, None),
    ];
    rows[3].place = MemoryPlace::Cpu;
    rows[3].device = 0;
    rows[3].level = MemoryLevel::Framework;
    rows[1].total_allocated = Some(0);
    rows[1].total_reserved = Some(u64::MAX);
    rows[2].place = MemoryPlace::Other(255);
    let header = Header {
        cutrace_version: "test".into(),
        pid: Some(42),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    for r in &rows {
        w.push_memory(r);
    }
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let dir = std::env::temp_dir().join(format!("cutrace-memory-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a.cutrace");
    std::fs::write(&p, &bytes).unwrap();
    let t = native::read(&p, &mut |_, _| {});
    std::fs::remove_dir_all(&dir).unwrap();
    let t = t.unwrap();
    assert!(t.meta.complete);
    assert!(
        t.meta.skipped_events.is_empty(),
        "{:?}",
        t.meta.skipped_events
    );
    // Stored by time (a stable sort: ties keep the order written).
    let mut want = rows.clone();
    want.sort_by_key(|r| r.ts_ns);
    assert_eq!(t.memory, want);
}

fn pool(ts_ns: Ns, op: PoolOp, size: u64, utilized: u64) -> PoolEvent {
    PoolEvent {
        ts_ns,
        process: 42,
        device: 3,
        op,
        pool_type: PoolType::Local,
        address: 0x7f00_0000_0000,
        size,
        utilized,
        release_threshold: u64::MAX,
        min_bytes_to_keep: 0,
        managed: false,
        block_address: 0,
        block_bytes: 0,
        correlation_id: 9,
    }
}

/// Table 12 (CUDA memory pools): every operation and column round trips, at its edges.
#[test]
fn pool_rows_round_trip_with_every_column() {
    let mut rows = vec![
        pool(100, PoolOp::Created, 0, 0),
        pool(200, PoolOp::Alloc, 2 << 20, 4096),
        pool(300, PoolOp::Free, 2 << 20, 0),
        pool(400, PoolOp::Trimmed, 0, 0),
        pool(500, PoolOp::Destroyed, u64::MAX, u64::MAX),
    ];
    rows[1].block_address = 0x7f00_0000_1000;
    rows[1].block_bytes = 4096;
    rows[2].block_address = 0x7f00_0000_1000;
    rows[2].block_bytes = 4096;
    rows[3].min_bytes_to_keep = 1 << 20;
    rows[3].managed = true;
    rows[4].pool_type = PoolType::Imported;
    rows[0].pool_type = PoolType::Unknown;
    let header = Header {
        cutrace_version: "test".into(),
        pid: Some(42),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    for r in &rows {
        w.push_memory_pool(r);
    }
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let dir = std::env::temp_dir().join(format!("cutrace-pool-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a.cutrace");
    std::fs::write(&p, &bytes).unwrap();
    let t = native::read(&p, &mut |_, _| {});
    std::fs::remove_dir_all(&dir).unwrap();
    let t = t.unwrap();
    assert!(
        t.meta.skipped_events.is_empty(),
        "{:?}",
        t.meta.skipped_events
    );
    assert_eq!(t.memory_pools, rows);
    assert_eq!(native::Table::from_id(12), Some(native::Table::MemoryPool));
    assert_eq!(native::Table::MemoryPool.ncols(), 14);
}
