//! The PC Sampling structs as nvcc laid them out on the H200 (CUDA 13.0, driver 580), from
//! `gpu/pc_sampling_probe.cu`'s output (2026-12-02, `tests/fixtures/pc_sampling/h200_probe.jsonl`):
//! every size, alignment and offset it printed is the binding's in `sys.rs`. The compile-time
//! asserts check the bindings against the headers as g++ reads them; this checks them against a
//! real build that ran on a GPU and got samples.

use std::mem::{align_of, offset_of, size_of};

use cutrace_cupti::sys::{
    GetSassToSourceCorrelationParams, PcSamplingConfigurationInfo,
    PcSamplingConfigurationInfoParams, PcSamplingData, PcSamplingGetStallReasonsParams,
    PcSamplingPcData, PcSamplingStallReason,
};
use serde_json::Value;

fn probe() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/pc_sampling/h200_probe.jsonl"
    );
    std::fs::read_to_string(path)
        .expect("the probe's output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A binding's size, alignment and (header field, offset) pairs.
type Layout = (usize, usize, Vec<(&'static str, usize)>);

/// The layout of a binding, by the header's struct name.
fn ours(name: &str) -> Option<Layout> {
    Some(match name {
        "CUpti_PCSamplingStallReason" => (
            size_of::<PcSamplingStallReason>(),
            align_of::<PcSamplingStallReason>(),
            vec![
                (
                    "pcSamplingStallReasonIndex",
                    offset_of!(PcSamplingStallReason, pc_sampling_stall_reason_index),
                ),
                ("samples", offset_of!(PcSamplingStallReason, samples)),
            ],
        ),
        "CUpti_PCSamplingPCData" => (
            size_of::<PcSamplingPcData>(),
            align_of::<PcSamplingPcData>(),
            vec![
                ("cubinCrc", offset_of!(PcSamplingPcData, cubin_crc)),
                ("pcOffset", offset_of!(PcSamplingPcData, pc_offset)),
                (
                    "functionIndex",
                    offset_of!(PcSamplingPcData, function_index),
                ),
                ("functionName", offset_of!(PcSamplingPcData, function_name)),
                (
                    "stallReasonCount",
                    offset_of!(PcSamplingPcData, stall_reason_count),
                ),
                ("stallReason", offset_of!(PcSamplingPcData, stall_reason)),
                (
                    "correlationId",
                    offset_of!(PcSamplingPcData, correlation_id),
                ),
            ],
        ),
        "CUpti_PCSamplingData" => (
            size_of::<PcSamplingData>(),
            align_of::<PcSamplingData>(),
            vec![
                ("collectNumPcs", offset_of!(PcSamplingData, collect_num_pcs)),
                ("totalSamples", offset_of!(PcSamplingData, total_samples)),
                (
                    "droppedSamples",
                    offset_of!(PcSamplingData, dropped_samples),
                ),
                ("totalNumPcs", offset_of!(PcSamplingData, total_num_pcs)),
                (
                    "remainingNumPcs",
                    offset_of!(PcSamplingData, remaining_num_pcs),
                ),
                ("rangeId", offset_of!(PcSamplingData, range_id)),
                ("pPcData", offset_of!(PcSamplingData, p_pc_data)),
                (
                    "nonUsrKernelsTotalSamples",
                    offset_of!(PcSamplingData, non_usr_kernels_total_samples),
                ),
                (
                    "hardwareBufferFull",
                    offset_of!(PcSamplingData, hardware_buffer_full),
                ),
            ],
        ),
        "CUpti_PCSamplingConfigurationInfo" => (
            size_of::<PcSamplingConfigurationInfo>(),
            align_of::<PcSamplingConfigurationInfo>(),
            vec![
                (
                    "attributeStatus",
                    offset_of!(PcSamplingConfigurationInfo, attribute_status),
                ),
                (
                    "attributeData",
                    offset_of!(PcSamplingConfigurationInfo, attribute_data),
                ),
            ],
        ),
        "CUpti_PCSamplingConfigurationInfoParams" => (
            size_of::<PcSamplingConfigurationInfoParams>(),
            align_of::<PcSamplingConfigurationInfoParams>(),
            vec![
                ("ctx", offset_of!(PcSamplingConfigurationInfoParams, ctx)),
                (
                    "pPCSamplingConfigurationInfo",
                    offset_of!(
                        PcSamplingConfigurationInfoParams,
                        p_pc_sampling_configuration_info
                    ),
                ),
            ],
        ),
        "CUpti_PCSamplingGetStallReasonsParams" => (
            size_of::<PcSamplingGetStallReasonsParams>(),
            align_of::<PcSamplingGetStallReasonsParams>(),
            vec![(
                "stallReasons",
                offset_of!(PcSamplingGetStallReasonsParams, stall_reasons),
            )],
        ),
        "CUpti_GetSassToSourceCorrelationParams" => (
            size_of::<GetSassToSourceCorrelationParams>(),
            align_of::<GetSassToSourceCorrelationParams>(),
            vec![
                (
                    "lineNumber",
                    offset_of!(GetSassToSourceCorrelationParams, line_number),
                ),
                (
                    "pcOffset",
                    offset_of!(GetSassToSourceCorrelationParams, pc_offset),
                ),
                (
                    "dirName",
                    offset_of!(GetSassToSourceCorrelationParams, dir_name),
                ),
            ],
        ),
        _ => return None,
    })
}

#[test]
fn the_bindings_are_laid_out_as_the_gpu_build_was() {
    let lines = probe();
    let mut checked = 0;
    for l in lines.iter().filter(|l| l["kind"] == "layout") {
        let name = l["struct"].as_str().unwrap();
        let (size, align, fields) = ours(name).unwrap_or_else(|| panic!("{name}: no binding"));
        assert_eq!(size as u64, l["sizeof"].as_u64().unwrap(), "{name} sizeof");
        assert_eq!(align as u64, l["align"].as_u64().unwrap(), "{name} align");
        let offsets = l["offsets"].as_object().unwrap();
        assert_eq!(offsets.len(), fields.len(), "{name}: fields compared");
        for (field, at) in fields {
            assert_eq!(
                Some(at as u64),
                offsets[field].as_u64(),
                "{name}.{field} offset"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 7);
}

/// What the GPU run saw, as the decoder and the report will rely on it: continuous mode gives
/// no correlation id, a function keeps one name pointer across buffers, every PC of the probe's
/// one cubin maps to a source line, and the dependent load chain stalls on the long scoreboard
/// at its load's line.
#[test]
fn the_gpu_run_saw_what_the_design_assumes() {
    let lines = probe();
    let of = |k: &'static str| lines.iter().filter(move |l| l["kind"] == k);
    let reasons = of("stall_reasons").next().unwrap();
    assert_eq!(reasons["count"], 40);
    let name_of = |i: u64| {
        reasons["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["index"] == i)
            .map(|r| r["name"].as_str().unwrap().to_owned())
    };
    let pcs: Vec<&Value> = of("pc").collect();
    assert_eq!(pcs.len(), 137);
    assert!(pcs.iter().all(|p| p["correlation_id"] == 0));
    assert!(pcs.iter().all(|p| p["line"].as_u64().unwrap_or(0) > 0));
    assert!(of("name_pointers").all(|n| n["distinct_pointers"] == 1));
    let expect = of("expect").next().unwrap();
    let mut long_scoreboard_at_load = 0u64;
    let mut chain = 0u64;
    for p in pcs.iter().filter(|p| p["function"] == "_Z5chainPKjPji") {
        for s in p["stalls"].as_array().unwrap() {
            let (i, n) = (s[0].as_u64().unwrap(), s[1].as_u64().unwrap());
            chain += n;
            let name = name_of(i).unwrap();
            if name.ends_with("stalled_long_scoreboard") && p["line"] == expect["chain_load_line"] {
                long_scoreboard_at_load += n;
            }
        }
    }
    // Issued and not-issued counters each count a stalled sample, so about half.
    assert!(
        long_scoreboard_at_load * 100 > chain * 45,
        "{long_scoreboard_at_load} of {chain}"
    );
    let last = of("get_data").next_back().unwrap();
    assert_eq!(last["total_num_pcs"], 137);
    assert_eq!(last["dropped_samples"], 0);
}
