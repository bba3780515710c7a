//! A `CUpti_PCSamplingData` buffer, as CUPTI fills it, into owned values: an array of PC records,
//! each with its own array of (stall reason, samples) pairs and a function name CUPTI allocated.
//! Nothing CUPTI counts is trusted: records are read up to the capacity the buffer's owner
//! allocated, pairs up to the capacity of each record's array, names up to a NUL within
//! [`MAX_FUNCTION_NAME_BYTES`]; what is left out or odd is counted in [`DecodeProblems`].
//! [`PcBuffer`] owns such a buffer for a session and checks, before decoding, that CUPTI left its
//! pointers where they were.

use std::collections::HashMap;
use std::ffi::c_char;

use cutrace_cupti::sys::{PcSamplingData, PcSamplingPcData, PcSamplingStallReason};

use super::StallReasons;
use crate::{CountersError, Result};

/// The longest function name read (a C++ template instance can run to kilobytes); a name with
/// no NUL within it is cut there and counted.
pub const MAX_FUNCTION_NAME_BYTES: usize = 64 << 10;

/// What a buffer's owner allocated: PC records, and stall-reason pairs per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub records: usize,
    pub stall_reasons: usize,
}

/// CUPTI's totals for one buffer (`CUpti_PCSamplingData`'s read fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PcTotals {
    /// `totalSamples`: every sample, "for user modules, samples for non-user kernels and
    /// dropped samples", all stall reasons.
    pub total_samples: u64,
    /// `droppedSamples`: "dropped by hardware due to backpressure/overflow".
    pub dropped_samples: u64,
    /// `nonUsrKernelsTotalSamples`: samples in kernels CUPTI gives no PC records for.
    pub non_user_kernel_samples: u64,
    /// `totalNumPcs`: the PC records CUPTI says it wrote.
    pub pcs: u64,
    /// `remainingNumPcs`: PCs still waiting; another GetData gets them.
    pub pcs_remaining: u64,
    /// `rangeId`: which start/stop range the data is of.
    pub range_id: u64,
    /// `hardwareBufferFull`, or GetData's OUT_OF_MEMORY: the hardware buffer filled up.
    pub hardware_buffer_full: bool,
}

/// One stall reason's samples at one PC: CUPTI's stall-reason index (see
/// [`StallReasons::name`]) and the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallSamples {
    pub index: u32,
    pub samples: u32,
}

/// One PC record (`CUpti_PCSamplingPCData`), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcRecord {
    /// `cubinCrc`: which module (see `Profiler::cubin_crc`).
    pub cubin_crc: u64,
    /// `pcOffset`: the instruction's offset in its function.
    pub pc_offset: u64,
    /// `functionIndex`: the function's symbol index in the module.
    pub function_index: u32,
    /// Index into [`PcBatch::functions`]; `None` when CUPTI gave no name.
    pub function: Option<u32>,
    /// `correlationId`: 0 in continuous mode (the header).
    pub correlation_id: u32,
    pub stalls: Vec<StallSamples>,
}

/// What was left out or looked wrong while decoding one buffer. All zero for a sound buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeProblems {
    /// PCs CUPTI counted beyond what the buffer holds (or with no record array at all): not
    /// read.
    pub pcs_beyond_capacity: u64,
    /// Records claiming more pairs than their array holds: read up to the capacity.
    pub stall_counts_clamped: u64,
    /// Records claiming pairs with a null array: kept without pairs.
    pub null_stall_arrays: u64,
    /// Records without a function name.
    pub missing_function_names: u64,
    /// Function names with no NUL within [`MAX_FUNCTION_NAME_BYTES`]: cut there.
    pub names_truncated: u64,
    /// Pairs whose stall-reason index CUPTI did not name for this context: kept, with their
    /// index.
    pub unknown_stall_reasons: u64,
}

impl DecodeProblems {
    pub fn is_empty(&self) -> bool {
        *self == DecodeProblems::default()
    }
}

/// One buffer, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PcBatch {
    pub totals: PcTotals,
    pub records: Vec<PcRecord>,
    /// The distinct function names of the records, each once.
    pub functions: Vec<String>,
    pub problems: DecodeProblems,
}

impl PcBatch {
    /// The name of a record's function.
    pub fn function_name(&self, r: &PcRecord) -> Option<&str> {
        r.function
            .and_then(|i| self.functions.get(i as usize))
            .map(String::as_str)
    }

