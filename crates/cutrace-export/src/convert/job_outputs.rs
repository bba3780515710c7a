//! A distributed job to one `--chrome` file, one `--perfetto` trace and/or `--csv` tables with
//! a `rank` column. Each rank is a process of the file (`rank N (host H, pid P)`) holding its
//! GPUs, streams and host threads as the one-trace export lays them out (the one-trace writers,
//! given a rank's scope: `perfetto::RankScope`, `chrome::RankLanes`); every id a rank writes
//! (pids, tracks, flows, packet sequences, lanes) is its own.
//!
//! Ranks are read twice, one trace held at a time each time. The first pass is the job report's
//! map (`input::summarize_unit_and`) and its numbering (`JobReport::from_summaries`), so a rank
//! is numbered here as `cutrace report JOB` numbers it, the ranks' clocks are described as the
//! report describes them, and the Chrome file's one time base is known before its first event.
//! The second writes the ranks in rank order, streaming each into every output.
//!
//! Time: timestamps stay each host's own clock, as recorded; nothing is shifted between ranks
//! (CUPTI and Kineto do not align clocks across machines, and cutrace does not guess an
//! offset). The alignment is stated in each file (Perfetto: a track named for it; Chrome: the
//! `"cutrace"` member's notes and each rank's process labels) and on stderr.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cutrace_analysis::job_reduce::{ClockInfo, JobNote, JobReport};
use cutrace_analysis::{RankSummary, StepMatch};
use cutrace_trace::classify::Unit;
use cutrace_trace::{ExportMeta, Limits, Ns, ReadOptions, Trace, TraceError};

use super::written::Counts;
use super::ConvertError;
use crate::files::{self, OutFile, Placement, StagingDir};
use crate::outputs::{self, Output};
use crate::parquet::job::{partition_path, unit_path, Unread, META_DIR};
use crate::perfetto::wire::{bytes, msg, uint};
use crate::text::count;
use crate::{chrome, csv, meta, perfetto, tables};

/// What to write, and how to read.
pub(super) struct JobOutputs<'a> {
    pub chrome: Option<&'a Path>,
    pub perfetto: Option<&'a Path>,
    pub csv: Option<&'a Path>,
    pub force: bool,
    pub allow_damaged: bool,
    pub with_cmdline: bool,
    pub limits: Limits,
}

/// What the first pass found of a trace while it held it.
struct Look {
    earliest: Option<Ns>,
    damaged: (u64, u64),
}

/// A rank to write: its number, and the unit it comes from.
struct Chosen {
    rank: u32,
    unit: usize,
}

/// One rank written.
#[derive(Debug, Clone)]
pub struct JobRankWritten {
    pub rank: u32,
    pub path: PathBuf,
    pub counts: Counts,
    pub complete: bool,
}

