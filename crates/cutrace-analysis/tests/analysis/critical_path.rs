//! The critical path: traces with planted paths (host-bound, GPU-bound, a stream wait, an event
//! sync, each with the event's work inferred and named by torch.profiler's records, a CUDA graph
//! launch, a blocking copy), each path written out segment by segment, and a property test
//! on random programs, each record starting a random delay after the last of its dependencies
//! arrives: the path's length equals a brute-force longest path of the program's own dependency
//! graph, and every segment on it is one of that graph's edges at its own weight (a wrong turn
//! in the walk would show as a segment no edge explains).

use cutrace_analysis::critical_path::{critical_path, CriticalPath, Kind, PathReport};
use cutrace_analysis::{steps, StepMatch};
use cutrace_testkit::records::{complete_trace, host_range, kernel};
use cutrace_trace::{
    ApiCall, ApiKind, CopyKind, HostOp, HostOpKind, Interner, Kernel, Memcpy, Ns, SyncKind,
    Synchronization, Trace,
};
use proptest::prelude::*;

/// A trace under construction: thread 1 of process 1, device 0.
#[derive(Default)]
struct Build {
    i: Interner,
    kernels: Vec<Kernel>,
    api: Vec<ApiCall>,
    ops: Vec<HostOp>,
    syncs: Vec<Synchronization>,
    memcpys: Vec<Memcpy>,
    step: Option<(Ns, Ns)>,
}

impl Build {
    fn call(&mut self, name: &str, corr: u64, start: Ns, end: Ns) {
        let name = self.i.intern(name);
        self.api.push(ApiCall {
            kind: ApiKind::Runtime,
            name,
            cbid: 0,
            process: 1,
            thread: 1,
            correlation_id: corr,
            start_ns: start,
            end_ns: end,
            return_value: 0,
        });
    }

    fn kernel(&mut self, name: &str, stream: u64, corr: u64, start: Ns, end: Ns) {
        let k = kernel(&mut self.i, name, 0, stream, corr, start, end);
        self.kernels.push(k);
    }

    fn op(&mut self, name: &str, start: Ns, end: Ns) {
        let name = self.i.intern(name);
        self.ops.push(HostOp {
            kind: HostOpKind::CpuOp,
            name,
            process: 1,
            thread: 1,
            start_ns: start,
            end_ns: end,
            external_id: 0,
        });
    }

    fn sync(&mut self, kind: SyncKind, stream: Option<u64>, corr: u64, start: Ns, end: Ns) {
        self.syncs.push(Synchronization {
            kind,
            device: 0,
            context: 1,
            stream,
            correlation_id: corr,
            start_ns: start,
            end_ns: end,
            wait_on_stream: None,
            event_record_correlation: None,
        });
    }

    /// The last sync record names the event's stream and its `cudaEventRecord` call, as
    /// torch.profiler writes them.
    fn waits_on(&mut self, stream: u64, record_corr: u64) {
        let s = self.syncs.last_mut().expect("a sync record");
        s.wait_on_stream = Some(stream);
        s.event_record_correlation = Some(record_corr);
    }

    /// The last sync record names the event's stream alone, as older torch.profiler writes it.
    fn waits_on_stream(&mut self, stream: u64) {
        let s = self.syncs.last_mut().expect("a sync record");
        s.wait_on_stream = Some(stream);
    }

    fn trace(mut self) -> Trace {
        let (s, e) = self.step.expect("a step");
        let range = host_range(&mut self.i, "ProfilerStep#1", s, e);
        let mut t = complete_trace(self.i, self.kernels, self.api);
        t.ranges = vec![range];
        t.host_ops = self.ops;
        t.syncs = self.syncs;
        t.memcpys = self.memcpys;
        t
    }
}

fn path_of(t: &Trace) -> CriticalPath {
    let st = steps(t, None, &StepMatch::profiler_steps());
    critical_path(t, None, st.as_ref(), 50)
}

/// The step's path as (kind, name, start, end), in time order: the longest-segment list holds
/// every segment when it is not capped, sorted here by start.
fn segments(p: &PathReport) -> Vec<(Kind, String, Ns, Ns)> {
    let mut v: Vec<_> = p
        .longest_segments
        .iter()
        .map(|s| (s.kind, s.name.clone(), s.start_ns, s.end_ns))
        .collect();
    v.sort_by_key(|s| (s.2, s.3));
    v
}

