//! How a job's critical path across its ranks ([`crate::job_path`]) changed between two jobs:
//! per step, matched as the job reports match steps (by the `#N` of `ProfilerStep#N`, else by
//! order), the path's length and composition and the ranks it waited for; over the matched steps
//! together, the same sums, the ranks waited for, and the work on the path (by kind, name and
//! rank) whose time changed most. Pure over two [`JobCriticalPath`]s.

use std::collections::{BTreeMap, HashMap};

use cutrace_trace::Ns;
use serde::Serialize;

use crate::critical_path::diff::changes;
use crate::critical_path::{Composition, Kind, PartChange, Segment};
use crate::job_path::{JobCriticalPath, JobStepPath, RankWait};
use crate::job_reduce::step_number;

pub use crate::critical_path::STEP_RANGE;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPathDiff {
    /// `number` (steps paired by the `#N` both jobs' step names end in) or `order` (the k-th
    /// step of each job's path).
    pub steps_matched_by: &'static str,
    /// Steps with a path in each job, and how many were paired.
    pub steps_base: u64,
    pub steps_new: u64,
    pub steps_matched: u64,
    /// Each job's live ranks left out of its paths (read from rank summaries).
    pub ranks_left_out_base: Vec<u32>,
    pub ranks_left_out_new: Vec<u32>,
    /// Summed over the matched steps: the length, each part of the composition, and the time
    /// ranks on the path waited for another rank (`rank_wait`: not part of the length).
    pub parts: Vec<PartChange>,
    /// Every matched step, in base step order.
    pub steps: Vec<StepPathChange>,
    /// Over the matched steps, the time the path waited for each rank at each collective,
    /// largest change first (`top` rows; unchanged ones left out).
    pub waited_for: Vec<WaitChange>,
    /// Over the matched steps, time on the path by what it was and the rank it ran on, largest
    /// change first (`top` rows; unchanged ones left out).
    pub changed: Vec<SegmentChange>,
}

/// One step of both jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPathChange {
    /// Each job's step (`index` and `name` of its path).
    pub index_base: u64,
    pub index_new: u64,
    pub name_base: String,
    pub name_new: String,
    /// The rank whose step ended last in each job: where its path starts from.
    pub end_rank_base: u32,
    pub end_rank_new: u32,
    /// As [`JobPathDiff::parts`], for this step.
    pub parts: Vec<PartChange>,
    /// Where each job's path left a rank for one that arrived later, in time order.
    pub rank_waits_base: Vec<RankWait>,
    pub rank_waits_new: Vec<RankWait>,
}

/// The time the path waited for one rank at one collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitChange {
    pub waited_for_rank: u32,
    pub op: String,
    pub base_ns: Ns,
    pub new_ns: Ns,
    pub delta_ns: i64,
    /// Matched steps whose path waited for it, in each job.
    pub steps_base: u64,
    pub steps_new: u64,
}

/// Time on the path of one kind, name and rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentChange {
    pub kind: Kind,
    pub name: String,
    pub rank: Option<u32>,
    pub base_ns: Ns,
    pub new_ns: Ns,
    pub delta_ns: i64,
}

fn delta(base: Ns, new: Ns) -> i64 {
    crate::units::delta_ns(base, new)
}

/// The length, the composition's parts and `rank_wait`, named as in the JSON.
fn parts_of(length: Ns, c: &Composition) -> [(&'static str, Ns); 10] {
    let p = crate::critical_path::diff::parts(length, c);
    let wait = ("rank_wait", c.rank_wait_ns.unwrap_or(0));
    std::array::from_fn(|i| p.get(i).copied().unwrap_or(wait))
}

/// What the diff reads of one step's path: the fields of [`JobStepPath`] it needs (the path
/// itself keeps more, for the report and the page).
#[derive(Debug, Clone, Copy)]
struct StepView<'a> {
    index: u64,
    name: &'a str,
    end_rank: u32,
    length_ns: Ns,
    composition: &'a Composition,
    rank_waits: &'a [RankWait],
    segments: &'a [Segment],
}

