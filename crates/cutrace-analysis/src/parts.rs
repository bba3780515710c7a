//! The part files of a native trace taken together: were they recorded by one run? `cutrace
//! record -o DIR` adds a part per CUDA process, so two runs recorded into the same directory
//! would silently merge into one timeline. Parts that all carry one `cutrace record` run id
//! (`HEAD.distributed.run_id`) are one run, whatever their timing. Otherwise (parts written before
//! run ids were recorded, or of several runs), parts from several hosts, or whose records fall
//! into time spans that do not overlap at all, are flagged as possibly from separate runs.

use cutrace_trace::{Ns, PartMeta};
use serde::Serialize;

/// Why the parts of a trace may come from separate runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeparateRuns {
    /// The distinct `cutrace record` run ids the parts carry, sorted, when there are several
    /// (each run gives all its processes one id: several ids are several runs); empty otherwise.
    pub run_ids: Vec<String>,
    /// The distinct hosts the parts name, sorted, when there are several (clocks of different
    /// hosts are not comparable); empty otherwise.
    pub hosts: Vec<String>,
    /// Number of disjoint time spans the parts' records form (parts whose spans overlap or touch
    /// share one); 1 when they all overlap.
    pub time_spans: u64,
    /// The first gap between spans: nothing is recorded from the end of `before` (the part that
    /// ends last among those before the gap) to the start of `after`.
    pub first_gap: Option<PartGap>,
}

/// A stretch of time between two parts with no part recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartGap {
    pub before: String,
    pub after: String,
    /// `before`'s last record end and `after`'s first record start.
    pub from_ns: Ns,
    pub to_ns: Ns,
    pub gap_ns: Ns,
}

