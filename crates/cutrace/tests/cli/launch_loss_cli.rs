//! Launch calls whose GPU records are missing are data loss, said in every format: the text
//! report's first line and data-loss line, the JSON's `data_loss`, the page's verdict and loss
//! boxes, and the diff's caveats. On the committed trace without GPU records and on small
//! hand-made traces.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cutrace(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn report(p: &Path, extra: &[&str]) -> String {
    let mut args: Vec<&std::ffi::OsStr> = vec!["report".as_ref(), p.as_os_str()];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    stdout(&cutrace(&args))
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&report(p, &["--format", "json"])).unwrap()
}

/// The fixture's `cuda_runtime` events, counted from its JSON (the oracle), and whether it has
/// any `kernel` event.
fn launches_in(p: &Path) -> (u64, bool) {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let launches = events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" && e["name"] == "cudaLaunchKernel")
        .count() as u64;
    (launches, events.iter().any(|e| e["cat"] == "kernel"))
}

/// A torch.profiler trace of launch calls and not one kernel (derived from `launch_bound`, its
/// GPU events removed) is not "complete": every format says its GPU records were lost.
#[test]
fn a_trace_of_launches_without_kernels_says_its_gpu_records_were_lost() {
    let p = cutrace_testkit::fixture("kineto/no_gpu_records.json.gz");
    let (launches, has_kernels) = launches_in(&p);
    assert!(launches > 0 && !has_kernels);
    let t = report(&p, &[]);
    let first = t.lines().nth(1).unwrap();
    assert!(first.starts_with("NO GPU RECORDS:"), "{t}");
    assert!(
        first.contains(&format!("{launches} kernel launches")),
        "{t}"
    );
    let loss = t.lines().find(|l| l.starts_with("data loss:")).unwrap();
    assert!(!loss.contains("trace complete"), "{loss}");
    assert!(
        loss.contains(&format!("{launches} of {launches} kernel launches")),
        "{loss}"
    );
    let j = json(&p);
    assert_eq!(j["data_loss"]["kernel_launches"], launches);
    assert_eq!(j["data_loss"]["launches_without_gpu_records"], launches);
    assert_eq!(j["data_loss"]["launches_without_correlation_id"], 0);
    let page = report(&p, &["--html", "-"]);
    let verdict = &page[page.find("<section id=\"verdict\"").unwrap()..];
    assert!(
        verdict.starts_with("<section id=\"verdict\" class=\"box lost\">"),
        "{}",
        &verdict[..200]
    );
    assert!(verdict.contains("NO GPU RECORDS"));
    let lost = &page[page.find("<section id=\"data-loss\"").unwrap()..];
    assert!(lost.starts_with("<section id=\"data-loss\" class=\"box lost\">"));
    assert!(lost.contains(&format!("{launches} of {launches} kernel launches")));
}

const KERNEL: &str = r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":TS,"dur":5,"args":{"device":0,"stream":7,"correlation":CORR}}"#;
const CALL: &str =
    r#"{"ph":"X","cat":"CAT","name":"NAME","pid":1,"tid":1,"ts":TS,"dur":1,"args":{ARGS}}"#;

fn call(cat: &str, name: &str, ts: u64, corr: Option<u64>) -> String {
    CALL.replace("CAT", cat)
        .replace("NAME", name)
        .replace("TS", &ts.to_string())
        .replace(
            "ARGS",
            &corr.map_or(String::new(), |c| format!("\"correlation\":{c}")),
        )
}

fn kernel(ts: u64, corr: u64) -> String {
    KERNEL
        .replace("TS", &ts.to_string())
        .replace("CORR", &corr.to_string())
}

fn write(dir: &cutrace_testkit::Dir, name: &str, events: &[String]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))).unwrap();
    p
}

/// Six launches: ids 1 and 2 with their kernels; 3 (a runtime call with the driver call beneath
/// it, one launch) and 4 without; two without a correlation id; a host function and a copy call
/// launch no kernel. Two lost their kernels, two cannot be joined; the diff says the same.
#[test]
fn launches_that_lost_their_kernels_are_counted_once_per_id_and_the_diff_says_so() {
    let dir = cutrace_testkit::Dir::new("launch-loss");
    let mut events = vec![
        call("cuda_runtime", "cudaLaunchKernel", 10, Some(1)),
        kernel(20, 1),
        call("cuda_runtime", "cudaLaunchKernel", 30, Some(2)),
        kernel(40, 2),
        call("cuda_runtime", "cudaLaunchKernel", 50, Some(3)),
        call("cuda_driver", "cuLaunchKernel", 50, Some(3)),
        call("cuda_driver", "cuLaunchKernel", 60, Some(4)),
        call("cuda_runtime", "cudaLaunchKernel", 70, None),
        call("cuda_runtime", "cudaLaunchKernel", 75, None),
        call("cuda_runtime", "cudaLaunchHostFunc", 80, Some(6)),
        call("cuda_runtime", "cudaMemcpyAsync", 90, Some(7)),
    ];
    let lossy = write(&dir, "lossy.json", &events);
    let j = json(&lossy);
    assert_eq!(j["data_loss"]["kernel_launches"], 6);
    assert_eq!(j["data_loss"]["launches_without_gpu_records"], 2);
    assert_eq!(j["data_loss"]["launches_without_correlation_id"], 2);
    let t = report(&lossy, &["--wide"]);
    assert!(
        t.lines()
            .nth(1)
            .unwrap()
            .starts_with("GPU RECORDS LOST: 2 of 6 kernel launches"),
        "{t}"
    );
    assert!(
        t.contains("2 kernel launch calls have no correlation id"),
        "{t}"
    );

    // The same launches with every kernel: nothing lost, nothing said.
    events.extend([kernel(55, 3), kernel(65, 4)]);
    let whole = write(&dir, "whole.json", &events);
    let j = json(&whole);
    assert_eq!(j["data_loss"]["launches_without_gpu_records"], 0);
    assert!(!report(&whole, &[]).contains("GPU RECORDS LOST"));

    let d: serde_json::Value = serde_json::from_str(&stdout(&cutrace(&[
        "diff".as_ref(),
        whole.as_os_str(),
        lossy.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])))
    .unwrap();
    let caveat = d["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "launches_without_gpu_records")
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(caveat["side"], "new");
    assert_eq!(caveat["launches"], 2);
    assert_eq!(caveat["of_launch_calls"], 6);
}