fn seg(kind: Kind, name: &str, s: Ns, e: Ns) -> (Kind, String, Ns, Ns) {
    (kind, name.to_owned(), s, e)
}

#[test]
fn host_bound_step_is_its_host_ops() {
    let mut b = Build::default();
    b.op("data_prep", 100, 7_900);
    b.call("cudaLaunchKernel", 1, 8_000, 8_100);
    b.kernel("relu", 7, 1, 8_200, 8_500);
    b.call("cudaDeviceSynchronize", 2, 9_100, 9_900);
    b.step = Some((0, 10_000));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(p.length_ns, 10_000);
    let c = &p.composition;
    assert_eq!((c.host_ns, c.compute_ns, c.launch_ns), (10_000, 0, 0));
    assert_eq!(c.host_ops[0].name, "data_prep");
    assert_eq!(c.host_ops[0].ns, 7_800);
    assert_eq!(p.longest_segments[0].name, "data_prep");
    // The kernel ended before the synchronize began: it is off the path, free to grow until
    // the synchronize would return later (the call's 800 ns plus the 600 ns before it).
    assert_eq!(p.slack.len(), 1);
    assert_eq!(
        (p.slack[0].name.as_str(), p.slack[0].slack_ns),
        ("relu", 1_400)
    );
}

#[test]
fn gpu_bound_step_is_its_kernels_back_to_back() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.call("cudaLaunchKernel", 2, 300, 400);
    b.call("cudaLaunchKernel", 3, 500, 600);
    b.kernel("k1", 7, 1, 250, 3_000);
    b.kernel("k2", 7, 2, 3_000, 6_000);
    b.kernel("k3", 7, 3, 6_050, 9_000);
    b.call("cudaStreamSynchronize", 4, 700, 9_100);
    b.sync(SyncKind::StreamSynchronize, Some(7), 4, 700, 9_100);
    b.step = Some((0, 10_000));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "k1", 100, 250),
            seg(Kind::Kernel, "k1", 250, 3_000),
            seg(Kind::Kernel, "k2", 3_000, 6_000),
            seg(Kind::Queue, "k3", 6_000, 6_050),
            seg(Kind::Kernel, "k3", 6_050, 9_000),
            seg(Kind::Sync, "cudaStreamSynchronize", 9_000, 9_100),
            seg(Kind::Host, "ProfilerStep#1", 9_100, 10_000),
        ]
    );
    assert_eq!(p.composition.compute_ns, 8_700);
    assert_eq!(p.composition.launch_ns, 200);
    assert_eq!(p.length_ns, 10_000);
}

#[test]
fn a_stream_wait_puts_the_other_streams_kernel_on_the_path() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("producer", 7, 1, 300, 5_000);
    b.call("cudaEventRecord", 2, 250, 260);
    b.call("cudaStreamWaitEvent", 3, 300, 310);
    b.sync(SyncKind::StreamWaitEvent, Some(9), 3, 300, 310);
    b.call("cudaLaunchKernel", 4, 400, 450);
    b.kernel("consumer", 9, 4, 5_100, 6_000);
    b.call("cudaDeviceSynchronize", 5, 500, 6_100);
    b.step = Some((0, 6_500));
    let cp = path_of(&b.trace());
    assert_eq!(cp.inferred.stream_waits, 1);
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "producer", 100, 300),
            seg(Kind::Kernel, "producer", 300, 5_000),
            seg(Kind::StreamWait, "consumer", 5_000, 5_100),
            seg(Kind::Kernel, "consumer", 5_100, 6_000),
            seg(Kind::Sync, "cudaDeviceSynchronize", 6_000, 6_100),
            seg(Kind::Host, "ProfilerStep#1", 6_100, 6_500),
        ]
    );
    assert_eq!(p.composition.stream_wait_ns, 100);
}

/// What a stream wait's synchronization record names of the event it waited on.
#[derive(Clone, Copy)]
enum Named {
    StreamAndRecord,
    Stream,
    Neither,
}