/// `None` when the parts are one run: all carry the same `cutrace record` run id, or (parts
/// without one) they look like one: one host (or none recorded) and time spans that overlap into
/// one. Parts without records take no part in the time check.
pub fn separate_runs(parts: &[PartMeta]) -> Option<SeparateRuns> {
    // The workers of a torch.multiprocessing.spawn under one `cutrace record` need not overlap
    // in time; their shared run id says they are one run.
    let run = parts.first().and_then(PartMeta::run_id);
    if run.is_some() && parts.iter().all(|p| p.run_id() == run) {
        return None;
    }
    // Two run ids are two runs, even when their records overlap in time (two runs recorded
    // into one directory at once).
    let mut run_ids: Vec<String> = parts
        .iter()
        .filter_map(|p| p.run_id().map(str::to_owned))
        .collect();
    run_ids.sort();
    run_ids.dedup();
    if run_ids.len() < 2 {
        run_ids.clear();
    }
    let mut hosts: Vec<String> = parts.iter().filter_map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    if hosts.len() < 2 {
        hosts.clear();
    }
    let mut spans: Vec<(Ns, Ns, &str)> = parts
        .iter()
        .filter_map(|p| Some((p.first_ns?, p.last_ns?, p.path.as_str())))
        .collect();
    spans.sort_unstable();
    let mut time_spans = 0u64;
    let mut first_gap = None;
    let mut reach: Option<(Ns, &str)> = None;
    for &(first, last, path) in &spans {
        match reach {
            Some((end, before)) if first > end => {
                time_spans += 1;
                first_gap.get_or_insert_with(|| PartGap {
                    before: before.to_owned(),
                    after: path.to_owned(),
                    from_ns: end,
                    to_ns: first,
                    gap_ns: first - end,
                });
            }
            Some(_) => {}
            None => time_spans = 1,
        }
        // The latest end so far, and the part it belongs to.
        let end_here = last.max(first);
        reach = match reach {
            Some((end, before)) if end >= end_here => Some((end, before)),
            _ => Some((end_here, path)),
        };
    }
    (!run_ids.is_empty() || !hosts.is_empty() || time_spans > 1).then_some(SeparateRuns {
        run_ids,
        hosts,
        time_spans,
        first_gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(path: &str, host: &str, span: Option<(Ns, Ns)>) -> PartMeta {
        PartMeta {
            path: path.into(),
            host: Some(host.into()),
            pid: Some(1),
            first_ns: span.map(|s| s.0),
            last_ns: span.map(|s| s.1),
            complete: true,
            ..PartMeta::default()
        }
    }

    #[test]
    fn overlapping_parts_on_one_host_are_one_run() {
        let parts = [
            part("a", "h", Some((100, 500))),
            part("b", "h", Some((400, 900))),
            // Inside a's and b's union, and touching its end.
            part("c", "h", Some((900, 950))),
            part("empty", "h", None),
        ];
        assert_eq!(separate_runs(&parts), None);
        assert_eq!(separate_runs(&[]), None);
        assert_eq!(separate_runs(&parts[..1]), None);
    }

    #[test]
    fn a_gap_between_parts_is_flagged_with_the_parts_on_either_side() {
        let parts = [
            part("late", "h", Some((5_000, 6_000))),
            part("long", "h", Some((100, 1_000))),
            part("short", "h", Some((200, 300))),
            part("later", "h", Some((7_000, 8_000))),
        ];
        let s = separate_runs(&parts).expect("flagged");
        assert_eq!(s.time_spans, 3);
        assert!(s.hosts.is_empty());
        assert_eq!(
            s.first_gap,
            Some(PartGap {
                before: "long".into(),
                after: "late".into(),
                from_ns: 1_000,
                to_ns: 5_000,
                gap_ns: 4_000,
            })
        );
    }

    fn with_run(mut p: PartMeta, run: &str) -> PartMeta {
        p.header.distributed = Some(cutrace_trace::Distributed {
            run_id: Some(run.into()),
            ..Default::default()
        });
        p
    }

    /// The two workers of a torch.multiprocessing.spawn under one `cutrace record`: their work
    /// does not overlap, but their shared run id says they are one run.
    #[test]
    fn parts_of_one_recorded_run_are_one_run_whatever_their_timing() {
        let parts = [
            with_run(part("w0", "h", Some((100, 200))), "r1"),
            with_run(part("w1", "h", Some((5_000, 6_000))), "r1"),
            with_run(part("launcher", "h", None), "r1"),
        ];
        assert_eq!(separate_runs(&parts), None);
        // Another run's part, or one written before run ids: the timing check again.
        for odd in [
            with_run(part("x", "h", Some((9_000, 9_500))), "r2"),
            part("x", "h", Some((9_000, 9_500))),
        ] {
            let mut mixed = parts.to_vec();
            mixed.push(odd);
            assert_eq!(separate_runs(&mixed).expect("flagged").time_spans, 3);
        }
    }

    /// Two runs recorded into one directory at the same time: their records overlap, but their
    /// run ids say they are two runs.
    #[test]
    fn parts_of_two_recorded_runs_are_flagged_even_when_their_times_overlap() {
        let parts = [
            with_run(part("a0", "h", Some((100, 500))), "r1"),
            with_run(part("b0", "h", Some((200, 600))), "r2"),
            with_run(part("a1", "h", Some((300, 550))), "r1"),
        ];
        let s = separate_runs(&parts).expect("flagged");
        assert_eq!(s.run_ids, ["r1", "r2"]);
        assert_eq!((s.time_spans, s.first_gap), (1, None));
    }

    /// The H200 capture of a torch.multiprocessing.spawn of two workers under one `cutrace
    /// record`: flagged when its parts predate run ids, one run once they carry one.
    #[test]
    fn the_spawn_capture_is_one_run_once_its_parts_carry_the_run_id() {
        let read = |name: &str| {
            let dir = cutrace_testkit::fixture(&format!("native/{name}"));
            let mut paths: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            paths.sort();
            cutrace_trace::native::read_parts(&paths, &mut |_, _| {}).unwrap()
        };
        let old = read("spawn");
        assert_eq!(
            separate_runs(&old.meta.parts).expect("flagged").time_spans,
            2
        );
        assert_eq!(separate_runs(&read("spawn_run_id").meta.parts), None);
    }

    #[test]
    fn parts_from_two_hosts_are_flagged_even_when_their_times_overlap() {
        let parts = [
            part("a", "node1", Some((100, 500))),
            part("b", "node2", Some((100, 500))),
        ];
        let s = separate_runs(&parts).expect("flagged");
        assert_eq!(s.hosts, ["node1", "node2"]);
        assert_eq!((s.time_spans, s.first_gap), (1, None));
    }
}