    /// Samples over every record and pair (the PC records' share of `totals.total_samples`).
    pub fn record_samples(&self) -> u64 {
        self.records
            .iter()
            .flat_map(|r| &r.stalls)
            .map(|s| u64::from(s.samples))
            .sum()
    }
}

/// Decodes a `CUpti_PCSamplingData` as CUPTI left it. Reads at most
/// `min(cap.records, collectNumPcs)` records (whatever `totalNumPcs` says), at most
/// `cap.stall_reasons` pairs of each (whatever `stallReasonCount` says), and each distinct
/// function name once, up to [`MAX_FUNCTION_NAME_BYTES`]. Stall indices are checked against
/// `reasons`, never used to index anything.
///
/// # Safety
/// `data.p_pc_data` must be null or point to at least `cap.records` readable records; in each
/// of those, `stall_reason` must be null or point to at least `cap.stall_reasons` readable
/// pairs, and `function_name` null or point to bytes readable up to a NUL or
/// [`MAX_FUNCTION_NAME_BYTES`], whichever comes first. Nothing may write them meanwhile.
/// (Alignment is not assumed: every element is read unaligned.)
pub unsafe fn decode(data: &PcSamplingData, cap: Capacity, reasons: &StallReasons) -> PcBatch {
    let mut b = PcBatch {
        totals: PcTotals {
            total_samples: data.total_samples,
            dropped_samples: data.dropped_samples,
            non_user_kernel_samples: data.non_usr_kernels_total_samples,
            pcs: data.total_num_pcs as u64,
            pcs_remaining: data.remaining_num_pcs as u64,
            range_id: data.range_id,
            hardware_buffer_full: data.hardware_buffer_full != 0,
        },
        ..PcBatch::default()
    };
    let readable = if data.p_pc_data.is_null() {
        0
    } else {
        data.total_num_pcs
            .min(cap.records)
            .min(data.collect_num_pcs)
    };
    b.problems.pcs_beyond_capacity = (data.total_num_pcs - readable) as u64;
    let mut by_pointer: HashMap<usize, u32> = HashMap::new();
    let mut by_text: HashMap<String, u32> = HashMap::new();
    b.records.reserve(readable);
    for i in 0..readable {
        // SAFETY: i < cap.records, which the caller vouches the array holds.
        let r: PcSamplingPcData = unsafe { data.p_pc_data.add(i).read_unaligned() };
        let function = if r.function_name.is_null() {
            b.problems.missing_function_names += 1;
            None
        } else {
            let key = r.function_name as usize;
            Some(match by_pointer.get(&key) {
                Some(&id) => id,
                None => {
                    // SAFETY: the caller vouches for the name up to its NUL or the bound.
                    let (text, cut) =
                        unsafe { bounded_c_str(r.function_name, MAX_FUNCTION_NAME_BYTES) };
                    b.problems.names_truncated += u64::from(cut);
                    let id = *by_text.entry(text).or_insert_with_key(|t| {
                        b.functions.push(t.clone());
                        (b.functions.len() - 1) as u32
                    });
                    by_pointer.insert(key, id);
                    id
                }
            })
        };
        let mut stalls = Vec::new();
        if r.stall_reason_count > 0 {
            if r.stall_reason.is_null() {
                b.problems.null_stall_arrays += 1;
            } else {
                let n = r.stall_reason_count.min(cap.stall_reasons);
                b.problems.stall_counts_clamped += u64::from(n < r.stall_reason_count);
                stalls.reserve(n);
                for j in 0..n {
                    // SAFETY: j < cap.stall_reasons, which the caller vouches the array holds.
                    let s: PcSamplingStallReason =
                        unsafe { r.stall_reason.add(j).read_unaligned() };
                    let index = s.pc_sampling_stall_reason_index;
                    b.problems.unknown_stall_reasons += u64::from(!reasons.contains(index));
                    stalls.push(StallSamples {
                        index,
                        samples: s.samples,
                    });
                }
            }
        }
        b.records.push(PcRecord {
            cubin_crc: r.cubin_crc,
            pc_offset: r.pc_offset,
            function_index: r.function_index,
            function,
            correlation_id: r.correlation_id,
            stalls,
        });
    }
    b
}