impl<'a> From<&'a JobStepPath> for StepView<'a> {
    fn from(s: &'a JobStepPath) -> StepView<'a> {
        StepView {
            index: s.index,
            name: &s.name,
            end_rank: s.end_rank,
            length_ns: s.length_ns,
            composition: &s.composition,
            rank_waits: &s.rank_waits,
            segments: &s.longest_segments,
        }
    }
}

/// One job's path as the diff reads it.
struct PathView<'a> {
    steps_matched_by: &'static str,
    ranks_left_out: &'a [u32],
    steps: Vec<StepView<'a>>,
}

impl<'a> From<&'a JobCriticalPath> for PathView<'a> {
    fn from(cp: &'a JobCriticalPath) -> PathView<'a> {
        PathView {
            steps_matched_by: cp.steps_matched_by,
            ranks_left_out: &cp.ranks_left_out,
            steps: cp.steps.iter().map(StepView::from).collect(),
        }
    }
}

/// The steps of the two paths paired: by number when both jobs matched their ranks' steps by
/// number and share one, else by order.
fn pair<'a>(
    base: &PathView<'a>,
    new: &PathView<'a>,
) -> (&'static str, Vec<(StepView<'a>, StepView<'a>)>) {
    let numbered = |cp: &PathView<'a>| -> Option<BTreeMap<u64, StepView<'a>>> {
        if cp.steps_matched_by != "number" {
            return None;
        }
        cp.steps
            .iter()
            .map(|s| step_number(s.name).map(|k| (k, *s)))
            .collect()
    };
    if let (Some(b), Some(n)) = (numbered(base), numbered(new)) {
        let pairs: Vec<_> = b
            .iter()
            .filter_map(|(k, s)| n.get(k).map(|t| (*s, *t)))
            .collect();
        if !pairs.is_empty() {
            return ("number", pairs);
        }
    }
    let pairs = base.steps.iter().copied().zip(new.steps.iter().copied());
    ("order", pairs.collect())
}

