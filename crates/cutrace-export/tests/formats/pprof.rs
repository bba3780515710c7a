//! The pprof export of PC samples, decoded here field by field with a protobuf wire reader of
//! its own (profile.proto's numbers), on the H200 capture of gpu/pc_kernels.cu: every warp-state
//! sample is in it once, with its instruction, source line, function and stall-reason label, and
//! the strings and ids it refers to exist.

use std::collections::HashMap;

use cutrace_export::pprof::write_pprof;

/// A field: number and either a varint or bytes.
#[derive(Debug, Clone)]
enum F {
    V(u64),
    B(Vec<u8>),
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[*at];
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn fields(b: &[u8]) -> Vec<(u32, F)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at);
        let (n, wire) = ((key >> 3) as u32, key & 7);
        match wire {
            0 => out.push((n, F::V(varint(b, &mut at)))),
            2 => {
                let len = varint(b, &mut at) as usize;
                out.push((n, F::B(b[at..at + len].to_vec())));
                at += len;
            }
            w => panic!("wire type {w} not written by the export"),
        }
    }
    out
}

fn get(f: &[(u32, F)], n: u32) -> u64 {
    f.iter()
        .find_map(|(k, v)| match (k, v) {
            (k, F::V(x)) if *k == n => Some(*x),
            _ => None,
        })
        .unwrap_or(0)
}

fn subs(f: &[(u32, F)], n: u32) -> Vec<Vec<(u32, F)>> {
    f.iter()
        .filter_map(|(k, v)| match v {
            F::B(b) if *k == n => Some(fields(b)),
            _ => None,
        })
        .collect()
}

fn packed(f: &[(u32, F)], n: u32) -> Vec<u64> {
    let mut v = Vec::new();
    for (k, x) in f {
        if let (true, F::B(b)) = (*k == n, x) {
            let mut at = 0;
            while at < b.len() {
                v.push(varint(b, &mut at));
            }
        }
    }
    v
}

#[test]
fn every_warp_state_sample_is_in_the_profile_at_its_line() {
    let t = cutrace_trace::open(
        &cutrace_testkit::repo().join("tests/fixtures/native/pc_kernels"),
        &mut |_, _| {},
    )
    .unwrap();
    let mut out = Vec::new();
    let w = write_pprof(&mut out, &t).unwrap();
    let p = fields(&out);
    let strings: Vec<String> = p
        .iter()
        .filter_map(|(k, v)| match v {
            F::B(b) if *k == 6 => Some(String::from_utf8(b.clone()).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(strings[0], "");
    let s = |i: u64| strings[i as usize].as_str();
    let types: Vec<&str> = subs(&p, 1).iter().map(|v| s(get(v, 1))).collect();
    assert_eq!(types, ["samples", "samples_not_issued"]);
    let functions: HashMap<u64, (String, String, String)> = subs(&p, 5)
        .iter()
        .map(|f| {
            let name = s(get(f, 2)).to_string();
            (get(f, 1), (name, s(get(f, 3)).into(), s(get(f, 4)).into()))
        })
        .collect();
    assert_eq!(functions.len() as u64, w.functions);
    let locations: HashMap<u64, (u64, u64, i64)> = subs(&p, 4)
        .iter()
        .map(|l| {
            let line = &subs(l, 4)[0];
            (get(l, 1), (get(l, 3), get(line, 1), get(line, 2) as i64))
        })
        .collect();
    assert_eq!(locations.len() as u64, w.locations);
    // Each sample: one location, two values, a stall_reason label; the states add up to the
    // report's samples, and the long-scoreboard samples of load_chain sit on line 22.
    let (mut total, mut chain_line_22) = (0u64, 0u64);
    let samples = subs(&p, 2);
    assert_eq!(samples.len() as u64, w.samples);
    for smp in &samples {
        let loc = packed(smp, 1);
        let vals = packed(smp, 2);
        assert_eq!((loc.len(), vals.len()), (1, 2));
        let (_, func, line) = locations[&loc[0]];
        let labels = subs(smp, 3);
        let reason = labels
            .iter()
            .find(|l| s(get(l, 1)) == "stall_reason")
            .map(|l| s(get(l, 2)))
            .unwrap();
        assert!(!reason.starts_with("smsp__"), "{reason}");
        assert!(vals[1] <= vals[0] || vals[0] == 0);
        total += vals[0];
        let (name, raw, file) = &functions[&func];
        if name.starts_with("load_chain(") && reason == "long_scoreboard" && line == 22 {
            assert_eq!(raw, "_Z10load_chainPKjPji");
            assert!(file.ends_with("pc_kernels.cu"));
            chain_line_22 += vals[0];
        }
    }
    let r = cutrace_analysis::pc::pc_report(&t, 10).unwrap();
    assert_eq!(total, r.samples);
    let chain = r
        .functions
        .iter()
        .find(|f| f.name.starts_with("load_chain("))
        .unwrap();
    assert!(
        chain_line_22 * 100 > chain.samples * 95,
        "{chain_line_22} of {}",
        chain.samples
    );
}

#[test]
fn a_trace_without_pc_samples_gives_an_empty_profile() {
    let mut out = Vec::new();
    let w = write_pprof(&mut out, &cutrace_trace::Trace::default()).unwrap();
    assert_eq!((w.samples, w.locations, w.functions), (0, 0, 0));
    assert!(subs(&fields(&out), 2).is_empty());
}
