use proptest::prelude::*;

use super::*;

fn sample_batch() -> Batch {
    let mut latency = Latency::default();
    latency.add(1_500);
    latency.add(-3);
    latency.add(20_000_000_000);
    Batch {
        seq: 3,
        traced_ns: 5_000_000_000,
        dropped_by_cupti_total: 1,
        dropped_by_cutrace_total: 2,
        launches_pending: 1,
        oldest_pending_ns: 61_000_000_000,
        oldest_pending_kernel: Some("ncclDevKernel_AllReduce_Sum_f32_RING_LL".into()),
        unfinished_ended_total: 2,
        devices: vec![DeviceBatch {
            device: 0,
            uuid: Some("GPU-00112233-4455-6677-8899-aabbccddeeff".into()),
            kernels: 4,
            kernel_sum_ns: 900,
            comm_runs: vec![(10, 20)],
            compute_runs: vec![(0, 10), (20, 300)],
            copies: 1,
            copy_bytes: 4096,
            latency,
            streams: vec![
                StreamRuns {
                    stream: 7,
                    runs: vec![(0, 100), (200, 300)],
                },
                StreamRuns {
                    stream: 13,
                    runs: vec![(50, 250)],
                },
            ],
        }],
    }
}

fn read_all(bytes: &[u8]) -> Vec<Result<Option<Message>, WireError>> {
    let mut r = FrameReader::default();
    let mut cur = std::io::Cursor::new(bytes);
    let mut out = Vec::new();
    loop {
        let m = r.next(&mut cur);
        let stop = !matches!(m, Ok(Some(_)));
        out.push(m);
        if stop {
            return out;
        }
    }
}

#[test]
fn messages_survive_the_wire() {
    let hello = Message::Hello(Hello {
        pid: 42,
        host: "node1".into(),
        command: "python3".into(),
        rank: Some(3),
        local_rank: None,
        job: Some("1234".into()),
    });
    let batch = Message::Batch(sample_batch());
    let why = Message::Untraced("libcupti could not be loaded".into());
    let mut bytes = encode(&hello);
    bytes.extend(encode(&batch));
    bytes.extend(encode(&why));
    if let Message::Batch(b) = &batch {
        assert_eq!(b.encoded_len(), encode(&batch).len() - HEADER_LEN);
    }
    let got = read_all(&bytes);
    assert_eq!(
        got,
        vec![Ok(Some(hello)), Ok(Some(batch)), Ok(Some(why)), Ok(None)]
    );
}

#[test]
fn long_strings_are_cut_at_a_character_boundary() {
    let h = Hello {
        command: "é".repeat(MAX_STR),
        ..Hello::default()
    };
    let Ok(Some(Message::Hello(back))) = read_all(&encode(&Message::Hello(h)))[0].clone() else {
        panic!("not a hello")
    };
    assert!(back.command.len() <= MAX_STR && back.command.len() >= MAX_STR - 1);
}

#[test]
fn garbage_is_refused_by_name() {
    let good = encode(&Message::Batch(sample_batch()));
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    assert_eq!(read_all(&bad_magic)[0], Err(WireError::BadMagic));
    let mut version = good.clone();
    version[4] = 9;
    assert_eq!(read_all(&version)[0], Err(WireError::Version(9)));
    let mut kind = good.clone();
    kind[6] = 77;
    assert_eq!(read_all(&kind)[0], Err(WireError::Kind(77)));
    let mut huge = good.clone();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        read_all(&huge)[0],
        Err(WireError::TooLong(u64::from(u32::MAX)))
    );
    assert_eq!(
        read_all(&good[..good.len() - 1])[0],
        Err(WireError::Truncated)
    );
    assert_eq!(read_all(&good[..5])[0], Err(WireError::Truncated));
    // Unsorted runs.
    let mut b = sample_batch();
    b.devices[0].streams[0].runs = vec![(200, 300), (0, 100)];
    assert_eq!(
        read_all(&encode(&Message::Batch(b)))[0],
        Err(WireError::Malformed(
            "runs not sorted, disjoint and non-empty"
        ))
    );
}

#[test]
fn a_count_larger_than_the_frame_allocates_nothing() {
    // A batch claiming u32::MAX streams in a small frame.
    let mut b = sample_batch();
    b.devices[0].streams.clear();
    let mut bytes = encode(&Message::Batch(b));
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(read_all(&bytes)[0], Err(WireError::Malformed(_))));
}

proptest! {
    /// Any bytes decode to a message or an error, never a panic.
    #[test]
    fn any_bytes_are_read_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = read_all(&bytes);
    }

    /// A valid frame with any bytes changed is read without a panic.
    #[test]
    fn damaged_frames_are_read_without_a_panic(at in 0usize..400, v in any::<u8>()) {
        let mut bytes = encode(&Message::Batch(sample_batch()));
        let i = at % bytes.len();
        bytes[i] = v;
        let _ = read_all(&bytes);
    }
}

#[test]
fn split_frame_waits_for_a_whole_frame_and_refuses_garbage() {
    let c = Message::Capture(Capture {
        dir: "/tmp/x".into(),
        seconds: 3,
        last: true,
    });
    let bytes = encode(&c);
    for n in 0..bytes.len() {
        assert!(split_frame(&bytes[..n]).is_none(), "{n} bytes");
    }
    let (m, used) = split_frame(&bytes).unwrap().unwrap();
    assert_eq!((m, used), (c, bytes.len()));
    assert!(split_frame(b"GARBAGEGARBAGE").unwrap().is_err());
    let mut long = bytes.clone();
    long[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        split_frame(&long),
        Some(Err(WireError::TooLong(_)))
    ));
    // A reply claiming more pids than its bytes hold.
    let mut r = encode(&Message::CaptureReply(CaptureReply {
        told: vec![1, 2],
        refused: None,
    }));
    r[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
    assert!(split_frame(&r).unwrap().is_err());
}