/// What [`write`] wrote.
#[derive(Debug)]
pub struct JobFiles {
    /// By rank.
    pub ranks: Vec<JobRankWritten>,
    /// Traces not written: unreadable, or a second trace of a rank.
    pub unread: Vec<Unread>,
    pub clock: ClockInfo,
    pub chrome: Option<(PathBuf, chrome::Written)>,
    pub perfetto: Option<(PathBuf, perfetto::Written)>,
    /// The `--csv` directory, the tables written, and what of an earlier export was removed.
    pub csv: Option<(PathBuf, Vec<&'static str>, Vec<String>)>,
}

/// How the ranks' timestamps relate, in words: one sentence, for the files and for stderr.
pub fn clock_statement(c: &ClockInfo) -> String {
    let why = match c.alignment {
        "one_host" => format!(
            "every rank ran on {}, so they share one clock",
            c.hosts.first().map_or("one host", String::as_str)
        ),
        "several_hosts" => format!(
            "the ranks ran on {} hosts ({}), whose clocks CUPTI and Kineto do not align: ranks of \
             different hosts are offset by the difference of their clocks",
            c.hosts.len(),
            c.hosts.join(", ")
        ),
        _ => "the traces do not name their hosts: ranks on one host share its clock, ranks of \
              different hosts are offset by the difference of their clocks"
            .into(),
    };
    format!(
        "clock alignment {}: timestamps are each host's own clock, as recorded, none shifted; {why}",
        c.alignment
    )
}

/// The rank's name in the files: `rank N`, with the host and pid its trace names.
fn rank_name(rank: u32, s: &RankSummary) -> String {
    let mut about = Vec::new();
    if let Some(h) = &s.host {
        about.push(format!("host {h}"));
    }
    if let Some(p) = s.pid {
        about.push(format!("pid {p}"));
    }
    if about.is_empty() {
        format!("rank {rank}")
    } else {
        format!("rank {rank} ({})", about.join(", "))
    }
}

/// The first pass: every unit summarized as the job report does, on `threads` threads.
fn survey(
    units: &[Unit],
    limits: &Limits,
    done: &(dyn Fn(&'static str, usize) + Sync),
) -> Result<Vec<(RankSummary, Option<Look>)>, TraceError> {
    let threads = cutrace_trace::limits::cores();
    let share =
        (threads / units.len().max(1)).clamp(1, cutrace_trace::limits::import_threads(None));
    let opts = ReadOptions {
        import_threads: Some(share),
        limits: *limits,
    };
    let which = StepMatch::profiler_steps();
    let finished = AtomicUsize::new(0);
    type Slot = Option<Result<(RankSummary, Option<Look>), TraceError>>;
    let mut slots: Vec<Slot> = (0..units.len()).map(|_| None).collect();
    cutrace_trace::parallel::for_each(&mut slots, threads, |i, slot| {
        let look = |t: &Trace| Look {
            earliest: t.earliest_ns(),
            damaged: (t.meta.damaged_bytes, t.meta.damaged_regions),
        };
        *slot = Some(crate::input::summarize_unit_and(
            &units[i], &which, &opts, look,
        ));
        done("read", finished.fetch_add(1, Ordering::Relaxed) + 1);
    });
    slots
        .into_iter()
        .map(|s| {
            s.unwrap_or_else(|| {
                Err(TraceError::Unsupported {
                    path: PathBuf::from("?"),
                    what: "a rank's analysis stopped unexpectedly".into(),
                })
            })
        })
        .collect()
}

/// The ranks to write, by rank, numbered as the job report numbers them; the traces left out.
fn choose(
    units: &[Unit],
    surveyed: &[(RankSummary, Option<Look>)],
    report: &JobReport,
) -> (Vec<Chosen>, Vec<Unread>) {
    let by_paths: HashMap<&Vec<String>, usize> = surveyed
        .iter()
        .enumerate()
        .map(|(i, s)| (&s.0.paths, i))
        .collect();
    let numbered = report
        .ranks
        .iter()
        .map(|r| (r.rank, &r.paths))
        .chain(report.dead_ranks.iter().map(|d| (d.rank, &d.paths)));
    let mut chosen = Vec::new();
    let mut unread = Vec::new();
    let mut taken = vec![false; units.len()];
    for (rank, paths) in numbered {
        let Some(&i) = by_paths.get(paths) else {
            continue;
        };
        taken[i] = true;
        match &surveyed[i].1 {
            Some(_) => chosen.push(Chosen { rank, unit: i }),
            None => unread.push(Unread {
                rank: Some(rank),
                path: unit_path(&units[i]),
                reason: match &surveyed[i].0.dead {
                    Some(why) => crate::text::job::dead_text(why).to_string(),
                    None => "it holds no trace (a rank summary)".into(),
                },
            }),
        }
    }
    for note in &report.notes {
        if let JobNote::DuplicateRank { rank, left_out, .. } = note {
            if let Some(&i) = by_paths.get(left_out) {
                taken[i] = true;
                unread.push(Unread {
                    rank: Some(*rank),
                    path: unit_path(&units[i]),
                    reason: format!("rank {rank} again: the job's other trace of it is written"),
                });
            }
        }
    }
    for (i, u) in units.iter().enumerate() {
        if !taken[i] {
            unread.push(Unread {
                rank: None,
                path: unit_path(u),
                reason: "the job report left it out".into(),
            });
        }
    }
    chosen.sort_by_key(|c| c.rank);
    unread.sort_by_key(|u| u.rank);
    (chosen, unread)
}

/// Reads unit `u` for the second pass, with every core.
fn read(u: &Unit, limits: &Limits) -> Result<Trace, TraceError> {
    let opts = ReadOptions {
        import_threads: None,
        limits: *limits,
    };
    match u {
        Unit::Trace(p) => crate::input::load(p, &opts, &mut |_, _| {}),
        Unit::Parts { paths, .. } => {
            cutrace_trace::native::read_parts_with(paths, limits, &mut |_, _| {})
        }
        Unit::Summary(p) => Err(TraceError::Unsupported {
            path: p.clone(),
            what: "a rank summary, which holds no records".into(),
        }),
    }
}

/// The `--csv` tables of a job being written: one file per table, every rank's rows in rank
/// order with the rank last (as a hive partition's column is read), each rank's meta.json at
/// `meta/rank=N/meta.json` (as `--parquet`'s); put in place together at the end.
struct CsvJob {
    dir: PathBuf,
    mode: u32,
    files: Vec<(&'static str, OutFile)>,
    stage: StagingDir,
}

impl CsvJob {
    fn new(dir: &Path, mode: u32) -> Result<CsvJob, ConvertError> {
        let create = |source| ConvertError::Create {
            path: dir.to_owned(),
            source,
        };
        files::create_dir_all(dir, files::dir_mode(mode)).map_err(create)?;
        let stage = StagingDir::new(dir, "job").map_err(create)?;
        Ok(CsvJob {
            dir: dir.to_owned(),
            mode,
            files: Vec::new(),
            stage,
        })
    }

    fn add(&mut self, t: &Trace, rank: u32, with_cmdline: bool) -> Result<(), ConvertError> {
        let tail = format!(",{rank}");
        for name in tables::names_for(t) {
            let tb = tables::build(t, name);
            let dest = self.dir.join(format!("{name}.csv"));
            // A table's file is made, with its header, by the first rank that has the table.
            let (at, first) = match self.files.iter().position(|f| f.0 == name) {
                Some(at) => (at, false),
                None => {
                    let f = OutFile::create(&dest, self.mode).map_err(|source| {
                        ConvertError::Create {
                            path: dest.clone(),
                            source,
                        }
                    })?;
                    self.files.push((name, f));
                    (self.files.len() - 1, true)
                }
            };
            let mut w = std::io::BufWriter::with_capacity(1 << 20, self.files[at].1.file());
            let header = match first {
                true => csv::write_header(&mut w, &tb, &["rank"]),
                false => Ok(()),
            };
            header
                .and_then(|()| csv::write_body(&mut w, &tb, &tail))
                .and_then(|()| w.flush())
                .map_err(|source| ConvertError::Write {
                    shown: dest.display().to_string(),
                    source,
                })?;
        }
        let meta = meta::meta_json_text(t, with_cmdline)?;
        let rel = partition_path(META_DIR, rank).with_file_name("meta.json");
        let dest = self.stage.path().join(&rel);
        let parent = dest.parent().expect("a partition path has a directory");
        files::create_dir_all(parent, files::dir_mode(self.mode)).map_err(|source| {
            ConvertError::Create {
                path: parent.to_owned(),
                source,
            }
        })?;
        let mut f = OutFile::create(&dest, self.mode).map_err(|source| ConvertError::Create {
            path: dest.clone(),
            source,
        })?;
        f.file()
            .write_all(meta.as_bytes())
            .and_then(|()| f.commit(false))
            .map_err(|source| ConvertError::Write {
                shown: dest.display().to_string(),
                source,
            })
    }

    /// Puts the tables and `meta/` in place ([`Placement`]): with `replace`, what an earlier
    /// export left is removed; without, any of it refuses the export.
    fn finish(self, replace: bool) -> Result<(Vec<&'static str>, Vec<String>), ConvertError> {
        if let Some((_, f)) = self
            .files
            .iter()
            .find(|f| std::fs::symlink_metadata(f.1.dest()).is_ok_and(|m| m.is_dir()))
        {
            return Err(crate::staged::StageError::IsDirectory(f.dest().to_owned()).into());
        }
        let mut names: Vec<&'static str> = self.files.iter().map(|f| f.0).collect();
        let place_err =
            |e: crate::files::PlaceError| ConvertError::Stage(crate::staged::StageError::Place(e));
        let mut place =
            Placement::begin(&self.dir, replace, outputs::tables_in).map_err(place_err)?;
        for (_, f) in self.files {
            place.put_file(f).map_err(place_err)?;
        }
        let meta = self.stage.path().join(META_DIR);
        if meta.is_dir() {
            place.put_dir(&meta, META_DIR).map_err(place_err)?;
        }
        let removed = place.finish().map_err(place_err)?;
        self.stage.close().map_err(|source| ConvertError::Create {
            path: self.dir.clone(),
            source,
        })?;
        names.sort_by_key(|n| tables::ALL_NAMES.iter().position(|a| a == n));
        Ok((names, removed))
    }
}

/// The Perfetto trace of a job being written: the clock's track first, then each rank.
struct PerfettoJob {
    out: Output,
    /// The next rank's first uuid, flow id and sequence.
    uuid0: u64,
    flow0: u64,
    seq0: u64,
    written: perfetto::Written,
}

/// The clock's track (uuid 1) and its one instant, on sequence 1, apart from every rank's.
fn perfetto_clock(w: &mut impl Write, text: &str, at: Ns) -> std::io::Result<u64> {
    use crate::perfetto::wire::pf;
    let mut packets = 0;
    let mut put = |p: &[u8]| -> std::io::Result<()> {
        let mut head = Vec::new();
        bytes(&mut head, pf::TRACE_PACKET, p);
        packets += 1;
        w.write_all(&head)
    };
    let mut p = Vec::new();
    uint(&mut p, pf::SEQUENCE_ID, 1);
    msg(&mut p, pf::TRACK_DESCRIPTOR, |d| {
        uint(d, pf::TD_UUID, 1);
        bytes(d, pf::TD_NAME, text.as_bytes());
    });
    put(&p)?;
    // One instant, so that viewers that show only tracks with events show it.
    let mut p = Vec::new();
    uint(&mut p, pf::TIMESTAMP, at);
    uint(&mut p, pf::SEQUENCE_ID, 1);
    msg(&mut p, pf::TRACK_EVENT, |te| {
        uint(te, pf::TE_TRACK_UUID, 1);
        uint(te, pf::TE_TYPE, pf::INSTANT);
        bytes(te, pf::TE_CATEGORIES, b"cutrace");
        bytes(te, pf::TE_NAME, text.as_bytes());
    });
    put(&p)?;
    Ok(packets)
}

/// Writes the job `units` (as `classify` found them) to the outputs asked for; `done` hears
/// each pass's progress (`read`: the first, `converted`: the second).
pub(super) fn write(
    units: &[Unit],
    o: &JobOutputs<'_>,
    done: &(dyn Fn(&'static str, usize) + Sync),
) -> Result<JobFiles, ConvertError> {
    let surveyed = survey(units, &o.limits, done)?;
    let summaries: Vec<RankSummary> = surveyed.iter().map(|s| s.0.clone()).collect();
    let report = JobReport::from_summaries(&summaries, 0);
    let (chosen, unread) = choose(units, &surveyed, &report);
    if chosen.is_empty() {
        return Err(crate::parquet::job::JobError::NothingRead(unread).into());
    }
    if !o.allow_damaged {
        for c in &chosen {
            let (bytes, regions) = surveyed[c.unit].1.as_ref().map_or((0, 0), |l| l.damaged);
            if regions > 0 {
                let path = unit_path(&units[c.unit]);
                let e = crate::parquet::job::JobError::Damaged {
                    path,
                    bytes,
                    regions,
                };
                return Err(e.into());
            }
        }
    }
    let clock = report.clock.clone();
    let text = clock_statement(&clock);
    let earliest = chosen
        .iter()
        .filter_map(|c| surveyed[c.unit].1.as_ref().and_then(|l| l.earliest))
        .min();
    let base = chrome::time_base_of(earliest);
    // Exports are as private as the traces: the most restrictive mode of the files read.
    let mode = files::mode_of_inputs(chosen.iter().map(|c| unit_path(&units[c.unit])));

    let mut csv_job = o.csv.map(|d| CsvJob::new(d, mode)).transpose()?;
    let mut pf_job = match o.perfetto {
        Some(out) => {
            let mut w = super::open_export(out, "--perfetto", o.force, mode)?;
            let packets = perfetto_clock(&mut w, &text, earliest.unwrap_or(0))
                .map_err(super::writing(out))?;
            Some(PerfettoJob {
                out: w,
                uuid0: 2,
                flow0: 0,
                seq0: 1,
                written: perfetto::Written {
                    packets,
                    tracks: 1,
                    ..Default::default()
                },
            })
        }
        None => None,
    };
    let mut ch_job = match o.chrome {
        Some(out) => {
            let mut w = super::open_export(out, "--chrome", o.force, mode)?;
            let member = chrome_member(units, &chosen, &surveyed, (&text, base));
            chrome::write_job_header(&mut w, base, &member).map_err(super::writing(out))?;
            Some((w, chrome::Written::default()))
        }
        None => None,
    };

    let mut ranks = Vec::new();
    for (k, c) in chosen.iter().enumerate() {
        let unit = &units[c.unit];
        let mut t = read(unit, &o.limits)?;
        let name = rank_name(c.rank, &surveyed[c.unit].0);
        ranks.push(JobRankWritten {
            rank: c.rank,
            path: unit_path(unit),
            counts: Counts::of(&t),
            complete: t.meta.complete,
        });
        if let Some(j) = &mut csv_job {
            j.add(&t, c.rank, o.with_cmdline)?;
        }
        // The file's pid of the rank: its place in the job, from 1.
        let pid = k as u64 + 1;
        if let (Some(j), Some(out)) = (&mut pf_job, o.perfetto) {
            let scope = perfetto::RankScope {
                uuid0: j.uuid0,
                flow0: j.flow0,
                seq0: j.seq0,
                pid: pid as i64,
                name: name.clone(),
            };
            let w =
                perfetto::write_scoped(&mut j.out, &t, Some(scope)).map_err(super::writing(out))?;
            j.uuid0 += w.tracks + 1;
            j.flow0 += w.flows;
            j.seq0 += perfetto::SEQUENCES;
            j.written.packets += w.packets;
            j.written.tracks += w.tracks + 1;
            j.written.flows += w.flows;
            j.written.inverted += w.inverted;
        }
        if let (Some((w, sum)), Some(out)) = (&mut ch_job, o.chrome) {
            // Last: the times move to the file's base.
            t.map_times(|x| chrome::to_base(x, base));
            let host = surveyed[c.unit]
                .0
                .host
                .as_deref()
                .unwrap_or("an unnamed host");
            let labels = format!("times: {host}'s clock");
            let mut lanes = chrome::RankLanes::new(pid, name, labels, k as u64);
            let r =
                chrome::write_rank(w, &t, &mut lanes, sum.events).map_err(super::writing(out))?;
            sum.events += r.events;
            sum.flows += r.flows;
            sum.inverted += r.inverted;
        }
        done("converted", k + 1);
    }

    let csv = match (csv_job, o.csv) {
        (Some(j), Some(dir)) => {
            let (names, removed) = j.finish(o.force)?;
            Some((dir.to_owned(), names, removed))
        }
        _ => None,
    };
    let perfetto = match (pf_job, o.perfetto) {
        (Some(j), Some(out)) => {
            super::finish_export(j.out, out, "--perfetto", o.force)?;
            Some((out.to_owned(), j.written))
        }
        _ => None,
    };
    let chrome = match (ch_job, o.chrome) {
        (Some((mut w, sum)), Some(out)) => {
            chrome::write_job_footer(&mut w).map_err(super::writing(out))?;
            super::finish_export(w, out, "--chrome", o.force)?;
            Some((out.to_owned(), sum))
        }
        _ => None,
    };
    Ok(JobFiles {
        ranks,
        unread,
        clock,
        chrome,
        perfetto,
        csv,
    })
}

/// The Chrome file's `"cutrace"` member: the job's paths, the time base, and notes that say how
/// the file is laid out and what its clock is.
fn chrome_member(
    units: &[Unit],
    chosen: &[Chosen],
    surveyed: &[(RankSummary, Option<Look>)],
    (clock, base): (&str, Ns),
) -> ExportMeta {
    let mut notes = vec![
        "a distributed job: each rank is a process (pid = its place in the job, from 1; the \
         name says the rank and its host's pid), its host threads and GPU stream rows its \
         threads (tid from 1, named)"
            .to_string(),
        clock.to_string(),
        "ts and dur are microseconds with exactly 3 decimals: the traces' integer nanoseconds; \
         ts counts from baseTimeNanoseconds (time_base_ns here), a whole second before the \
         job's first record"
            .into(),
    ];
    for (k, c) in chosen.iter().enumerate() {
        notes.push(format!(
            "pid {}: {} from {}",
            k + 1,
            rank_name(c.rank, &surveyed[c.unit].0),
            unit_path(&units[c.unit]).display()
        ));
    }
    ExportMeta {
        version: Some(env!("CARGO_PKG_VERSION").into()),
        source_paths: Some(
            chosen
                .iter()
                .map(|c| unit_path(&units[c.unit]).display().to_string())
                .collect(),
        ),
        export_notes: Some(notes),
        time_base_ns: Some(base),
        complete: chosen.iter().all(|c| surveyed[c.unit].0.complete),
        ..ExportMeta::default()
    }
}

impl JobFiles {
    /// For a person: a warning per trace left out, a line per output, and the clock.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .unread
            .iter()
            .map(|u| match u.rank {
                Some(r) => format!(
                    "warning: rank {r} ({}) not written: {}",
                    u.path.display(),
                    u.reason
                ),
                None => format!("warning: {} not written: {}", u.path.display(), u.reason),
            })
            .collect();
        let mut all = Counts::default();
        for r in &self.ranks {
            let c = r.counts;
            all.kernels += c.kernels;
            all.api_calls += c.api_calls;
            all.copies += c.copies;
            all.memsets += c.memsets;
            all.syncs += c.syncs;
            all.ranges += c.ranges;
            all.memory += c.memory;
            all.cpu_ops += c.cpu_ops;
        }
        let (first, last) = match (self.ranks.first(), self.ranks.last()) {
            (Some(a), Some(b)) => (a.rank, b.rank),
            _ => (0, 0),
        };
        let ranks = format!(
            "{} (rank {first} to {last}; {all})",
            count(self.ranks.len(), "rank", "ranks")
        );
        let cut = self.ranks.iter().filter(|r| !r.complete).count();
        let incomplete = match cut {
            0 => String::new(),
            n => format!("; {} INCOMPLETE", count(n, "trace", "traces")),
        };
        if let Some((dir, names, removed)) = &self.csv {
            out.push(format!(
                "wrote {ranks} to {} as CSV ({}, each with a rank column; meta/rank=N/meta.json){incomplete}{}",
                dir.display(),
                count(names.len(), "table", "tables"),
                match removed.len() {
                    0 => String::new(),
                    n => format!(
                        "; removed {} of an earlier export ({})",
                        count(n, "file or directory", "files and directories"),
                        removed.join(", ")
                    ),
                }
            ));
        }
        if let Some((file, w)) = &self.perfetto {
            out.push(format!(
                "wrote {ranks}, {} ({}, {}) to {}: one process per rank{incomplete}",
                count(w.flows as usize, "flow arrow", "flow arrows"),
                count(w.tracks as usize, "track", "tracks"),
                count(w.packets as usize, "packet", "packets"),
                outputs::shown(file)
            ));
        }
        if let Some((file, w)) = &self.chrome {
            out.push(format!(
                "wrote {ranks}, {} ({}) to {}: one process per rank{incomplete}",
                count(w.flows as usize, "flow arrow", "flow arrows"),
                count(w.events as usize, "event", "events"),
                outputs::shown(file)
            ));
        }
        out.push(clock_statement(&self.clock));
        out
    }
}