/// The event is recorded on stream 7 after its kernel was launched there; the thread then
/// launches on stream 8 before it records, so the inference (the thread's last launch on another
/// stream before its last record) would take stream 8's short kernel. The wait's record names
/// stream 7 and the record call: the path goes through stream 7's kernel.
fn stream_wait_on_the_earlier_launch(named: Named) -> CriticalPath {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 150);
    b.kernel("producer", 7, 1, 200, 5_000);
    b.call("cudaLaunchKernel", 2, 160, 190);
    b.kernel("decoy", 8, 2, 200, 1_000);
    b.call("cudaEventRecord", 3, 250, 260);
    b.call("cudaStreamWaitEvent", 4, 300, 310);
    b.sync(SyncKind::StreamWaitEvent, Some(9), 4, 300, 310);
    match named {
        Named::StreamAndRecord => b.waits_on(7, 3),
        Named::Stream => b.waits_on_stream(7),
        Named::Neither => {}
    }
    b.call("cudaLaunchKernel", 5, 400, 450);
    b.kernel("consumer", 9, 5, 5_100, 6_000);
    b.call("cudaDeviceSynchronize", 6, 500, 6_100);
    b.step = Some((0, 6_500));
    path_of(&b.trace())
}

#[test]
fn a_stream_wait_named_by_its_record_waits_for_the_events_stream() {
    let cp = stream_wait_on_the_earlier_launch(Named::StreamAndRecord);
    assert_eq!((cp.recorded.stream_waits, cp.inferred.stream_waits), (1, 0));
    assert_eq!(cp.recorded.waited_for_nothing, 0);
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "producer", 100, 200),
            seg(Kind::Kernel, "producer", 200, 5_000),
            seg(Kind::StreamWait, "consumer", 5_000, 5_100),
            seg(Kind::Kernel, "consumer", 5_100, 6_000),
            seg(Kind::Sync, "cudaDeviceSynchronize", 6_000, 6_100),
            seg(Kind::Host, "ProfilerStep#1", 6_100, 6_500),
        ]
    );
    // Without the record's names the inference takes the decoy: the path runs through it and
    // charges the consumer's wait to it, and the producer falls off the path.
    let cp = stream_wait_on_the_earlier_launch(Named::Neither);
    assert_eq!((cp.recorded.stream_waits, cp.inferred.stream_waits), (0, 1));
    let p = &cp.steps[0].path;
    let segs = segments(p);
    assert!(
        segs.contains(&seg(Kind::Kernel, "decoy", 200, 1_000)),
        "{segs:?}"
    );
    assert!(segs.contains(&seg(Kind::StreamWait, "consumer", 1_000, 5_100)));
    assert!(!segs.iter().any(|s| s.1 == "producer"));
}

/// A record that names the event's stream but not its `cudaEventRecord` call: the wait is tied
/// to the last work launched on that stream before the wait (inferred), not to the decoy the
/// thread launched last on another stream.
#[test]
fn a_stream_wait_whose_record_names_the_stream_alone_waits_for_that_streams_work() {
    let cp = stream_wait_on_the_earlier_launch(Named::Stream);
    assert_eq!((cp.recorded.stream_waits, cp.inferred.stream_waits), (0, 1));
    assert_eq!(cp.inferred.waited_for_nothing, 0);
    let named = stream_wait_on_the_earlier_launch(Named::StreamAndRecord);
    assert_eq!(segments(&cp.steps[0].path), segments(&named.steps[0].path));
}

/// A stream wait on an event of a stream that had run nothing before the wait, named by the
/// record alone (no record call): whichever call recorded the event, it waited for nothing;
/// the decoy the thread launched last, on another stream, is not tied to it.
#[test]
fn a_stream_wait_on_a_named_stream_that_ran_nothing_before_it_waits_for_nothing() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("decoy", 8, 1, 250, 350);
    b.call("cudaEventRecord", 2, 210, 220);
    b.call("cudaStreamWaitEvent", 3, 230, 240);
    b.sync(SyncKind::StreamWaitEvent, Some(9), 3, 230, 240);
    b.waits_on_stream(21);
    b.call("cudaLaunchKernel", 4, 250, 300);
    b.kernel("consumer", 9, 4, 400, 1_000);
    b.call("cudaStreamSynchronize", 5, 350, 1_100);
    b.sync(SyncKind::StreamSynchronize, Some(9), 5, 350, 1_100);
    b.step = Some((0, 1_200));
    let cp = path_of(&b.trace());
    assert_eq!(
        (cp.inferred.stream_waits, cp.inferred.waited_for_nothing),
        (1, 1)
    );
    let p = &cp.steps[0].path;
    assert_eq!(p.composition.stream_wait_ns, 0);
    assert_eq!(p.composition.compute_ns, 600);
}

