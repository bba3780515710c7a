//! What `cutrace profile --list-metrics` shows: the metrics of a chip or of a chosen set, as a
//! table or as JSON (the rows serialize as they are).

use std::io::Write;

use serde::Serialize;

use crate::MetricType;

/// One metric as --list-metrics shows it.
#[derive(Debug, Serialize)]
pub struct MetricRow {
    pub name: String,
    /// counter, ratio or throughput.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub hw_unit: String,
    pub dim_unit: String,
    pub description: String,
}

/// The metrics listed, with the chip and, for a chosen set, its name and pass count.
#[derive(Debug, Serialize)]
pub struct Listing {
    pub chip: String,
    /// The set named with --set, else null.
    pub set: Option<&'static str>,
    pub metrics: Vec<MetricRow>,
    /// Replay passes the metrics need together; absent when listing every metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<usize>,
}

/// The word for a metric's type in the listing.
pub fn type_word(kind: Option<MetricType>) -> &'static str {
    match kind {
        Some(MetricType::Counter) => "counter",
        Some(MetricType::Ratio) => "ratio",
        Some(MetricType::Throughput) => "throughput",
        None => "?",
    }
}

/// The listing as an aligned table, with the pass count or, for base metrics, how rollups are
/// named.
pub fn write_listing(l: &Listing, out: &mut dyn Write) -> std::io::Result<()> {
    let what = match (l.set, l.passes) {
        (Some(set), _) => format!("metric set {set}"),
        (None, Some(_)) => "metrics".to_string(),
        (None, None) => "Range Profiler base metrics".to_string(),
    };
    writeln!(out, "{what} on {}: {} metrics", l.chip, l.metrics.len())?;
    let w = l.metrics.iter().map(|m| m.name.len()).max().unwrap_or(0);
    let unit = |m: &MetricRow| format!("{}/{}", m.hw_unit, m.dim_unit);
    let u = l.metrics.iter().map(|m| unit(m).len()).max().unwrap_or(0);
    writeln!(
        out,
        "  {:<w$}  {:<10}  {:<u$}  description",
        "name", "type", "unit"
    )?;
    for m in &l.metrics {
        writeln!(
            out,
            "  {:<w$}  {:<10}  {:<u$}  {}",
            m.name,
            m.kind,
            unit(m),
            m.description
        )?;
    }
    match l.passes {
        Some(p) => writeln!(
            out,
            "passes: {p} (each profiled kernel is replayed {p} time{})",
            if p == 1 { "" } else { "s" }
        )?,
        None => writeln!(
            out,
            "Base names take a rollup: counters .sum .avg .min .max (and .per_second, \
             .pct_of_peak_sustained_elapsed, ...), ratios .ratio .pct, throughputs \
             .avg.pct_of_peak_sustained_elapsed; `--list-metrics --metrics NAME` checks a name \
             and counts its passes."
        )?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, kind: Option<MetricType>) -> MetricRow {
        MetricRow {
            name: name.into(),
            kind: type_word(kind),
            hw_unit: "sm".into(),
            dim_unit: "cycles".into(),
            description: "d".into(),
        }
    }

    fn text(l: &Listing) -> String {
        let mut out = Vec::new();
        write_listing(l, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_set_is_a_table_with_its_passes() {
        let l = Listing {
            chip: "GH100".into(),
            set: Some("basic"),
            metrics: vec![
                row("sm__ctas_launched.sum", Some(MetricType::Counter)),
                row("x.ratio", None),
            ],
            passes: Some(1),
        };
        assert_eq!(
            text(&l),
            "metric set basic on GH100: 2 metrics\n\
             \x20 name                   type        unit       description\n\
             \x20 sm__ctas_launched.sum  counter     sm/cycles  d\n\
             \x20 x.ratio                ?           sm/cycles  d\n\
             passes: 1 (each profiled kernel is replayed 1 time)\n"
        );
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(json["metrics"][0]["type"], "counter");
        assert_eq!(json["passes"], 1);
    }

    #[test]
    fn base_metrics_say_how_rollups_are_named() {
        let l = Listing {
            chip: "GH100".into(),
            set: None,
            metrics: vec![row("sm__cycles_active", Some(MetricType::Throughput))],
            passes: None,
        };
        let t = text(&l);
        assert!(t.starts_with("Range Profiler base metrics on GH100: 1 metrics\n"));
        assert!(t.contains("throughput"));
        assert!(t.contains("Base names take a rollup"));
        assert!(serde_json::to_value(&l).unwrap().get("passes").is_none());
        let plural = Listing {
            set: None,
            passes: Some(9),
            ..l
        };
        assert!(text(&plural).starts_with("metrics on GH100"));
        assert!(text(&plural).ends_with("replayed 9 times)\n"));
    }
}
