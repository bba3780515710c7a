//! Communication beyond NCCL counts as communication in the verdict of one trace and in a job's
//! ranks alike (one table, `cutrace_trace::comm::COMM_RULES`): a DeepEP dispatch kernel beside a
//! GEMM.

use std::process::Command;

/// A DeepEP dispatch at 100–150 µs, a GEMM at 200–300 µs, each with its launch.
const TRACE: &str = r#"{"traceEvents":[
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":90,"dur":2,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*)","pid":0,"tid":7,"ts":100,"dur":50,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":190,"dur":2,"args":{"correlation":2}},
{"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16bf16_bf16f32","pid":0,"tid":7,"ts":200,"dur":100,"args":{"device":0,"stream":7,"correlation":2}}
]}"#;

fn json(args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn deepep_kernels_are_communication_in_the_verdict_and_in_a_job() {
    let dir = cutrace_testkit::Dir::new("comm-rules");
    for r in ["rank0.json", "rank1.json"] {
        std::fs::write(dir.join(r), TRACE).unwrap();
    }
    let one = dir.join("rank0.json");
    let j = json(&[
        "report".as_ref(),
        one.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let d = &j["summary"]["devices"][0];
    assert_eq!(d["communication_ns"], 50_000);
    assert_eq!(d["exposed_communication_ns"], 50_000);
    assert_eq!(d["compute_ns"], 100_000);
    assert_eq!(
        j["summary"]["communication_rules"],
        serde_json::json!([{"rule": "deepep", "library": "DeepEP", "kernels": 1}])
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("report")
        .arg(&one)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("communication kernels by rule (docs/REPORT.md, \"Communication kernels\"): deepep (DeepEP) 1\n"),
        "{text}"
    );
    let job = json(&[
        "report".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    for rank in job["ranks"].as_array().unwrap() {
        assert_eq!(rank["comm_ns"], 50_000, "{rank}");
        assert_eq!(rank["exposed_comm_ns"], 50_000, "{rank}");
    }
}

/// `--comm-kernels REGEX` adds a rule after the table: the GEMM named by it becomes
/// communication (250 µs window: 50 DeepEP + 100 GEMM = 150 µs communication), counted under
/// its own rule in the verdict and in a job's ranks; a bad or empty REGEX is refused with exit 2.
#[test]
fn comm_kernels_regex_extends_the_table() {
    let dir = cutrace_testkit::Dir::new("comm-kernels");
    let p = dir.path("t.json");
    std::fs::write(&p, TRACE).unwrap();
    let report = |extra: &[&str]| {
        let mut a: Vec<&std::ffi::OsStr> = vec!["report".as_ref(), p.as_os_str()];
        a.extend(["--format", "json"].iter().map(std::ffi::OsStr::new));
        a.extend(extra.iter().map(std::ffi::OsStr::new));
        json(&a)
    };
    let plain = report(&[]);
    assert_eq!(plain["summary"]["devices"][0]["communication_ns"], 50_000);
    let with = report(&["--comm-kernels", "xmma_gemm_bf16"]);
    let d = &with["summary"]["devices"][0];
    assert_eq!(d["communication_ns"], 150_000, "{d}");
    assert_eq!(d["compute_ns"], 0, "{d}");
    let rules = &with["summary"]["communication_rules"];
    assert_eq!(rules.as_array().map(Vec::len), Some(2), "{rules}");
    assert_eq!(rules[1]["rule"], "comm_kernels");
    assert_eq!(rules[1]["library"], "--comm-kernels");
    assert_eq!(rules[1]["kernels"], 1);
    // A table rule wins over the user's: DeepEP stays DeepEP even when the REGEX matches it.
    let both = report(&["--comm-kernels", "dispatch|xmma"]);
    assert_eq!(both["summary"]["communication_rules"][1]["kernels"], 1);
    // The job's ranks count it too.
    let q = dir.path("rank1.json");
    std::fs::write(&q, TRACE).unwrap();
    std::fs::rename(&p, dir.path("rank0.json")).unwrap();
    let job = json(&[
        "report".as_ref(),
        dir.0.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--comm-kernels".as_ref(),
        "xmma_gemm_bf16".as_ref(),
    ]);
    assert_eq!(job["ranks"][0]["comm_ns"], 150_000, "{job}");
    for (bad, says) in [("(", "is not a regular expression"), ("", "empty REGEX")] {
        let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
            .args(["report", "--comm-kernels", bad])
            .arg(dir.path("rank0.json"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
    }
}

/// The committed one-rank fixture whose communication is DeepEP's and vLLM's custom all-reduce
/// (tests/tools/make_comm_fixture.py): the planted split, rule by rule.
#[test]
fn a_rank_without_nccl_reports_its_communication_by_rule() {
    let f = cutrace_testkit::repo().join("tests/fixtures/kineto/deepep_custom_allreduce.json.gz");
    let j = json(&[
        "report".as_ref(),
        f.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let d = &j["summary"]["devices"][0];
    assert_eq!(d["compute_ns"], 1_800_000, "{d}");
    assert_eq!(d["communication_ns"], 600_000, "{d}");
    assert_eq!(d["exposed_communication_ns"], 600_000, "{d}");
    assert_eq!(
        j["summary"]["communication_rules"],
        serde_json::json!([
            {"rule": "deepep", "library": "DeepEP", "kernels": 6},
            {"rule": "custom_all_reduce", "library": "vLLM / SGLang / AIter custom all-reduce", "kernels": 3}
        ])
    );
    assert_eq!(j["steps"]["count"], 3);
}
