//! The memory table (table 11, allocations and frees): a round trip through the writer with
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
