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