/// Every `cudaStreamWaitEvent` call is counted once: one without a synchronization record (the
/// waiting stream unknown) is not followed, and said so.
#[test]
fn a_stream_wait_without_its_record_is_counted_not_followed() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("producer", 7, 1, 300, 5_000);
    b.call("cudaEventRecord", 2, 250, 260);
    // No synchronization record: which stream waited is unknown.
    b.call("cudaStreamWaitEvent", 3, 300, 310);
    b.call("cudaLaunchKernel", 4, 400, 450);
    b.kernel("consumer", 9, 4, 5_100, 6_000);
    b.call("cudaDeviceSynchronize", 5, 500, 6_100);
    b.step = Some((0, 6_500));
    let cp = path_of(&b.trace());
    let i = &cp.inferred;
    assert_eq!((i.stream_waits, i.stream_waits_not_followed), (0, 1));
    assert_eq!(cp.recorded.stream_waits, 0);
    let p = &cp.steps[0].path;
    assert_eq!(p.composition.stream_wait_ns, 0);
    assert!(!segments(p).iter().any(|s| s.1 == "producer"));
}

#[test]
fn an_event_sync_named_by_its_record_waits_for_the_events_work_alone() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("recorded", 7, 1, 300, 4_000);
    b.call("cudaEventRecord", 2, 210, 220);
    // Launched on the event's stream after the record: the event does not wait for it, though
    // it ends before the synchronize returns.
    b.call("cudaLaunchKernel", 3, 230, 300);
    b.kernel("after_record", 7, 3, 4_000, 5_000);
    b.call("cudaEventSynchronize", 4, 1_000, 5_050);
    // torch.profiler's Event Sync has no stream of its own.
    b.sync(SyncKind::EventSynchronize, None, 4, 1_000, 5_050);
    b.waits_on(7, 2);
    b.op("after", 5_100, 6_000);
    b.step = Some((0, 6_000));
    let cp = path_of(&b.trace());
    assert_eq!(cp.recorded.event_syncs, 1);
    assert_eq!(cp.recorded.waited_for_nothing, 0);
    let i = &cp.inferred;
    assert_eq!((i.event_syncs, i.syncs_without_stream), (0, 0));
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "recorded", 100, 300),
            seg(Kind::Kernel, "recorded", 300, 4_000),
            seg(Kind::Sync, "cudaEventSynchronize", 4_000, 5_050),
            seg(Kind::Host, "ProfilerStep#1", 5_050, 5_100),
            seg(Kind::Host, "after", 5_100, 6_000),
        ]
    );
}

#[test]
fn a_wait_on_an_event_of_a_stream_that_ran_nothing_waits_for_nothing() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    // The thread's last launch on another stream before its record, ending before the consumer
    // starts: the inference would tie the wait to it, and it would bind.
    b.kernel("other", 8, 1, 250, 380);
    // Recorded on stream 21, which never runs work (torch records such events).
    b.call("cudaEventRecord", 2, 210, 220);
    b.call("cudaStreamWaitEvent", 3, 230, 240);
    b.sync(SyncKind::StreamWaitEvent, Some(9), 3, 230, 240);
    b.waits_on(21, 2);
    b.call("cudaLaunchKernel", 4, 250, 300);
    b.kernel("consumer", 9, 4, 400, 1_000);
    b.call("cudaStreamSynchronize", 5, 350, 1_100);
    b.sync(SyncKind::StreamSynchronize, Some(9), 5, 350, 1_100);
    b.step = Some((0, 1_200));
    let cp = path_of(&b.trace());
    assert_eq!((cp.recorded.stream_waits, cp.inferred.stream_waits), (1, 0));
    assert_eq!(cp.recorded.waited_for_nothing, 1);
    let p = &cp.steps[0].path;
    assert_eq!(p.composition.stream_wait_ns, 0);
    assert_eq!(p.composition.compute_ns, 600);
    assert!(!segments(p).iter().any(|s| s.1 == "other"));
}

