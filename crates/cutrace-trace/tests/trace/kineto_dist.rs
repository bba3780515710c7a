//! torch.profiler traces of distributed jobs, captured on the H200 (tests/fixtures/kineto):
//! `distributedInfo`, device-wide synchronizes (`"stream": -1`), ROCm-style hex streams, the
//! collective annotations (`record_param_comms`) and their join to NCCL kernels, and Kineto's own
//! account of what it dropped. Expected values are read from the files with serde_json here.

use std::io::{Read, Write};
use std::path::Path;

use cutrace_trace::{open, SyncKind, Trace};

fn load(path: &Path) -> Trace {
    open(path, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn fixture(name: &str) -> Trace {
    load(&cutrace_testkit::fixture(&format!("kineto/{name}")))
}

fn json_of(name: &str) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(cutrace_testkit::fixture(&format!("kineto/{name}"))).unwrap(),
    )
    .read_to_string(&mut s)
    .unwrap();
    s
}

fn write_gz(dir: &cutrace_testkit::Dir, name: &str, json: &str) -> std::path::PathBuf {
    let p = dir.path(name);
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(json.as_bytes()).unwrap();
    gz.finish().unwrap();
    p
}

#[test]
fn distributed_info_is_read() {
    let t = fixture("nccl_ws1.json.gz");
    let d = t.meta.distributed.as_ref().expect("distributedInfo");
    assert_eq!(
        (d.rank, d.world_size, d.backend.as_deref()),
        (Some(0), Some(1), Some("nccl"))
    );
    assert_eq!(d.nccl_version.as_deref(), Some("2.28.9"));
    assert_eq!(d.process_groups.len(), 1);
    let g = &d.process_groups[0];
    assert_eq!(
        (
            g.name.as_deref(),
            g.desc.as_deref(),
            g.size,
            g.ranks.clone()
        ),
        (Some("0"), Some("default_pg"), Some(1), vec![0])
    );
    assert_eq!(g.backend_config.as_deref(), Some("cuda:nccl"));
    for (name, rank) in [("gloo_rank0.json.gz", 0), ("gloo_rank1.json.gz", 1)] {
        let d = fixture(name).meta.distributed.unwrap();
        assert_eq!(
            (d.rank, d.world_size, d.backend.as_deref()),
            (Some(rank), Some(2), Some("gloo"))
        );
        assert_eq!(d.process_groups[0].ranks, vec![0, 1]);
        assert_eq!(d.nccl_version, None);
    }
    // A trace without it says nothing.
    assert!(fixture("two_streams.json.gz").meta.distributed.is_none());
}

/// Kineto writes a device-wide synchronize (`cudaDeviceSynchronize`) as a `cuda_sync` event with
/// `"stream": -1`: read as a context-wide sync without a stream, nothing counted as unread.
#[test]
fn device_wide_synchronize_with_stream_minus_one_reads() {
    let json = json_of("nccl_ws1.json.gz");
    let minus_one = json.matches("\"stream\": -1").count();
    assert!(minus_one >= 2, "the fixture lost its device-wide syncs");
    let t = fixture("nccl_ws1.json.gz");
    assert_eq!(t.syncs.len(), minus_one);
    assert!(t
        .syncs
        .iter()
        .all(|s| s.kind == SyncKind::ContextSynchronize && s.stream.is_none()));
    assert!(
        t.meta.unread_values.is_empty(),
        "{:?}",
        t.meta.unread_values
    );
}

/// The same capture with every stream written as a hex string (`"0x7"`, as PyTorch on ROCm
/// writes them) reads as the same trace.
#[test]
fn rocm_hex_streams_read_as_the_same_trace() {
    let cuda = fixture("nccl_ws1.json.gz");
    let rocm = fixture("rocm_hex_streams.json.gz");
    assert!(json_of("rocm_hex_streams.json.gz").contains("\"stream\": \"0x7\""));
    assert_eq!(rocm.kernels, cuda.kernels);
    assert_eq!(rocm.memcpys, cuda.memcpys);
    assert_eq!(rocm.syncs, cuda.syncs);
    assert!(rocm.kernels.iter().all(|k| k.stream == 7));
    assert!(rocm.meta.unread_values.is_empty());
}