/// The bytes at `p` up to its NUL, at most `max` of them (lossy UTF-8), and whether it was cut.
///
/// # Safety
/// `p` must be readable up to its NUL or `max` bytes, whichever comes first.
unsafe fn bounded_c_str(p: *const c_char, max: usize) -> (String, bool) {
    let mut bytes = Vec::new();
    for i in 0..max {
        // SAFETY: i is below the NUL not yet seen and below `max`: vouched for by the caller.
        let c = unsafe { p.add(i).read() } as u8;
        if c == 0 {
            return (String::from_utf8_lossy(&bytes).into_owned(), false);
        }
        bytes.push(c);
    }
    (String::from_utf8_lossy(&bytes).into_owned(), true)
}

/// A PC sampling buffer a session gives CUPTI: the `CUpti_PCSamplingData`, `records` PC records
/// and, for each, an array of `stall_reasons` pairs, allocated once and never moved (CUPTI keeps
/// the pointers), freed on drop. Accessed only through the pointers made at allocation.
pub struct PcBuffer {
    data: *mut PcSamplingData,
    records: *mut PcSamplingPcData,
    stalls: *mut PcSamplingStallReason,
    cap: Capacity,
}

impl PcBuffer {
    /// A zeroed buffer: `size` fields set, `collectNumPcs` = `records`, each record's
    /// `stallReason` pointing at its own `stall_reasons` pairs.
    pub fn new(records: usize, stall_reasons: usize) -> PcBuffer {
        let cap = Capacity {
            records,
            stall_reasons,
        };
        let pairs = records.saturating_mul(stall_reasons);
        let stalls = Box::into_raw(vec![PcSamplingStallReason::new(); pairs].into_boxed_slice())
            .cast::<PcSamplingStallReason>();
        let recs = Box::into_raw(vec![PcSamplingPcData::new(); records].into_boxed_slice())
            .cast::<PcSamplingPcData>();
        let data = Box::into_raw(Box::new(PcSamplingData::new()));
        let b = PcBuffer {
            data,
            records: recs,
            stalls,
            cap,
        };
        b.reset_all();
        b
    }

    pub fn capacity(&self) -> Capacity {
        self.cap
    }

    /// The `CUpti_PCSamplingData` to give CUPTI.
    pub fn as_raw(&self) -> *mut PcSamplingData {
        self.data
    }

    fn stalls_of(&self, i: usize) -> *mut PcSamplingStallReason {
        // In bounds (or one past the end of an empty array): i < records.
        self.stalls.wrapping_add(i * self.cap.stall_reasons)
    }

    /// Clears what CUPTI writes and puts cutrace's pointers back, for the next GetData.
    pub fn reset(&mut self) {
        self.reset_all();
    }

    fn reset_all(&self) {
        // SAFETY: `data` is our live allocation; CUPTI does not write it between calls.
        unsafe {
            let d = &mut *self.data;
            *d = PcSamplingData::new();
            d.collect_num_pcs = self.cap.records;
            d.p_pc_data = self.records;
        }
        for i in 0..self.cap.records {
            let mut r = PcSamplingPcData::new();
            r.stall_reason = self.stalls_of(i);
            // SAFETY: i < records, within our allocation.
            unsafe { self.records.add(i).write(r) };
        }
    }

    /// The buffer decoded, after checking that `pPcData` and every record's `stallReason` are
    /// still cutrace's (CUPTI is told they are the caller's to allocate): a replaced pointer is
    /// an error, nothing is read through it.
    pub fn decode(&self, reasons: &StallReasons) -> Result<PcBatch> {
        // SAFETY: our live allocation, read between CUPTI calls.
        let data = unsafe { &*self.data };
        if data.p_pc_data != self.records {
            return Err(CountersError::PcBufferReplaced("pPcData"));
        }
        for i in 0..self.cap.records {
            // SAFETY: i < records, within our allocation.
            let p = unsafe { (*self.records.add(i)).stall_reason };
            if !p.is_null() && p != self.stalls_of(i) {
                return Err(CountersError::PcBufferReplaced("stallReason"));
            }
        }
        // SAFETY: the record array holds cap.records records and each record's pairs array
        // (checked above to be ours, or null) cap.stall_reasons pairs; names are CUPTI's
        // NUL-terminated strings.
        Ok(unsafe { decode(data, self.cap, reasons) })
    }
}

