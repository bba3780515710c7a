//! How the critical path changed between two traces: its length and composition, and the work
//! on it whose time changed most. Over the steps when both traces have steps (sums over every
//! step's path, with each side's step count), else over the window.

use std::collections::HashMap;

use cutrace_trace::Ns;
use serde::Serialize;

use super::{Composition, CriticalPath, Kind, PathReport};

/// The name a step's own host range (time in `ProfilerStep#N` outside any op) is summed under
/// in a diff: each step's range has its own name, which would make one row per step.
pub const STEP_RANGE: &str = "(step)";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathDiff {
    /// `steps` (sums over every step's path) or `window`.
    pub over: &'static str,
    /// Steps on each side (0 over the window).
    pub steps_base: u64,
    pub steps_new: u64,
    /// The length and each part of the composition: `length`, `host`, `compute`,
    /// `communication`, `copy`, `launch`, `sync`, `stream_wait`, `unexplained`.
    pub parts: Vec<PartChange>,
    /// Time on the path by what it was, largest change first.
    pub changed: Vec<OnPathChange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartChange {
    pub part: &'static str,
    pub base_ns: Ns,
    pub new_ns: Ns,
    pub delta_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OnPathChange {
    pub kind: Kind,
    pub name: String,
    pub base_ns: Ns,
    pub new_ns: Ns,
    pub delta_ns: i64,
}

/// The paths of one side summed: (length, composition, time by what, steps).
fn side(
    cp: &CriticalPath,
    over_steps: bool,
) -> (Ns, Composition, HashMap<(Kind, String), Ns>, u64) {
    // Each path with its step's name: host time in a step's own range is summed as one
    // `(step)` row, as the job diff sums it, not one row per step name.
    let paths: Vec<(&PathReport, Option<&str>)> = if over_steps {
        cp.steps
            .iter()
            .map(|s| (&s.path, Some(&s.name[..])))
            .collect()
    } else {
        cp.window.iter().map(|p| (p, None)).collect()
    };
    let mut c = Composition::default();
    let mut what: HashMap<(Kind, String), Ns> = HashMap::new();
    let mut length: Ns = 0;
    for &(p, step) in &paths {
        length = length.saturating_add(p.length_ns);
        let x = &p.composition;
        c.host_ns = c.host_ns.saturating_add(x.host_ns);
        c.compute_ns = c.compute_ns.saturating_add(x.compute_ns);
        c.communication_ns = c.communication_ns.saturating_add(x.communication_ns);
        c.copy_ns = c.copy_ns.saturating_add(x.copy_ns);
        c.launch_ns = c.launch_ns.saturating_add(x.launch_ns);
        c.sync_ns = c.sync_ns.saturating_add(x.sync_ns);
        c.stream_wait_ns = c.stream_wait_ns.saturating_add(x.stream_wait_ns);
        c.unexplained_ns = c.unexplained_ns.saturating_add(x.unexplained_ns);
        for (k, n, ns) in &p.by_what {
            let n = match step {
                Some(s) if *k == Kind::Host && n == s => STEP_RANGE.to_owned(),
                _ => n.clone(),
            };
            let e = what.entry((*k, n)).or_default();
            *e = e.saturating_add(*ns);
        }
    }
    let steps = if over_steps { paths.len() as u64 } else { 0 };
    (length, c, what, steps)
}

/// The length and the composition's parts, named as in the JSON.
pub(crate) fn parts(len: Ns, c: &Composition) -> [(&'static str, Ns); 9] {
    [
        ("length", len),
        ("host", c.host_ns),
        ("compute", c.compute_ns),
        ("communication", c.communication_ns),
        ("copy", c.copy_ns),
        ("launch", c.launch_ns),
        ("sync", c.sync_ns),
        ("stream_wait", c.stream_wait_ns),
        ("unexplained", c.unexplained_ns),
    ]
}

/// Each part's change, `base` and `new` named alike and in one order.
pub(crate) fn changes(
    base: impl IntoIterator<Item = (&'static str, Ns)>,
    new: impl IntoIterator<Item = (&'static str, Ns)>,
) -> Vec<PartChange> {
    base.into_iter()
        .zip(new)
        .map(|((part, base_ns), (_, new_ns))| PartChange {
            part,
            base_ns,
            new_ns,
            delta_ns: crate::units::delta_ns(base_ns, new_ns),
        })
        .collect()
}

/// How the path changed from `base` to `new`; `changed` capped at `top`.
pub fn diff(base: &CriticalPath, new: &CriticalPath, top: usize) -> PathDiff {
    let over_steps = !base.steps.is_empty() && !new.steps.is_empty();
    let (bl, bc, bw, bs) = side(base, over_steps);
    let (nl, nc, nw, ns) = side(new, over_steps);
    let delta = crate::units::delta_ns;
    let parts = changes(parts(bl, &bc), parts(nl, &nc));
    let mut keys: Vec<&(Kind, String)> = bw.keys().chain(nw.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut changed: Vec<OnPathChange> = keys
        .into_iter()
        .map(|k| {
            let (b, n) = (
                bw.get(k).copied().unwrap_or(0),
                nw.get(k).copied().unwrap_or(0),
            );
            OnPathChange {
                kind: k.0,
                name: k.1.clone(),
                base_ns: b,
                new_ns: n,
                delta_ns: delta(b, n),
            }
        })
        .filter(|c| c.delta_ns != 0)
        .collect();
    changed.sort_by(|a, b| {
        (b.delta_ns.unsigned_abs(), &a.name, a.kind).cmp(&(
            a.delta_ns.unsigned_abs(),
            &b.name,
            b.kind,
        ))
    });
    changed.truncate(top);
    PathDiff {
        over: if over_steps { "steps" } else { "window" },
        steps_base: bs,
        steps_new: ns,
        parts,
        changed,
    }
}