/// With one rank, NCCL launches no kernel (a device-to-device copy instead): the annotations are
/// read, none joins a kernel, and a note says why the collectives are empty. gloo writes none.
#[test]
fn annotations_without_nccl_kernels_leave_collectives_empty_with_a_note() {
    let json = json_of("nccl_ws1.json.gz");
    let ops = json.matches("\"name\": \"record_param_comms\"").count();
    assert_eq!(ops, 12);
    let t = fixture("nccl_ws1.json.gz");
    assert!(t.collectives.is_empty());
    let note = t
        .meta
        .notes
        .iter()
        .find(|n| n.text.contains("record_param_comms"))
        .expect("a note on the annotations");
    assert!(
        note.text.starts_with(&format!("{ops} of {ops} ")),
        "{}",
        note.text
    );
    // Every CPU op is read as a host op, record_param_comms ones as well; none is skipped.
    assert!(!t.meta.skipped_events.iter().any(|(c, _)| c == "cpu_op"));
    let all_cpu = json.matches("\"cat\": \"cpu_op\"").count();
    assert_eq!(t.host_ops.len(), all_cpu);
    let comm_ops = t
        .host_ops
        .iter()
        .filter(|o| t.str(o.name) == "record_param_comms")
        .count();
    assert_eq!(comm_ops, ops);
    let g = fixture("gloo_rank0.json.gz");
    assert!(g.collectives.is_empty());
    assert!(!g
        .meta
        .notes
        .iter()
        .any(|n| n.text.contains("record_param_comms")));
}

