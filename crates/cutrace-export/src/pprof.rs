//! PC samples as a pprof profile (`perftools.profiles.Profile`, google/pprof's
//! `proto/profile.proto`), which `go tool pprof`, speedscope and other flame-graph tools read:
//! one location per sampled instruction (its address the PC offset in its function, its line
//! the source line when the cubin has line information), one function per kernel or device
//! function (the demangled name; the mangled one as `system_name`), one mapping per cubin (its
//! CRC as the build id). Each sample is one instruction's samples for one stall reason, with
//! the reason, the device and the process as labels. Two values: `samples` (every sample in the
//! state) and `samples_not_issued` (the subset in cycles that issued nothing; see
//! `cutrace_analysis::pc`). Counts that are not warp states are left out.

use std::collections::HashMap;
use std::io::{self, Write};

use cutrace_analysis::names::display_name;
use cutrace_analysis::pc::{reason_kind, ReasonKind};
use cutrace_trace::Trace;

use crate::perfetto::wire::{bytes, int, msg, uint};

// profile.proto field numbers.
const P_SAMPLE_TYPE: u32 = 1;
const P_SAMPLE: u32 = 2;
const P_MAPPING: u32 = 3;
const P_LOCATION: u32 = 4;
const P_FUNCTION: u32 = 5;
const P_STRING_TABLE: u32 = 6;
const P_PERIOD_TYPE: u32 = 11;
const P_PERIOD: u32 = 12;
const P_COMMENT: u32 = 13;
const VT_TYPE: u32 = 1;
const VT_UNIT: u32 = 2;
const S_LOCATION_ID: u32 = 1;
const S_VALUE: u32 = 2;
const S_LABEL: u32 = 3;
const L_KEY: u32 = 1;
const L_STR: u32 = 2;
const L_NUM: u32 = 3;
const M_ID: u32 = 1;
const M_FILENAME: u32 = 5;
const M_BUILD_ID: u32 = 6;
const M_HAS_FUNCTIONS: u32 = 7;
const M_HAS_FILENAMES: u32 = 8;
const M_HAS_LINE_NUMBERS: u32 = 9;
const LOC_ID: u32 = 1;
const LOC_MAPPING_ID: u32 = 2;
const LOC_ADDRESS: u32 = 3;
const LOC_LINE: u32 = 4;
const LINE_FUNCTION_ID: u32 = 1;
const LINE_LINE: u32 = 2;
const F_ID: u32 = 1;
const F_NAME: u32 = 2;
const F_SYSTEM_NAME: u32 = 3;
const F_FILENAME: u32 = 4;

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub samples: u64,
    pub locations: u64,
    pub functions: u64,
}

#[derive(Default)]
struct Strings {
    list: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.id(""); // string_table[0] is "" (profile.proto).
        s
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as i64;
        self.list.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// Ids by key, from 1 (0 is "none" in profile.proto).
struct Ids<K>(HashMap<K, u64>);

impl<K: std::hash::Hash + Eq> Ids<K> {
    fn get(&mut self, k: K) -> (u64, bool) {
        let n = self.0.len() as u64 + 1;
        match self.0.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => (*e.get(), false),
            std::collections::hash_map::Entry::Vacant(e) => (*e.insert(n), true),
        }
    }
}

fn packed(b: &mut Vec<u8>, field: u32, values: &[u64]) {
    let mut p = Vec::new();
    for &v in values {
        cutrace_trace::varint::put(&mut p, v);
    }
    bytes(b, field, &p);
}

fn value_type(b: &mut Vec<u8>, field: u32, s: &mut Strings, ty: &str, unit: &str) {
    let (t, u) = (s.id(ty), s.id(unit));
    msg(b, field, |m| {
        int(m, VT_TYPE, t);
        int(m, VT_UNIT, u);
    });
}

/// (device, process, location id, the stall reason's short name as a string-table index) →
/// [samples, not issued].
type SampleKey = (u32, u32, u64, i64);

/// The longest stall-reason name written (CUPTI's are under 128 bytes).
const REASON_BYTES: usize = 128;