/// Time on one side's matched paths by (kind, name, rank), and by (waited-for rank, op) with
/// the steps that waited for it.
struct Sums {
    parts: [(&'static str, Ns); 10],
    what: HashMap<(Kind, String, Option<u32>), Ns>,
    waits: HashMap<(u32, String), (Ns, u64)>,
}

impl Default for Sums {
    fn default() -> Sums {
        Sums {
            parts: parts_of(0, &Composition::default()),
            what: HashMap::new(),
            waits: HashMap::new(),
        }
    }
}

impl Sums {
    fn add(&mut self, s: &StepView<'_>) {
        for (slot, (_, v)) in self
            .parts
            .iter_mut()
            .zip(parts_of(s.length_ns, s.composition))
        {
            slot.1 = slot.1.saturating_add(v);
        }
        for seg in s.segments {
            let name = if seg.kind == Kind::Host && seg.name == s.name {
                STEP_RANGE.to_owned()
            } else {
                seg.name.clone()
            };
            let e = self
                .what
                .entry((seg.kind, name, seg.place.rank))
                .or_default();
            *e = e.saturating_add(seg.length_ns);
        }
        let mut seen: Vec<(u32, &str)> = Vec::new();
        for w in s.rank_waits {
            let e = self
                .waits
                .entry((w.waited_for_rank, w.op.clone()))
                .or_default();
            e.0 = e.0.saturating_add(w.wait_ns);
            if !seen.contains(&(w.waited_for_rank, &w.op)) {
                seen.push((w.waited_for_rank, &w.op));
                e.1 += 1;
            }
        }
    }
}

/// Largest |change| first; ties by key. Unchanged rows left out, `top` kept.
fn largest_first<K: Ord, T>(mut rows: Vec<(K, T)>, d: impl Fn(&T) -> i64, top: usize) -> Vec<T> {
    rows.retain(|r| d(&r.1) != 0);
    rows.sort_by(|a, b| {
        d(&b.1)
            .unsigned_abs()
            .cmp(&d(&a.1).unsigned_abs())
            .then_with(|| a.0.cmp(&b.0))
    });
    rows.into_iter().take(top).map(|r| r.1).collect()
}

/// How the path changed from `base` to `new`; `waited_for` and `changed` capped at `top`.
/// `changed` covers the segments each step's path keeps in `longest_segments`: every one when
/// the paths were joined uncapped ([`crate::job_path::join`] with `top` = `usize::MAX`).
pub fn job_path_diff(base: &JobCriticalPath, new: &JobCriticalPath, top: usize) -> JobPathDiff {
    diff_views(&PathView::from(base), &PathView::from(new), top)
}

fn diff_views(base: &PathView<'_>, new: &PathView<'_>, top: usize) -> JobPathDiff {
    let (by, pairs) = pair(base, new);
    let (mut sb, mut sn) = (Sums::default(), Sums::default());
    let steps: Vec<StepPathChange> = pairs
        .iter()
        .map(|(b, n)| {
            sb.add(b);
            sn.add(n);
            StepPathChange {
                index_base: b.index,
                index_new: n.index,
                name_base: b.name.to_owned(),
                name_new: n.name.to_owned(),
                end_rank_base: b.end_rank,
                end_rank_new: n.end_rank,
                parts: changes(
                    parts_of(b.length_ns, b.composition),
                    parts_of(n.length_ns, n.composition),
                ),
                rank_waits_base: b.rank_waits.to_vec(),
                rank_waits_new: n.rank_waits.to_vec(),
            }
        })
        .collect();
    let mut keys: Vec<&(Kind, String, Option<u32>)> =
        sb.what.keys().chain(sn.what.keys()).collect();
    keys.sort();
    keys.dedup();
    let changed = keys
        .into_iter()
        .map(|k| {
            let (b, n) = (sb.what.get(k).copied(), sn.what.get(k).copied());
            let (b, n) = (b.unwrap_or(0), n.unwrap_or(0));
            let row = SegmentChange {
                kind: k.0,
                name: k.1.clone(),
                rank: k.2,
                base_ns: b,
                new_ns: n,
                delta_ns: delta(b, n),
            };
            ((k.1.clone(), k.0, k.2), row)
        })
        .collect();
    let changed = largest_first(changed, |r: &SegmentChange| r.delta_ns, top);
    let mut keys: Vec<&(u32, String)> = sb.waits.keys().chain(sn.waits.keys()).collect();
    keys.sort();
    keys.dedup();
    let waited_for = keys
        .into_iter()
        .map(|k| {
            let (b, n) = (
                sb.waits.get(k).copied().unwrap_or_default(),
                sn.waits.get(k).copied().unwrap_or_default(),
            );
            let row = WaitChange {
                waited_for_rank: k.0,
                op: k.1.clone(),
                base_ns: b.0,
                new_ns: n.0,
                delta_ns: delta(b.0, n.0),
                steps_base: b.1,
                steps_new: n.1,
            };
            (k.clone(), row)
        })
        .collect();
    let waited_for = largest_first(waited_for, |r: &WaitChange| r.delta_ns, top);
    JobPathDiff {
        steps_matched_by: by,
        steps_base: base.steps.len() as u64,
        steps_new: new.steps.len() as u64,
        steps_matched: steps.len() as u64,
        ranks_left_out_base: base.ranks_left_out.to_vec(),
        ranks_left_out_new: new.ranks_left_out.to_vec(),
        parts: changes(sb.parts, sn.parts),
        steps,
        waited_for,
        changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::critical_path::Place;

    fn seg(kind: Kind, name: &str, rank: u32, length_ns: Ns) -> Segment {
        Segment {
            kind,
            name: name.into(),
            place: Place {
                rank: Some(rank),
                ..Place::default()
            },
            start_ns: 0,
            end_ns: length_ns,
            length_ns,
        }
    }

    /// A step's path of `segs`, waiting `(rank, for rank, ns)` at the all-reduce.
    struct Step {
        name: String,
        segs: Vec<Segment>,
        composition: Composition,
        waits: Vec<RankWait>,
    }

    fn step(name: &str, segs: Vec<Segment>, waits: &[(u32, u32, Ns)]) -> Step {
        let mut composition = Composition::default();
        for s in &segs {
            match s.kind {
                Kind::Host => composition.host_ns += s.length_ns,
                Kind::StreamWait => composition.stream_wait_ns += s.length_ns,
                _ => composition.compute_ns += s.length_ns,
            }
        }
        composition.rank_wait_ns = Some(waits.iter().map(|w| w.2).sum());
        Step {
            name: name.into(),
            segs,
            composition,
            waits: waits
                .iter()
                .map(|&(rank, waited_for_rank, wait_ns)| RankWait {
                    rank,
                    waited_for_rank,
                    op: "allreduce".into(),
                    at_ns: 0,
                    wait_ns,
                })
                .collect(),
        }
    }

    fn path<'a>(by: &'static str, steps: &'a [Step]) -> PathView<'a> {
        PathView {
            steps_matched_by: by,
            ranks_left_out: &[],
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, s)| StepView {
                    index: i as u64 + 1,
                    name: &s.name,
                    end_rank: 0,
                    length_ns: s.segs.iter().map(|x| x.length_ns).sum(),
                    composition: &s.composition,
                    rank_waits: &s.waits,
                    segments: &s.segs,
                })
                .collect(),
        }
    }

    /// The straggler moves from rank 1 (a 900 ns stall) to rank 3 (300 ns): the waits, the
    /// sums and the segments by rank say so; steps pair by number, the unpaired ones left out.
    #[test]
    fn a_moved_straggler_shows_in_the_waits_and_the_segments_by_rank() {
        let on = |rank: u32, n: u32, stall| {
            step(
                &format!("ProfilerStep#{n}"),
                vec![
                    seg(Kind::Host, &format!("ProfilerStep#{n}"), 0, 10),
                    seg(Kind::StreamWait, "gemm", rank, stall),
                    seg(Kind::Kernel, "gemm", rank, 100),
                ],
                &[(0, rank, stall - 50)],
            )
        };
        let base = [on(1, 1, 900), on(1, 2, 900), on(1, 3, 900)];
        let new = [on(3, 2, 300), on(3, 3, 300), on(3, 4, 300)];
        let d = diff_views(&path("number", &base), &path("number", &new), 10);
        assert_eq!(d.steps_matched_by, "number");
        assert_eq!((d.steps_base, d.steps_new, d.steps_matched), (3, 3, 2));
        assert_eq!(d.steps[0].index_base, 2);
        assert_eq!(d.steps[0].index_new, 1);
        let length = &d.parts[0];
        assert_eq!(
            (length.part, length.base_ns, length.new_ns),
            ("length", 2020, 820)
        );
        let rank_wait = d.parts.last().unwrap();
        assert_eq!((rank_wait.part, rank_wait.delta_ns), ("rank_wait", -1200));
        let waits: Vec<(u32, Ns, Ns, u64, u64)> = d
            .waited_for
            .iter()
            .map(|w| {
                let (b, n) = (w.steps_base, w.steps_new);
                (w.waited_for_rank, w.base_ns, w.new_ns, b, n)
            })
            .collect();
        assert_eq!(waits, [(1, 1700, 0, 2, 0), (3, 0, 500, 0, 2)]);
        let rows: Vec<(Kind, &str, Option<u32>, i64)> = d
            .changed
            .iter()
            .map(|c| (c.kind, c.name.as_str(), c.rank, c.delta_ns))
            .collect();
        assert_eq!(
            rows,
            [
                (Kind::StreamWait, "gemm", Some(1), -1800),
                (Kind::StreamWait, "gemm", Some(3), 600),
                (Kind::Kernel, "gemm", Some(1), -200),
                (Kind::Kernel, "gemm", Some(3), 200),
            ]
        );
        // The steps' own ranges are one row, unchanged, so left out.
        assert!(d.changed.iter().all(|c| c.name != STEP_RANGE));
    }

    #[test]
    fn steps_without_numbers_pair_by_order() {
        let s = |name: &str| step(name, vec![seg(Kind::Kernel, "k", 0, 5)], &[]);
        let (base, new) = ([s("train"), s("train")], [s("ProfilerStep#7")]);
        let d = diff_views(&path("order", &base), &path("number", &new), 10);
        assert_eq!(d.steps_matched_by, "order");
        assert_eq!(d.steps_matched, 1);
        assert!(d.changed.is_empty());
        assert!(d.parts.iter().all(|p| p.delta_ns == 0));
    }
}