/// An NCCL kernel event placed as Kineto writes it (an `External id` naming its
/// `record_param_comms` op) into the real capture; the copy of the annotation newer Kineto
/// writes onto the kernel; and a kernel without an External id, found through its launch.
#[test]
fn nccl_kernels_join_their_annotations() {
    let json = json_of("nccl_ws1.json.gz");
    // The first allreduce's op: External id 6, on pid/tid 677, from 5288793819265.936 for
    // 143.564 µs; its launches run on the same thread inside that span.
    let kernel = |name: &str, ext: &str, corr: u64, ts: &str, extra: &str| {
        format!(
            "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{name}\", \"pid\": 0, \"tid\": 7, \
             \"ts\": {ts}, \"dur\": 5.0, \"args\": {{{ext}\"device\": 0, \"context\": 1, \
             \"stream\": 7, \"correlation\": {corr}{extra}}}}},\n"
        )
    };
    let launch = |corr: u64, ts: &str| {
        format!(
            "{{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernelExC\", \
             \"pid\": 677, \"tid\": 677, \"ts\": {ts}, \"dur\": 3.0, \"args\": {{\"cbid\": \
             430, \"correlation\": {corr}}}}},\n"
        )
    };
    let injected = [
        kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "\"External id\": 6, ",
            9001,
            "5288793819400.0",
            "",
        ),
        // Newer Kineto: the annotation on the kernel itself (with a sequence number).
        kernel(
            "ncclDevKernel_Broadcast_RING_LL",
            "\"External id\": 17, ",
            9002,
            "5288793819720.0",
            ", \"Collective name\": \"broadcast\", \"In msg nelems\": 65536, \"Out msg nelems\": \
             65536, \"Group size\": 1, \"dtype\": \"Float\", \"Process Group Name\": \"0\", \
             \"Process Group Description\": \"default_pg\", \"Seq\": 41",
        ),
        // No External id: joined through its launch, inside op 42's span on thread 677.
        kernel(
            "_Z32ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            "",
            9003,
            "5288793820450.0",
            "",
        ),
        launch(9003, "5288793820430.0"),
        // An External id naming another op (the `nccl:broadcast` annotation, 36): joined
        // through its launch, inside op 35's span.
        kernel(
            "ncclKernel_Broadcast_RING_LL_Sum_float",
            "\"External id\": 36, ",
            9005,
            "5288793820240.0",
            "",
        ),
        launch(9005, "5288793820235.0"),
        // A kernel that is not communication is never a collective, whatever links it.
        kernel(
            "my_copy_kernel",
            "\"External id\": 24, ",
            9004,
            "5288793820040.0",
            "",
        ),
    ]
    .concat();
    let at = json
        .find("  {\n    \"ph\": \"X\", \"cat\": \"kernel\"")
        .unwrap();
    let text = format!("{}{}{}", &json[..at], injected, &json[at..]);
    let dir = cutrace_testkit::Dir::new("kineto-dist-join");
    let t = load(&write_gz(&dir, "joined.json.gz", &text));
    let got: Vec<_> = t
        .collectives
        .iter()
        .map(|c| {
            (
                c.correlation_id,
                t.str(c.name).to_owned(),
                c.group_name.map(|s| t.str(s).to_owned()),
                c.group_desc.map(|s| t.str(s).to_owned()),
                c.group_size,
                c.seq,
                c.in_nelems,
                c.out_nelems,
                c.dtype.map(|s| t.str(s).to_owned()),
            )
        })
        .collect();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        got,
        vec![
            (
                9001,
                "allreduce".into(),
                s("0"),
                s("default_pg"),
                Some(1),
                None,
                Some(262144),
                Some(262144),
                s("Float")
            ),
            (
                9002,
                "broadcast".into(),
                s("0"),
                s("default_pg"),
                Some(1),
                Some(41),
                Some(65536),
                Some(65536),
                s("Float")
            ),
            (
                9005,
                "broadcast".into(),
                s("0"),
                s("default_pg"),
                Some(1),
                None,
                Some(65536),
                Some(65536),
                s("Float")
            ),
            (
                9003,
                "allreduce".into(),
                s("0"),
                s("default_pg"),
                Some(1),
                None,
                Some(262144),
                Some(262144),
                s("Float")
            ),
        ]
    );
    assert!(t.collectives.iter().all(|c| c.device == 0));
    let note = t
        .meta
        .notes
        .iter()
        .find(|n| n.text.contains("record_param_comms"))
        .unwrap();
    assert!(note.text.starts_with("8 of 12 "), "{}", note.text);
}

/// Kineto's log members: the `Record counts` line is its account of dropped records; warnings
/// and errors become notes; INFO lines otherwise are not shown.
#[test]
fn kinetos_record_counts_and_warnings_are_read() {
    let json = json_of("two_streams.json.gz");
    let at = json.rfind("\"traceName\"").unwrap();
    let text = format!(
        "{}\"INFO\": [\"Tracing to temporary file /tmp/x.json\", \"Record counts: Out-of-range \
         = 4181, Blocklisted runtime = 0, Invalid ext correlations = 2, CPU GPU out-of-order = \
         0, Unexpected CUDA events = 0, CUPTI stopped early? = 0\"],\n  \"WARNING\": [\"CUPTI \
         initialization failed - CUDA profiler activities will be missing\"],\n  {}",
        &json[..at],
        &json[at..]
    );
    let dir = cutrace_testkit::Dir::new("kineto-dist-log");
    let t = load(&write_gz(&dir, "logged.json.gz", &text));
    assert_eq!(t.meta.source_drops.len(), 6);
    assert_eq!(t.meta.source_drops[0], ("Out-of-range".to_owned(), 4181));
    assert_eq!(
        t.meta.source_drops[2],
        ("Invalid ext correlations".to_owned(), 2)
    );
    let notes: Vec<&str> = t.meta.notes.iter().map(|n| n.text.as_str()).collect();
    assert!(notes.contains(
        &"Kineto WARNING: CUPTI initialization failed - CUDA profiler activities will be missing"
    ));
    assert!(!notes.iter().any(|n| n.contains("temporary file")));
    assert_eq!(t.kernels, fixture("two_streams.json.gz").kernels);
}