/// Writes `t`'s PC samples as an uncompressed pprof profile (gzip it, as pprof's tools do,
/// through the output's `.gz` name).
pub fn write_pprof<W: Write>(mut w: W, t: &Trace) -> io::Result<Written> {
    let mut s = Strings::new();
    let mut out = Vec::new();
    value_type(&mut out, P_SAMPLE_TYPE, &mut s, "samples", "count");
    value_type(
        &mut out,
        P_SAMPLE_TYPE,
        &mut s,
        "samples_not_issued",
        "count",
    );
    let mut mappings = Ids(HashMap::new());
    let mut functions: Ids<(u32, Option<u32>)> = Ids(HashMap::new());
    let mut locations: Ids<(u64, u32, u64, Option<u32>, u32)> = Ids(HashMap::new());
    let mut defs = Vec::new();
    let mut samples: HashMap<SampleKey, [u64; 2]> = HashMap::new();
    let with_lines: std::collections::HashSet<u64> = t
        .pc_samples
        .iter()
        .filter(|q| q.source_file.is_some())
        .map(|q| q.cubin_crc)
        .collect();
    for p in &t.pc_samples {
        let (state, slot) = match reason_kind(t.str(p.stall_reason)) {
            ReasonKind::State(r) => (r, 0),
            ReasonKind::NotIssued(r) => (r, 1),
            ReasonKind::Other => continue,
        };
        let (mapping, new) = mappings.get(p.cubin_crc);
        if new {
            let name = s.id(&format!("cubin {:#x}", p.cubin_crc));
            let build = s.id(&format!("{:016x}", p.cubin_crc));
            let lines = with_lines.contains(&p.cubin_crc);
            msg(&mut defs, P_MAPPING, |m| {
                uint(m, M_ID, mapping);
                int(m, M_FILENAME, name);
                int(m, M_BUILD_ID, build);
                uint(m, M_HAS_FUNCTIONS, 1);
                uint(m, M_HAS_FILENAMES, u64::from(lines));
                uint(m, M_HAS_LINE_NUMBERS, u64::from(lines));
            });
        }
        let (function, new) = functions.get((p.function, p.source_file));
        if new {
            let raw = t.str(p.function);
            let name = s.id(&display_name(raw));
            let system = s.id(raw);
            let file = s.id(p.source_file.map_or("", |f| t.str(f)));
            msg(&mut defs, P_FUNCTION, |m| {
                uint(m, F_ID, function);
                int(m, F_NAME, name);
                int(m, F_SYSTEM_NAME, system);
                int(m, F_FILENAME, file);
            });
        }
        let line = if p.source_file.is_some() {
            p.source_line
        } else {
            0
        };
        let key = (p.cubin_crc, p.function, p.pc_offset, p.source_file, line);
        let (location, new) = locations.get(key);
        if new {
            msg(&mut defs, P_LOCATION, |m| {
                uint(m, LOC_ID, location);
                uint(m, LOC_MAPPING_ID, mapping);
                uint(m, LOC_ADDRESS, p.pc_offset);
                msg(m, LOC_LINE, |l| {
                    uint(l, LINE_FUNCTION_ID, function);
                    int(l, LINE_LINE, i64::from(line));
                });
            });
        }
        let mut end = state.len().min(REASON_BYTES);
        while !state.is_char_boundary(end) {
            end -= 1;
        }
        let reason = s.id(&state[..end]);
        let v = samples
            .entry((p.device, p.process, location, reason))
            .or_default();
        v[slot] = v[slot].saturating_add(p.samples);
    }
    let mut keys: Vec<(&SampleKey, &[u64; 2])> = samples.iter().collect();
    keys.sort();
    let (k_reason, k_device, k_process) = (s.id("stall_reason"), s.id("device"), s.id("pid"));
    for (&(device, process, location, r), v) in keys {
        msg(&mut out, P_SAMPLE, |m| {
            packed(m, S_LOCATION_ID, &[location]);
            packed(m, S_VALUE, v);
            msg(m, S_LABEL, |l| {
                int(l, L_KEY, k_reason);
                int(l, L_STR, r);
            });
            msg(m, S_LABEL, |l| {
                int(l, L_KEY, k_device);
                int(l, L_NUM, i64::from(device));
            });
            msg(m, S_LABEL, |l| {
                int(l, L_KEY, k_process);
                int(l, L_NUM, i64::from(process));
            });
        });
    }
    out.extend_from_slice(&defs);
    if let Some(n) = t.meta.pc_sampling.as_ref().and_then(|c| c.sampling_period) {
        value_type(&mut out, P_PERIOD_TYPE, &mut s, "cycles", "count");
        int(&mut out, P_PERIOD, 1i64 << n.min(62));
    }
    let comment = s.id(
        "cutrace: CUPTI PC sampling, continuous mode; each sample is one instruction's samples \
         in one warp state (label stall_reason)",
    );
    int(&mut out, P_COMMENT, comment);
    for st in &s.list {
        bytes(&mut out, P_STRING_TABLE, st.as_bytes());
    }
    w.write_all(&out)?;
    w.flush()?;
    Ok(Written {
        samples: samples.len() as u64,
        locations: locations.0.len() as u64,
        functions: functions.0.len() as u64,
    })
}
