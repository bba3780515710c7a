//! What a conversion wrote, as values, and the summary lines a person reads of it.

use std::path::PathBuf;

use cutrace_trace::Trace;

use crate::outputs::shown;
use crate::parquet::job::JobWritten;
use crate::text::{count, name_some};
use crate::{chrome, perfetto};

/// The records of a trace that every output holds, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub kernels: usize,
    pub api_calls: usize,
    pub copies: usize,
    pub memsets: usize,
    pub syncs: usize,
    pub ranges: usize,
    /// Allocations and frees; said only when there are any (other traces' lines are as before).
    pub memory: usize,
    /// Host ops (torch's CPU ops and Python calls); said only when there are any.
    pub cpu_ops: usize,
}

impl Counts {
    pub fn of(t: &Trace) -> Counts {
        Counts {
            kernels: t.kernels.len(),
            api_calls: t.api_calls.len(),
            copies: t.memcpys.len(),
            memsets: t.memsets.len(),
            syncs: t.syncs.len(),
            ranges: t.ranges.len(),
            memory: t.memory.len(),
            cpu_ops: t.host_ops.len(),
        }
    }
}

impl std::fmt::Display for Counts {
    /// "N kernels, N API calls, N copies, N memsets, N syncs, N ranges" (singular for 1), and
    /// ", N memory events" and ", N CPU ops" when there are any.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let all = [
            count(self.kernels, "kernel", "kernels"),
            count(self.api_calls, "API call", "API calls"),
            count(self.copies, "copy", "copies"),
            count(self.memsets, "memset", "memsets"),
            count(self.syncs, "sync", "syncs"),
            count(self.ranges, "range", "ranges"),
        ];
        f.write_str(&all.join(", "))?;
        if self.memory > 0 {
            write!(
                f,
                ", {}",
                count(self.memory, "memory event", "memory events")
            )?;
        }
        if self.cpu_ops > 0 {
            write!(f, ", {}", count(self.cpu_ops, "CPU op", "CPU ops"))?;
        }
        Ok(())
    }
}

/// What the converted trace says of itself, as every summary line repeats it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSummary {
    pub counts: Counts,
    /// The recorder's notes (where each output puts them, its line says).
    pub notes: usize,
    /// False for a trace the recorder did not finish: converted as far as it was recovered.
    pub complete: bool,
    pub incomplete_reason: Option<String>,
}

impl TraceSummary {
    pub fn of(t: &Trace) -> TraceSummary {
        TraceSummary {
            counts: Counts::of(t),
            notes: t.meta.notes.len(),
            complete: t.meta.complete,
            incomplete_reason: t.meta.incomplete_reason.clone(),
        }
    }

    /// "; N notes from the recorder WHERE": where this output put the recorder's notes (or that
    /// it could not). Empty when the trace has none.
    fn notes_at(&self, place: &str) -> String {
        match self.notes {
            0 => String::new(),
            n => format!(
                "; {} from the recorder{}{place}",
                count(n, "note", "notes"),
                if place.starts_with(':') { "" } else { " " }
            ),
        }
    }
}

/// One output in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A table directory (`--csv`, `--parquet`, or both into one directory) and its meta.json.
    Tables {
        dir: PathBuf,
        csv: bool,
        parquet: bool,
        trace: TraceSummary,
        /// What of an earlier export was removed and not written anew (`--force`).
        removed: Vec<String>,
    },
    /// The `--perfetto` file (`-`: stdout).
    Perfetto {
        out: PathBuf,
        file: perfetto::Written,
        trace: TraceSummary,
        /// What the file made of the trace's counters, in words.
        counter_lines: Vec<String>,
    },
    /// The `--pprof` file (`-`: stdout): the PC samples as a pprof profile.
    Pprof {
        out: PathBuf,
        file: crate::pprof::Written,
        /// Why the trace has no PC samples, when its recorder said (META `pc_sampling.error`).
        error: Option<String>,
    },
    /// The `--chrome` file (`-`: stdout).
    Chrome {
        out: PathBuf,
        file: chrome::Written,
        trace: TraceSummary,
        /// What the file made of the trace's counters, in words.
        counter_lines: Vec<String>,
    },
}

impl Written {
    /// What was written, for a person: one line per output and format, then what became of
    /// the counters and any warning (`warning: …`).
    pub fn lines(&self) -> Vec<String> {
        match self {
            Written::Tables {
                dir,
                csv,
                parquet,
                trace,
                removed,
            } => tables_lines(dir, (*csv, *parquet), trace, removed),
            Written::Perfetto {
                out,
                file,
                trace,
                counter_lines,
            } => perfetto_lines(out, file, trace, counter_lines),
            Written::Chrome {
                out,
                file,
                trace,
                counter_lines,
            } => chrome_lines(out, file, trace, counter_lines),
            Written::Pprof { out, file, error } => {
                let mut v = vec![format!(
                    "wrote {} (one per instruction and warp state, label stall_reason; {}, {}) to \
                 {} for go tool pprof or speedscope",
                    count(file.samples as usize, "pprof sample", "pprof samples"),
                    count(file.locations as usize, "instruction", "instructions"),
                    count(file.functions as usize, "function", "functions"),
                    shown(out)
                )];
                if file.samples == 0 {
                    v.push(format!(
                        "warning: the profile is empty: the trace has no PC samples ({})",
                        error
                            .as_deref()
                            .unwrap_or("sampling found no kernel running")
                    ));
                }
                v
            }
        }
    }
}

