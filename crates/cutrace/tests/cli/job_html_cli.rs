//! `cutrace report JOB --html`: the job's page is written as every cutrace output is (`--force`
//! replaces a regular file), opens with the verdict, has one timeline lane per rank with
//! communication told from compute, and every number it marks (`data-check`) equals the job
//! JSON's (`--format json`). A job of tests/tools/gen_job.py, with file names a browser would
//! read as markup.

use std::collections::BTreeMap;
use std::path::Path;

use cutrace_testkit::{loud, Dir, Run};
use serde_json::Value;

use crate::job_cli::{gen, python, report};
use crate::util::bin;

/// Every `(data-check, data-rank or data-step, data-value)` the page marks, in page order.
fn marks(page: &str) -> Vec<(String, Option<String>, String)> {
    let attr = |tag: &str, name: &str| {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_owned())
    };
    page.match_indices("data-check=\"")
        .map(|(i, _)| {
            let start = page[..i].rfind('<').unwrap();
            let tag = &page[start..start + page[start..].find('>').unwrap()];
            let check = attr(tag, "data-check").unwrap();
            let key = attr(tag, "data-rank").or_else(|| attr(tag, "data-step"));
            (check, key, attr(tag, "data-value").unwrap())
        })
        .collect()
}

/// The page's data block for its script.
fn data(page: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"cutrace-data\">";
    let from = page.find(open).unwrap() + open.len();
    let to = from + page[from..].find("</script>").unwrap();
    serde_json::from_str(&page[from..to].replace("\\u003c", "<")).unwrap()
}

/// `v` at a dotted path (`summary.busy_pct_min.rank`).
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// The marked value equals the JSON's: integers exactly, floats to the last bit or two (serde_json
/// without `float_roundtrip` parses the JSON's shortest digits to a neighbouring f64 at times;
/// tests/html_browser.py compares them exactly).
fn same(mark: &str, json: &Value, what: &str) {
    match json {
        Value::Number(n) if n.is_f64() => {
            let (page, json) = (mark.parse::<f64>().unwrap(), n.as_f64().unwrap());
            assert!(
                (page - json).abs() <= json.abs() * 1e-14,
                "{what}: page {mark}, JSON {n}"
            );
        }
        Value::Number(n) => assert_eq!(mark, n.to_string(), "{what}"),
        other => panic!("{what}: the JSON has {other}, the page {mark}"),
    }
}

fn html(inputs: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    bin()
        .arg("report")
        .args(inputs)
        .arg("--html")
        .arg(out)
        .args(extra)
        .run()
}

/// Checks the page of `job` against its JSON; returns how many numbers were compared.
fn check_page(page: &str, json: &Value) -> usize {
    // The verdict comes first: the first section, before any heading but the title.
    let verdict = page.find("<section id=\"verdict\"").expect("a verdict");
    assert!(page.find("<section").unwrap() == verdict);
    assert!(page.find("<h2").unwrap() > verdict);
    let ranks: BTreeMap<String, &Value> = json["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].to_string(), r))
        .collect();
    let steps: BTreeMap<String, &Value> = json["steps"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["index"].to_string(), s))
        .collect();
    let mut n = 0;
    let mut per_rank: BTreeMap<String, usize> = BTreeMap::new();
    for (check, key, value) in marks(page) {
        let want = match (check.strip_prefix("summary."), &key) {
            (Some(_), None) => at(json, &check),
            (None, Some(k)) if check.starts_with("step_") => {
                let field = check.strip_prefix("step_").unwrap();
                &steps[k][field]
            }
            (None, Some(k)) => {
                *per_rank.entry(k.clone()).or_default() += 1;
                &ranks[k][&check]
            }
            _ => panic!("an unexpected mark {check} {key:?}"),
        };
        same(&value, want, &format!("{check} {key:?}"));
        n += 1;
    }
    // Every rank's busy, compute, communication, exposed communication and wait.
    assert_eq!(per_rank.len(), ranks.len());
    assert!(per_rank.values().all(|&k| k == 5), "{per_rank:?}");
    for r in ranks.values() {
        let (busy, exposed) = (r["busy_ns"].as_u64(), r["exposed_comm_ns"].as_u64());
        assert_eq!(
            r["compute_ns"].as_u64(),
            Some(busy.unwrap() - exposed.unwrap())
        );
    }
    n
}