impl Drop for PcBuffer {
    fn drop(&mut self) {
        // SAFETY: the three allocations made in `new`, with their lengths, freed once.
        unsafe {
            drop(Box::from_raw(self.data));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.records,
                self.cap.records,
            )));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.stalls,
                self.cap.records.saturating_mul(self.cap.stall_reasons),
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    const LONG_SB: u32 = 12;
    const BARRIER: u32 = 3;

    fn reasons() -> StallReasons {
        StallReasons::new([
            (
                LONG_SB,
                "smsp__pcsamp_warps_issue_stalled_long_scoreboard".to_string(),
            ),
            (
                BARRIER,
                "smsp__pcsamp_warps_issue_stalled_barrier".to_string(),
            ),
        ])
    }

    fn pair(index: u32, samples: u32) -> PcSamplingStallReason {
        PcSamplingStallReason {
            pc_sampling_stall_reason_index: index,
            samples,
        }
    }

    fn record(
        pc: u64,
        name: *const c_char,
        stalls: &mut [PcSamplingStallReason],
        count: usize,
    ) -> PcSamplingPcData {
        let mut r = PcSamplingPcData::new();
        r.cubin_crc = 0xdf94_976a;
        r.pc_offset = pc;
        r.function_index = 7;
        r.function_name = name.cast_mut();
        r.stall_reason = stalls.as_mut_ptr();
        r.stall_reason_count = count;
        r
    }

    fn data(records: &mut [PcSamplingPcData], claimed: usize) -> PcSamplingData {
        let mut d = PcSamplingData::new();
        d.collect_num_pcs = records.len();
        d.p_pc_data = records.as_mut_ptr();
        d.total_num_pcs = claimed;
        d
    }

    /// Decodes a buffer the test built, whose arrays are all at least `cap` long.
    fn run(d: &PcSamplingData, cap: Capacity) -> PcBatch {
        // SAFETY: every test builds its arrays at least as long as `cap` says, and its names
        // NUL-terminated (or longer than the bound).
        unsafe { decode(d, cap, &reasons()) }
    }

    fn cap(records: usize, stall_reasons: usize) -> Capacity {
        Capacity {
            records,
            stall_reasons,
        }
    }

    #[test]
    fn a_buffer_as_cupti_fills_it() {
        let k = CString::new("_Z5chainPKiPim").unwrap();
        let f = CString::new("_Z3fmaPfl").unwrap();
        let mut s0 = [pair(LONG_SB, 90), pair(BARRIER, 4)];
        let mut s1 = [pair(LONG_SB, 5), pair(0, 0)];
        let mut s2 = [pair(BARRIER, 1), pair(0, 0)];
        let mut recs = [
            record(0x80, k.as_ptr(), &mut s0, 2),
            record(0x90, k.as_ptr(), &mut s1, 1),
            record(0x10, f.as_ptr(), &mut s2, 1),
        ];
        recs[1].correlation_id = 41;
        let mut d = data(&mut recs, 3);
        d.total_samples = 130;
        d.dropped_samples = 6;
        d.non_usr_kernels_total_samples = 20;
        d.remaining_num_pcs = 2;
        d.range_id = 1;
        d.hardware_buffer_full = 1;
        let b = run(&d, cap(3, 2));
        assert!(b.problems.is_empty(), "{:?}", b.problems);
        assert_eq!(
            b.totals,
            PcTotals {
                total_samples: 130,
                dropped_samples: 6,
                non_user_kernel_samples: 20,
                pcs: 3,
                pcs_remaining: 2,
                range_id: 1,
                hardware_buffer_full: true,
            }
        );
        assert_eq!(b.records.len(), 3);
        let r = &b.records[0];
        assert_eq!(
            (r.cubin_crc, r.pc_offset, r.function_index),
            (0xdf94_976a, 0x80, 7)
        );
        assert_eq!(b.function_name(r), Some("_Z5chainPKiPim"));
        assert_eq!(
            r.stalls,
            [
                StallSamples {
                    index: LONG_SB,
                    samples: 90
                },
                StallSamples {
                    index: BARRIER,
                    samples: 4
                }
            ]
        );
        // stallReasonCount, not the array's length, says how many pairs there are.
        assert_eq!(b.records[1].stalls.len(), 1);
        assert_eq!(b.records[1].correlation_id, 41);
        // One name per function, shared by its records.
        assert_eq!(b.functions, ["_Z5chainPKiPim", "_Z3fmaPfl"]);
        assert_eq!(b.records[1].function, Some(0));
        assert_eq!(b.function_name(&b.records[2]), Some("_Z3fmaPfl"));
        assert_eq!(b.record_samples(), 100);
    }

    #[test]
    fn no_records() {
        let d = PcSamplingData::new();
        let b = run(&d, cap(0, 0));
        assert!(b.records.is_empty() && b.problems.is_empty());
        // CUPTI says there are PCs but gave no array: none read, all counted.
        let mut d = PcSamplingData::new();
        d.total_num_pcs = 5;
        d.collect_num_pcs = 8;
        let b = run(&d, cap(8, 4));
        assert!(b.records.is_empty());
        assert_eq!(b.problems.pcs_beyond_capacity, 5);
    }

    #[test]
    fn pcs_counted_beyond_the_capacity_are_not_read() {
        let n = CString::new("k").unwrap();
        let mut s = [[pair(LONG_SB, 1)]; 4];
        let [a, b2, c, e] = &mut s;
        // Four records exist in memory, the owner declared two; CUPTI claims four.
        let mut recs = [
            record(0, n.as_ptr(), a, 1),
            record(1, n.as_ptr(), b2, 1),
            record(2, n.as_ptr(), c, 1),
            record(3, n.as_ptr(), e, 1),
        ];
        let d = data(&mut recs, 4);
        let b = run(&d, cap(2, 1));
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.problems.pcs_beyond_capacity, 2);
        // collectNumPcs bounds it too: the owner allocated four, but told CUPTI three.
        let mut d = data(&mut recs, 4);
        d.collect_num_pcs = 3;
        let b = run(&d, cap(4, 1));
        assert_eq!(b.records.len(), 3);
        assert_eq!(b.problems.pcs_beyond_capacity, 1);
        // A count far past anything: no allocation follows it.
        let mut d = data(&mut recs, usize::MAX);
        d.collect_num_pcs = usize::MAX;
        let b = run(&d, cap(4, 1));
        assert_eq!(b.records.len(), 4);
        assert_eq!(b.problems.pcs_beyond_capacity, (usize::MAX - 4) as u64);
    }

    #[test]
    fn stall_counts_past_their_array_are_clamped() {
        let n = CString::new("k").unwrap();
        // Four pairs in memory, the owner's capacity is two, CUPTI claims four, then a million.
        let mut s = [
            pair(LONG_SB, 1),
            pair(BARRIER, 2),
            pair(LONG_SB, 3),
            pair(BARRIER, 4),
        ];
        let mut recs = [record(0, n.as_ptr(), &mut s, 4)];
        let d = data(&mut recs, 1);
        let b = run(&d, cap(1, 2));
        assert_eq!(b.records[0].stalls.len(), 2);
        assert_eq!(b.records[0].stalls[1].samples, 2);
        assert_eq!(b.problems.stall_counts_clamped, 1);
        recs[0].stall_reason_count = 1_000_000;
        let d = data(&mut recs, 1);
        let b = run(&d, cap(1, 2));
        assert_eq!(b.records[0].stalls.len(), 2);
    }

    #[test]
    fn a_null_stall_array_keeps_the_pc_without_pairs() {
        let n = CString::new("k").unwrap();
        let mut s = [pair(LONG_SB, 1)];
        let mut recs = [record(0x40, n.as_ptr(), &mut s, 3)];
        recs[0].stall_reason = std::ptr::null_mut();
        let d = data(&mut recs, 1);
        let b = run(&d, cap(1, 4));
        assert_eq!(b.records.len(), 1);
        assert_eq!(b.records[0].pc_offset, 0x40);
        assert!(b.records[0].stalls.is_empty());
        assert_eq!(b.problems.null_stall_arrays, 1);
        // No pairs claimed and no array: nothing odd.
        recs[0].stall_reason_count = 0;
        let d = data(&mut recs, 1);
        assert!(run(&d, cap(1, 4)).problems.is_empty());
    }

    #[test]
    fn huge_stall_indices_are_kept_and_counted_never_used_as_an_index() {
        let n = CString::new("k").unwrap();
        let mut s = [pair(u32::MAX, 7), pair(LONG_SB, 1), pair(1 << 31, 2)];
        let mut recs = [record(0, n.as_ptr(), &mut s, 3)];
        let d = data(&mut recs, 1);
        let b = run(&d, cap(1, 3));
        let idx: Vec<u32> = b.records[0].stalls.iter().map(|s| s.index).collect();
        assert_eq!(idx, [u32::MAX, LONG_SB, 1 << 31]);
        assert_eq!(b.problems.unknown_stall_reasons, 2);
        assert_eq!(reasons().name(u32::MAX), None);
    }

    #[test]
    fn names_missing_or_without_a_nul_in_bound() {
        let mut s = [[pair(LONG_SB, 1)]; 2];
        let [a, c] = &mut s;
        // Twice the bound of non-NUL bytes, then a NUL: only the bound is read.
        let mut long = vec![b'a' as c_char; 2 * MAX_FUNCTION_NAME_BYTES];
        long.push(0);
        let mut recs = [
            record(0, std::ptr::null(), a, 1),
            record(1, long.as_ptr(), c, 1),
        ];
        let d = data(&mut recs, 2);
        let b = run(&d, cap(2, 1));
        assert_eq!(b.records[0].function, None);
        assert_eq!(b.problems.missing_function_names, 1);
        assert_eq!(b.problems.names_truncated, 1);
        let name = b.function_name(&b.records[1]).unwrap();
        assert_eq!(name.len(), MAX_FUNCTION_NAME_BYTES);
        // Invalid UTF-8 is replaced, not refused.
        let bad: [c_char; 3] = [0xff_u8 as c_char, b'k' as c_char, 0];
        let mut s = [pair(LONG_SB, 1)];
        let mut recs = [record(0, bad.as_ptr(), &mut s, 1)];
        let d = data(&mut recs, 1);
        let b = run(&d, cap(1, 1));
        assert_eq!(b.functions, ["\u{fffd}k"]);
    }

    #[test]
    fn two_pointers_to_one_name_are_one_function() {
        let a = CString::new("_Z1kv").unwrap();
        let b2 = CString::new("_Z1kv").unwrap();
        let mut s = [[pair(LONG_SB, 1)]; 2];
        let [x, y] = &mut s;
        let mut recs = [record(0, a.as_ptr(), x, 1), record(4, b2.as_ptr(), y, 1)];
        let d = data(&mut recs, 2);
        let b = run(&d, cap(2, 1));
        assert_eq!(b.functions.len(), 1);
        assert_eq!(b.records[0].function, b.records[1].function);
    }

    /// What CUPTI does to a session's buffer in a GetData, through the pointers it was given.
    fn fill_like_cupti(buf: &PcBuffer, name: &CString, pcs: usize) {
        let d = buf.as_raw();
        // SAFETY: the buffer's own allocation, written as CUPTI would, within its capacity.
        unsafe {
            for i in 0..pcs {
                let r = (*d).p_pc_data.add(i);
                (*r).pc_offset = 16 * i as u64;
                (*r).function_name = name.as_ptr().cast_mut();
                (*r).stall_reason_count = 2;
                (*r).stall_reason.write(pair(LONG_SB, 10));
                (*r).stall_reason.add(1).write(pair(BARRIER, 1));
            }
            (*d).total_num_pcs = pcs;
            (*d).total_samples = 11 * pcs as u64;
        }
    }

    #[test]
    fn a_session_buffer_decodes_what_cupti_wrote_and_resets() {
        let name = CString::new("_Z5chainPKiPim").unwrap();
        let mut buf = PcBuffer::new(3, 2);
        // SAFETY: reading the buffer's header, which nothing writes meanwhile.
        let (size, collect) = unsafe { ((*buf.as_raw()).size, (*buf.as_raw()).collect_num_pcs) };
        assert_eq!((size, collect), (80, 3));
        fill_like_cupti(&buf, &name, 2);
        let b = buf.decode(&reasons()).unwrap();
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.records[1].pc_offset, 16);
        assert_eq!(b.record_samples(), 22);
        assert_eq!(b.totals.total_samples, 22);
        buf.reset();
        let b = buf.decode(&reasons()).unwrap();
        assert!(b.records.is_empty() && b.totals == PcTotals::default());
    }

    #[test]
    fn a_session_buffer_whose_pointers_cupti_replaced_is_not_read() {
        let name = CString::new("k").unwrap();
        let mut elsewhere = [pair(LONG_SB, 1); 2];
        let buf = PcBuffer::new(2, 2);
        fill_like_cupti(&buf, &name, 1);
        // SAFETY: the buffer's own record 1, written as a misbehaving CUPTI would.
        unsafe { (*(*buf.as_raw()).p_pc_data.add(1)).stall_reason = elsewhere.as_mut_ptr() };
        assert!(matches!(
            buf.decode(&reasons()),
            Err(CountersError::PcBufferReplaced("stallReason"))
        ));
        let mut other = [PcSamplingPcData::new()];
        // SAFETY: the buffer's own header.
        unsafe { (*buf.as_raw()).p_pc_data = other.as_mut_ptr() };
        assert!(matches!(
            buf.decode(&reasons()),
            Err(CountersError::PcBufferReplaced("pPcData"))
        ));
    }
}
