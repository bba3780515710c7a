//! What `cutrace doctor` reports: one `Check` per question, and the verdict that decides the exit
//! status (0: tracing and counters available, 1: counters not, 2: not even tracing).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// What a failed check takes away. Tracing (Activity/Callback API) and counter profiling (Range
/// Profiling, PM Sampling) are separate because NVIDIA's permission model separates them: tracing
/// needs no privilege, while the counters are admin-only unless opened (the ERR_NVGPUCTRPERM page)
/// and held by one client at a time (the DCGM overview, Nsight Compute's guide).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Affects {
    Tracing,
    Counters,
    None,
}

/// A file (as an admin would type its path) and the value read from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub file: String,
    pub value: String,
}

impl Evidence {
    pub fn new(file: impl Into<String>, value: impl Into<String>) -> Self {
        Evidence {
            file: file.into(),
            value: value.into(),
        }
    }

    pub fn absent(file: impl Into<String>) -> Self {
        Evidence::new(file, "(absent)")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub status: Status,
    /// What is lost when `status` is `fail`.
    pub affects: Affects,
    /// One line: the verdict in words.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    pub explanation: String,
    /// Exact commands, in order; empty when nothing needs doing.
    pub fix: Vec<String>,
    /// Where the rule applied here comes from (NVIDIA pages).
    pub sources: Vec<&'static str>,
}

impl Check {
    pub fn new(
        id: &'static str,
        status: Status,
        affects: Affects,
        summary: impl Into<String>,
    ) -> Self {
        Check {
            id,
            status,
            affects,
            summary: summary.into(),
            evidence: Vec::new(),
            explanation: String::new(),
            fix: Vec::new(),
            sources: Vec::new(),
        }
    }

    pub fn evidence(mut self, e: Vec<Evidence>) -> Self {
        self.evidence = e;
        self
    }

    pub fn explain(mut self, text: impl Into<String>) -> Self {
        self.explanation = text.into();
        self
    }

    pub fn fix<S: Into<String>>(mut self, cmds: impl IntoIterator<Item = S>) -> Self {
        self.fix = cmds.into_iter().map(Into::into).collect();
        self
    }

    pub fn sources(mut self, s: &[&'static str]) -> Self {
        self.sources = s.to_vec();
        self
    }

    /// True when this check, as it stands, takes `what` away.
    pub fn blocks(&self, what: Affects) -> bool {
        self.status == Status::Fail && self.affects == what
    }
}

/// The result of all checks (and of the probe, when it ran).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub root: String,
    pub checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<crate::probe::ProbeReport>,
    pub tracing_available: bool,
    pub counters_available: bool,
    pub exit_status: i32,
}

impl Report {
    /// The report as the doctor's text output: one line per check, its evidence, reasons and fix
    /// when it did not pass (always with `verbose`), the probe's steps, and the verdict.
    pub fn render_text(&self, verbose: bool) -> String {
        let r = self;
        use std::fmt::Write;
        let mut out = String::new();
        for c in &r.checks {
            let _ = writeln!(out, "{} {:<16} {}", mark(c.status), c.id, c.summary);
            if c.status == Status::Ok && !verbose {
                continue;
            }
            for e in &c.evidence {
                let _ = writeln!(out, "        evidence: {}: {}", e.file, e.value);
            }
            if !c.explanation.is_empty() {
                let _ = writeln!(out, "        why: {}", c.explanation);
            }
            if !c.fix.is_empty() {
                let _ = writeln!(out, "        fix:");
                for f in &c.fix {
                    let _ = writeln!(out, "          {f}");
                }
            }
        }
        if let Some(p) = &r.probe {
            let _ = writeln!(out);
            let _ = write!(out, "{}", p.render_text());
        }
        let _ = writeln!(out);
        let yes = |b| if b { "available" } else { "NOT available" };
        let _ = writeln!(
            out,
            "tracing: {}; counter profiling: {}{}",
            yes(r.tracing_available),
            yes(r.counters_available),
            if r.probe.is_none() && r.tracing_available {
                "  (static verdict; --probe asks CUPTI)"
            } else {
                ""
            }
        );
        out
    }

    pub fn new(root: String, checks: Vec<Check>) -> Self {
        let mut r = Report {
            root,
            checks,
            probe: None,
            tracing_available: true,
            counters_available: true,
            exit_status: 0,
        };
        r.recompute();
        r
    }

    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Attach a probe result; where it measured something, it overrules the static verdict,
    /// because CUPTI's real answer is the ground truth the static checks only predict.
    pub fn with_probe(mut self, probe: crate::probe::ProbeReport) -> Self {
        self.probe = Some(probe);
        self.recompute();
        self
    }

    fn recompute(&mut self) {
        let mut tracing = !self.checks.iter().any(|c| c.blocks(Affects::Tracing));
        let mut counters = !self.checks.iter().any(|c| c.blocks(Affects::Counters));
        if let Some(p) = &self.probe {
            if let Some(v) = p.counters_available() {
                counters = v;
            }
            if let Some(v) = p.tracing_available() {
                tracing = v;
            }
        }
        counters &= tracing;
        self.tracing_available = tracing;
        self.counters_available = counters;
        self.exit_status = if !tracing {
            2
        } else if !counters {
            1
        } else {
            0
        };
    }
}

fn mark(s: Status) -> &'static str {
    match s {
        Status::Ok => "  ok ",
        Status::Warn => " WARN",
        Status::Fail => " FAIL",
    }
}