#[test]
fn job_page_has_the_verdict_first_a_lane_per_rank_and_the_json_numbers() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-html");
    let (job, answer) = gen(py, &dir, "job", &["--ranks", "4", "--steps", "3"]);
    // Names a browser would read as markup, from the untrusted job directory.
    let hostile = "rank2_<b id=x>'\"&amp;.json";
    std::fs::rename(job.join("rank2.json"), job.join(hostile)).unwrap();
    let json = report(&[&job], &[]);
    let out = dir.path("job.html");
    let o = html(&[&job], &out, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(&out).unwrap();
    let n = check_page(&page, &json);
    assert!(n >= 20 + 4 * 5, "only {n} numbers marked");
    // The verdict's figures are the JSON's summary, which says who waited and the skew.
    let s = &json["summary"];
    assert_eq!(s["ranks"], 4);
    for k in ["busy_ns", "comm_ns", "exposed_comm_ns", "wait_ns"] {
        let sum: u64 = answer["ranks"]
            .as_object()
            .unwrap()
            .values()
            .map(|r| r[k].as_u64().unwrap())
            .sum();
        assert_eq!(s[k], sum, "summary.{k}");
    }
    for k in ["most_waiting.rank", "least_waiting.rank", "skew_max_ns"] {
        assert!(page.contains(&format!("data-check=\"summary.{k}\"")), "{k}");
    }
    // One lane per rank, in rank order, each with busy time and communication in it.
    let d = data(&page);
    let lanes = d["timelines"][0]["lod"]["lanes"].as_array().unwrap();
    let ranks: Vec<u64> = lanes.iter().map(|l| l["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    for l in lanes {
        let finest = l["levels"].as_array().unwrap().last().unwrap();
        let b = finest.as_str().unwrap().as_bytes();
        let busy = b.chunks(2).filter(|c| c[0] != b'0').count();
        let comm = b.chunks(2).filter(|c| c[1] != b'0').count();
        assert!(busy > comm && comm > 0, "rank {}: {busy} {comm}", l["rank"]);
        // Communication never exceeds busy time in a bucket.
        let v = |c: u8| cutrace_export::html::lod::b64_value(c);
        assert!(b.chunks(2).all(|c| v(c[1]) <= v(c[0])));
    }
    // The hostile file name is escaped wherever it shows, never markup.
    assert!(!page.contains("<b id=x>"));
    assert!(page.contains("rank2_&lt;b id=x&gt;&#39;&quot;&amp;amp;.json"));
    // Written as every output is: an existing file is refused, --force replaces it.
    let o = html(&[&job], &out, &[]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    std::fs::write(&out, "old").unwrap();
    let o = html(&[&job], &out, &["--force"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);
    // --html - is stdout.
    let o = bin().arg("report").arg(&job).args(["--html", "-"]).run_ok();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), page);
}

#[test]
fn a_job_page_with_dead_ranks_and_from_summaries() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-html-dead");
    let (job, _) = gen(
        py,
        &dir,
        "job",
        &["--ranks", "4", "--dead-truncated", "3", "--missing", "2"],
    );
    let json = report(&[&job], &[]);
    let out = dir.path("dead.html");
    assert_eq!(html(&[&job], &out, &[]).status.code(), Some(0));
    let page = std::fs::read_to_string(&out).unwrap();
    check_page(&page, &json);
    assert_eq!(json["summary"]["dead_ranks"], 1);
    assert_eq!(json["summary"]["missing_ranks"], 1);
    // Ranks left out make the verdict red, and name them.
    assert!(page.contains("<section id=\"verdict\" class=\"box lost\">"));
    assert!(page.contains("DEAD: rank 3"));
    assert!(page.contains("MISSING: no trace for 1 rank: 2"));
    let lanes = data(&page)["timelines"][0]["lod"]["lanes"].clone();
    let ranks: Vec<u64> = lanes
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1]);
    // From rank summaries: the same numbers, and no lane (a summary holds no intervals).
    let sums: Vec<_> = (0..2)
        .map(|i| {
            let s = dir.path(&format!("s{i}.json"));
            bin()
                .args(["report", "--rank-summary", "-o"])
                .arg(&s)
                .arg(job.join(format!("rank{i}.json")))
                .run_ok();
            s
        })
        .collect();
    let refs: Vec<&Path> = sums.iter().map(|p| p.as_path()).collect();
    let out = dir.path("sums.html");
    assert_eq!(html(&refs, &out, &[]).status.code(), Some(0));
    let page = std::fs::read_to_string(&out).unwrap();
    check_page(&page, &report(&refs, &[]));
    assert!(page.contains("ranks read from summaries hold none"));
    assert!(data(&page)["timelines"][0]["lod"]["lanes"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// `report JOB --critical-path --html`: the timeline's first lane is the path, the planted
/// straggler's stall (a stream wait) on it; the page marks each step's path length and time
/// waited for other ranks, and the slowest step's rank waits and longest segments, each equal
/// to the job JSON's `critical_path`; each of those rows zooms the timeline.
#[test]
fn the_critical_path_is_drawn_and_marked_as_the_json_has_it() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-html-path");
    let args = [
        "--ranks",
        "4",
        "--steps",
        "4",
        "--kernels",
        "4",
        "--seed",
        "7",
        "--syncs",
    ];
    let (job, _) = gen(py, &dir, "job", &args);
    let out = dir.path("page.html");
    let o = html(&[&job], &out, &["--critical-path", "--top", "100000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&out).unwrap();
    let json = report(&[&job], &["--critical-path"]);
    let cp = &json["critical_path"];
    let steps = cp["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    let lanes = data(&page)["timelines"][0]["lod"]["lanes"].clone();
    assert_eq!(lanes[0]["role"], "path", "{}", lanes[0]);
    assert!(lanes[1]["rank"].is_u64());
    let finest = lanes[0]["levels"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap();
    assert!(
        finest.as_bytes().chunks(2).any(|b| b[1] == b'7'),
        "no bucket of the path is mostly a stream wait"
    );
    let slow = steps
        .iter()
        .max_by_key(|s| {
            (
                s["length_ns"].as_u64(),
                std::cmp::Reverse(s["index"].as_u64()),
            )
        })
        .unwrap();
    let (mut waits, mut segs, mut n) = (Vec::new(), Vec::new(), 0);
    for (check, key, value) in marks(&page) {
        let step = |k: &Option<String>| &steps[k.as_ref().unwrap().parse::<usize>().unwrap() - 1];
        match check.as_str() {
            "cp_step_length_ns" => same(&value, &step(&key)["length_ns"], &check),
            "cp_step_rank_wait_ns" => {
                same(&value, &step(&key)["composition"]["rank_wait_ns"], &check)
            }
            "cp_rank_wait_ns" => waits.push((key.unwrap(), value)),
            "cp_segment_length_ns" => segs.push(value),
            _ => continue,
        }
        n += 1;
    }
    assert_eq!(n, 2 * steps.len() + waits.len() + segs.len());
    let want: Vec<(String, String)> = slow["rank_waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["rank"].to_string(), w["wait_ns"].to_string()))
        .collect();
    assert!(
        !want.is_empty(),
        "the slowest step waited for the straggler: {slow}"
    );
    assert_eq!(waits, want);
    let want: Vec<String> = slow["longest_segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["length_ns"].to_string())
        .collect();
    assert_eq!(segs, want);
    let rows = page
        .matches("<tr class=\"zoom\" data-timeline=\"tl\"")
        .count();
    let off = page.matches("<tr class=\"off\"").count();
    assert_eq!(rows + off, steps.len() + waits.len() + segs.len());
    assert!(rows > off, "{rows} rows are links, {off} are not");
    // Each step's ranks on the path, from its end back: the rank it ended on, then the rank
    // each wait went on along, the latest first.
    for s in steps {
        let mut on = vec![s["end_rank"].as_u64().unwrap()];
        for w in s["rank_waits"].as_array().unwrap().iter().rev() {
            let r = w["waited_for_rank"].as_u64().unwrap();
            if on.last() != Some(&r) {
                on.push(r);
            }
        }
        let chain: Vec<String> = on.iter().map(|r| format!("rank {r}")).collect();
        assert!(
            page.contains(&format!("<td>{}</td>", chain.join(" ← "))),
            "step {}: {}",
            s["index"],
            chain.join(" ← ")
        );
    }
    // Rank waits are inside the parts, not one of them.
    assert!(
        page.contains("; of all that, "),
        "the rank waits are told apart"
    );
}