#[test]
fn an_event_sync_waits_for_its_own_stream_not_the_last_kernel() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("on_event_stream", 7, 1, 300, 5_000);
    b.call("cudaLaunchKernel", 2, 210, 300);
    // Ends later than the event's kernel, and before the sync returns: a device-wide reading
    // would take it.
    b.kernel("other_stream", 9, 2, 400, 5_020);
    b.call("cudaEventSynchronize", 3, 1_000, 5_050);
    b.sync(SyncKind::EventSynchronize, Some(7), 3, 1_000, 5_050);
    b.op("after", 5_100, 6_000);
    b.step = Some((0, 6_000));
    let cp = path_of(&b.trace());
    // The record names the event's stream, not its record call: inferred.
    assert_eq!(cp.inferred.event_syncs, 1);
    let p = &cp.steps[0].path;
    let kernels: Vec<_> = segments(p)
        .into_iter()
        .filter(|s| s.0 == Kind::Kernel)
        .map(|s| s.1)
        .collect();
    assert_eq!(kernels, ["on_event_stream"]);
    assert!(segments(p).contains(&seg(Kind::Sync, "cudaEventSynchronize", 5_000, 5_050)));
    // Nothing in the step waits for the other stream: it may grow to the step's end.
    assert_eq!(p.slack[0].name, "other_stream");
    assert_eq!(p.slack[0].slack_ns, 980);
}

#[test]
fn a_graph_launch_keeps_its_kernels_on_the_path() {
    let mut b = Build::default();
    b.call("cudaGraphLaunch", 10, 100, 300);
    b.kernel("g1", 7, 10, 400, 1_000);
    b.kernel("g2", 7, 10, 1_000, 3_000);
    b.kernel("g3", 7, 10, 3_100, 4_000);
    b.call("cudaStreamSynchronize", 11, 350, 4_100);
    b.sync(SyncKind::StreamSynchronize, Some(7), 11, 350, 4_100);
    b.step = Some((0, 4_500));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "g1", 100, 400),
            seg(Kind::Kernel, "g1", 400, 1_000),
            seg(Kind::Kernel, "g2", 1_000, 3_000),
            seg(Kind::Queue, "g3", 3_000, 3_100),
            seg(Kind::Kernel, "g3", 3_100, 4_000),
            seg(Kind::Sync, "cudaStreamSynchronize", 4_000, 4_100),
            seg(Kind::Host, "ProfilerStep#1", 4_100, 4_500),
        ]
    );
}

#[test]
fn a_blocking_copy_waits_for_its_copy_after_the_kernel_before_it() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("producer", 7, 1, 300, 4_000);
    b.call("cudaMemcpy", 2, 250, 5_100);
    b.memcpys.push(Memcpy {
        kind: CopyKind::DtoH,
        bytes: 4096,
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 2,
        start_ns: 4_010,
        end_ns: 5_000,
    });
    b.step = Some((0, 5_500));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Launch, "producer", 100, 300),
            seg(Kind::Kernel, "producer", 300, 4_000),
            seg(Kind::Queue, "copy", 4_000, 4_010),
            seg(Kind::Copy, "copy", 4_010, 5_000),
            seg(Kind::Sync, "cudaMemcpy", 5_000, 5_100),
            seg(Kind::Host, "ProfilerStep#1", 5_100, 5_500),
        ]
    );
    assert_eq!(p.composition.copy_ns, 990);
}

#[test]
fn a_second_threads_work_follows_the_step_thread() {
    // The forward on the step's thread, then the backward on another thread (autograd's), whose
    // launch the step's synchronize waits for. The trace shows no edge between the threads.
    let mut b = Build::default();
    b.op("forward", 100, 4_000);
    b.op("backward", 4_100, 8_000);
    b.ops.last_mut().unwrap().thread = 2;
    b.call("cudaLaunchKernel", 1, 7_000, 7_100);
    b.api.last_mut().unwrap().thread = 2;
    b.kernel("grad", 7, 1, 7_200, 9_000);
    b.call("cudaDeviceSynchronize", 2, 8_100, 9_100);
    b.step = Some((0, 10_000));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(p.thread_handoffs, 1);
    assert_eq!(p.composition.unexplained_ns, 0);
    assert_eq!(
        segments(p),
        vec![
            seg(Kind::Host, "ProfilerStep#1", 0, 100),
            seg(Kind::Host, "forward", 100, 4_000),
            // The step's thread between the forward's end and the backward's start.
            seg(Kind::Host, "ProfilerStep#1", 4_000, 4_100),
            seg(Kind::Host, "backward", 4_100, 7_000),
            seg(Kind::Launch, "grad", 7_000, 7_200),
            seg(Kind::Kernel, "grad", 7_200, 9_000),
            seg(Kind::Sync, "cudaDeviceSynchronize", 9_000, 9_100),
            seg(Kind::Host, "ProfilerStep#1", 9_100, 10_000),
        ]
    );
}