fn tables_lines(
    dir: &std::path::Path,
    (csv, parquet): (bool, bool),
    trace: &TraceSummary,
    removed: &[String],
) -> Vec<String> {
    let removed = match removed.len() {
        0 => String::new(),
        n => format!(
            "; removed {} of an earlier export ({})",
            count(n, "table", "tables"),
            name_some(removed)
        ),
    };
    let incomplete = if trace.complete {
        ""
    } else {
        " (the trace is INCOMPLETE; see meta.json)"
    };
    let mut out = Vec::new();
    if csv {
        // Both formats in one directory: the Parquet line says what was removed.
        out.push(format!(
            "wrote {} to {}{}{incomplete}{}",
            trace.counts,
            dir.display(),
            trace.notes_at("in meta.json"),
            if parquet { "" } else { removed.as_str() }
        ));
    }
    if parquet {
        out.push(format!(
            "wrote {} to {} as Parquet{}{incomplete}{removed}",
            trace.counts,
            dir.display(),
            trace.notes_at("in meta.json and in each file's `cutrace.meta` key-value metadata"),
        ));
    }
    out
}

fn perfetto_lines(
    out: &std::path::Path,
    file: &perfetto::Written,
    trace: &TraceSummary,
    counter_lines: &[String],
) -> Vec<String> {
    let inverted = match file.inverted {
        0 => String::new(),
        n => format!(
            "; {} that end before they start written as zero-length slices",
            count(n as usize, "record", "records")
        ),
    };
    let notes = trace.notes_at(
        ": not included in the .pftrace (--csv or --parquet writes them to meta.json; \
         `cutrace report` shows them)",
    );
    let incomplete = if trace.complete {
        ""
    } else {
        " (the trace is INCOMPLETE: this is what was recovered)"
    };
    let mut lines = vec![format!(
        "wrote {}, {} ({}, {}) to {}{inverted}{notes}{incomplete}",
        trace.counts,
        count(file.flows as usize, "flow arrow", "flow arrows"),
        count(file.tracks as usize, "track", "tracks"),
        count(file.packets as usize, "packet", "packets"),
        shown(out),
    )];
    lines.extend(counter_lines.iter().cloned());
    lines
}

fn chrome_lines(
    out: &std::path::Path,
    file: &chrome::Written,
    trace: &TraceSummary,
    counter_lines: &[String],
) -> Vec<String> {
    let incomplete = if trace.complete {
        String::new()
    } else {
        format!(
            " (the trace is INCOMPLETE{}: this is what was recovered; the file's \"cutrace\" \
             member says so)",
            trace
                .incomplete_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        )
    };
    let inverted = match file.inverted {
        0 => String::new(),
        n => format!(
            "; {} that end before they start written with dur 0",
            count(n as usize, "record", "records")
        ),
    };
    let notes = trace
        .notes_at("in the file's top-level \"cutrace\" member (\"notes\"), which viewers ignore");
    let mut lines = vec![format!(
        "wrote {}, {} ({}) to {}{inverted}{notes}{incomplete}",
        trace.counts,
        count(file.flows as usize, "flow arrow", "flow arrows"),
        count(file.events as usize, "event", "events"),
        shown(out),
    )];
    lines.extend(counter_lines.iter().cloned());
    if file.rows_past_u32_tid > 0 {
        lines.push(format!(
            "warning: {} of overlapping GPU work in {} have a tid above 2^32-1; Perfetto's JSON \
             importer shows them on the GPU's process row and drops the events that overlap \
             there (--perfetto keeps every row apart)",
            count(file.rows_past_u32_tid as usize, "row", "rows"),
            shown(out)
        ));
    }
    lines
}

/// A job converted: what was left out while finding its traces, and what was written.
#[derive(Debug)]
pub struct JobConverted {
    /// What finding the job's traces left out, in words.
    pub notes: Vec<String>,
    /// The `--parquet` directory and its partitions.
    pub parquet: Option<(PathBuf, JobWritten)>,
    /// `--csv`, `--chrome`, `--perfetto`.
    pub files: Option<super::JobFiles>,
}

impl JobConverted {
    /// For a person: the notes, then per output a warning per trace left out and its lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        if let Some((dir, w)) = &self.parquet {
            out.extend(w.lines(dir));
        }
        if let Some(f) = &self.files {
            out.extend(f.lines());
        }
        out
    }
}
