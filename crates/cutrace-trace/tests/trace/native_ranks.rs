//! A native part's place in a distributed job (`HEAD.distributed`): written, read back per part
//! and for the merged trace; parts written before it existed read as before.

use std::io::Cursor;
use std::path::PathBuf;

use cutrace_trace::native::{read_parts, Header, Tail, Writer};
use cutrace_trace::*;

fn part(dir: &cutrace_testkit::Dir, pid: u32, d: Option<Distributed>) -> PathBuf {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        distributed: d,
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    let name = w.intern("k");
    w.push_kernel(
        &Kernel {
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: 1,
            start_ns: 1_000 * u64::from(pid),
            end_ns: 1_000 * u64::from(pid) + 10,
            name,
            launch: 0,
        },
        &Launch {
            grid: [1; 3],
            block: [1; 3],
            ..Launch::default()
        },
    );
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let p = dir.path(&format!("h-{pid}.cutrace"));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn rank(rank: u32, run: &str) -> Option<Distributed> {
    Some(Distributed {
        rank: Some(rank),
        local_rank: Some(rank),
        world_size: Some(2),
        run_id: Some(run.into()),
        ..Distributed::default()
    })
}

#[test]
fn ranks_are_read_per_part_and_agreed_ones_for_the_trace() {
    let dir = cutrace_testkit::Dir::new("native-ranks");
    let paths = [
        part(&dir, 10, rank(0, "run-a")),
        part(&dir, 11, rank(1, "run-a")),
        // torchrun's own process: the run id only.
        part(
            &dir,
            12,
            rank(0, "run-a").map(|d| Distributed {
                rank: None,
                local_rank: None,
                world_size: None,
                ..d
            }),
        ),
    ];
    let one = read_parts(&paths[1..2], &mut |_, _| {}).unwrap();
    assert_eq!(one.meta.distributed, rank(1, "run-a"));
    assert_eq!(one.meta.parts[0].run_id(), Some("run-a"));
    let all = read_parts(&paths, &mut |_, _| {}).unwrap();
    let ranks: Vec<Option<u32>> = all
        .meta
        .parts
        .iter()
        .map(|p| p.distributed().and_then(|d| d.rank))
        .collect();
    assert_eq!(ranks, [Some(0), Some(1), None]);
    // Ranks differ: the merged trace has none; the run and the world size are shared.
    let d = all.meta.distributed.unwrap();
    assert_eq!(
        (d.rank, d.local_rank, d.world_size, d.run_id.as_deref()),
        (None, None, Some(2), Some("run-a"))
    );
}

/// The H200 spawn capture, recorded before parts held a run id, reads with none; its derived
/// copy with a run id in each HEAD reads it back, records unchanged.
#[test]
fn parts_before_and_after_run_ids_read() {
    let parts = |name: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> =
            std::fs::read_dir(cutrace_testkit::fixture(&format!("native/{name}")))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
        v.sort();
        v
    };
    let old = read_parts(&parts("spawn"), &mut |_, _| {}).unwrap();
    assert!(old.meta.parts.iter().all(|p| p.distributed().is_none()));
    assert_eq!(old.meta.distributed, None);
    let new = read_parts(&parts("spawn_run_id"), &mut |_, _| {}).unwrap();
    assert!(new
        .meta
        .parts
        .iter()
        .all(|p| p.run_id() == Some("19a2b3c4d5e6f708-2f9")));
    assert_eq!(new.kernels, old.kernels);
    assert_eq!(new.kernels.len(), 122);
}