#[test]
fn a_kernel_without_its_launch_is_unexplained_not_invented() {
    let mut b = Build::default();
    b.kernel("orphan", 7, 1, 1_000, 3_000);
    b.call("cudaDeviceSynchronize", 2, 500, 3_100);
    b.step = Some((0, 3_200));
    let cp = path_of(&b.trace());
    let p = &cp.steps[0].path;
    assert_eq!(cp.inferred.gpu_ops_without_launch, 1);
    assert_eq!(p.composition.unexplained_ns, 1_000);
    assert_eq!(p.length_ns, 3_200);
}

#[test]
fn the_window_path_runs_from_the_first_record_to_the_last() {
    let mut b = Build::default();
    b.call("cudaLaunchKernel", 1, 100, 200);
    b.kernel("k", 7, 1, 300, 2_000);
    b.step = Some((50, 250));
    let t = b.trace();
    let cp = critical_path(&t, None, None, 10);
    let w = cp.window.expect("a window path");
    assert_eq!((w.start_ns, w.end_ns, w.length_ns), (50, 2_000, 1_950));
    assert_eq!(w.composition.compute_ns, 1_700);
    assert!(cp.steps.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Random programs, run as soon as possible, against a brute-force longest path.

#[derive(Debug, Clone)]
enum Op {
    Cpu(Ns),
    Launch {
        stream: u64,
        call: Ns,
        latency: Ns,
        dur: Ns,
    },
    /// Record an event after the last launch on another stream, and make `stream` wait for it.
    Wait {
        stream: u64,
    },
    /// Synchronize one stream (`Some`) or the device, returning `ret` after the work ends.
    Sync {
        stream: Option<u64>,
        ret: Ns,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let stream = prop_oneof![Just(7u64), Just(9), Just(11)];
    prop_oneof![
        (1u64..500).prop_map(Op::Cpu),
        (stream.clone(), 1u64..50, 1u64..300, 1u64..2_000).prop_map(
            |(stream, call, latency, dur)| Op::Launch {
                stream,
                call,
                latency,
                dur
            }
        ),
        stream.clone().prop_map(|stream| Op::Wait { stream }),
        (proptest::option::of(stream), 1u64..50).prop_map(|(stream, ret)| Op::Sync { stream, ret }),
    ]
}

/// The program's dependency graph: points (time-free) and weighted edges.
#[derive(Default)]
struct Dag {
    edges: Vec<(usize, usize, Ns)>,
    nodes: usize,
    /// The segment each edge shows on a path where it binds: (kind, start, end).
    shows: Vec<(Kind, Ns, Ns)>,
}

impl Dag {
    fn node(&mut self) -> usize {
        self.nodes += 1;
        self.nodes - 1
    }

    fn edge(&mut self, a: usize, b: usize, w: Ns, shows: (Kind, Ns, Ns)) {
        self.edges.push((a, b, w));
        self.shows.push(shows);
    }

    /// Every path from `from` to `to`, enumerated: the longest weight.
    fn longest(&self, from: usize, to: usize) -> Ns {
        fn go(d: &Dag, v: usize, to: usize, acc: Ns, best: &mut Ns) {
            if v == to {
                *best = (*best).max(acc);
                return;
            }
            for &(a, b, w) in &d.edges {
                if a == v {
                    go(d, b, to, acc + w, best);
                }
            }
        }
        let mut best = 0;
        go(self, from, to, 0, &mut best);
        best
    }
}

/// Runs `prog` on one host thread: the trace, the program's graph, its source and sink.
fn run(prog: &[Op]) -> (Trace, Dag, usize, usize) {
    let mut b = Build::default();
    let mut d = Dag::default();
    let src = d.node();
    let (mut h, mut host) = (0 as Ns, src);
    let mut corr = 0u64;
    // Per stream: (end time, end node) of its last kernel; a pending event wait.
    let mut last: std::collections::BTreeMap<u64, (Ns, usize)> = Default::default();
    let mut pending: std::collections::BTreeMap<u64, (Ns, usize)> = Default::default();
    let mut launched: Vec<(u64, Ns, usize)> = Vec::new();
    for (n, op) in prog.iter().enumerate() {
        corr += 1;
        match *op {
            Op::Cpu(dur) => {
                let name = format!("cpu{n}");
                b.op(&name, h, h + dur);
                let next = d.node();
                d.edge(host, next, dur, (Kind::Host, h, h + dur));
                (h, host) = (h + dur, next);
            }
            Op::Launch {
                stream,
                call,
                latency,
                dur,
            } => {
                let name = format!("k{n}");
                b.call("cudaLaunchKernel", corr, h, h + call);
                // The kernel starts `latency` after the last of its dependencies arrives: its
                // launch call's start, the stream's previous kernel's end, an event it waits for.
                let (ks, kn) = (d.node(), d.node());
                let mut ready = h;
                d.edge(host, ks, latency, (Kind::Launch, h, h + latency));
                if let Some(&(e, en)) = last.get(&stream) {
                    d.edge(en, ks, latency, (Kind::Queue, e, e + latency));
                    ready = ready.max(e);
                }
                if let Some((e, en)) = pending.remove(&stream) {
                    d.edge(en, ks, latency, (Kind::StreamWait, e, e + latency));
                    ready = ready.max(e);
                }
                let start = ready + latency;
                b.kernel(&name, stream, corr, start, start + dur);
                d.edge(ks, kn, dur, (Kind::Kernel, start, start + dur));
                last.insert(stream, (start + dur, kn));
                launched.push((stream, start + dur, kn));
                let next = d.node();
                d.edge(host, next, call, (Kind::Host, h, h + call));
                (h, host) = (h + call, next);
            }
            Op::Wait { stream } => {
                let Some(&(_, e, en)) = launched.iter().rev().find(|l| l.0 != stream) else {
                    continue;
                };
                b.call("cudaEventRecord", corr, h, h + 1);
                corr += 1;
                b.call("cudaStreamWaitEvent", corr, h + 1, h + 2);
                b.sync(SyncKind::StreamWaitEvent, Some(stream), corr, h + 1, h + 2);
                let p = pending.entry(stream).or_insert((e, en));
                if e > p.0 {
                    *p = (e, en);
                }
                let (mid, next) = (d.node(), d.node());
                d.edge(host, mid, 1, (Kind::Host, h, h + 1));
                d.edge(mid, next, 1, (Kind::Host, h + 1, h + 2));
                (h, host) = (h + 2, next);
            }
            Op::Sync { stream, ret } => {
                let waited = match stream {
                    Some(s) => last.get(&s).copied(),
                    None => last.values().copied().max_by_key(|l| l.0),
                };
                let end = waited.map_or(h, |w| w.0.max(h)) + ret;
                let next = d.node();
                let name = match stream {
                    Some(s) => {
                        b.sync(SyncKind::StreamSynchronize, Some(s), corr, h, end);
                        "cudaStreamSynchronize"
                    }
                    None => "cudaDeviceSynchronize",
                };
                b.call(name, corr, h, end);
                d.edge(host, next, ret, (Kind::Host, h, h + ret));
                if let Some((e, en)) = waited {
                    d.edge(en, next, ret, (Kind::Sync, e, e + ret));
                }
                (h, host) = (end, next);
            }
        }
    }
    b.step = Some((0, h));
    (b.trace(), d, src, host)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn the_path_is_a_longest_path_of_the_programs_graph(
        prog in proptest::collection::vec(op_strategy(), 1..9)
    ) {
        let (t, d, src, sink) = run(&prog);
        // A program of waits with nothing to wait for takes no time: no step.
        prop_assume!(t.ranges[0].end_ns > 0);
        let best = d.longest(src, sink);
        let cp = path_of(&t);
        prop_assert_eq!(cp.steps.len(), 1);
        let p = &cp.steps[0].path;
        // Run as soon as possible, the step's time is the longest path.
        prop_assert_eq!(p.length_ns, best);
        prop_assert_eq!(p.end_ns - p.start_ns, best);
        prop_assert_eq!(cp.inferred.inverted_edges, 0);
        for s in &p.longest_segments {
            let shown = (s.kind, s.start_ns, s.end_ns);
            prop_assert!(
                d.shows.contains(&shown),
                "segment {:?} {} [{}, {}] is no edge of the program", s.kind, s.name,
                s.start_ns, s.end_ns
            );
        }
    }
}
