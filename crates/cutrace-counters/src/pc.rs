//! PC Sampling (cupti_pcsampling.h): which instructions warps sit at, and why they stall. A
//! session is enabled per CUDA context ([`Profiler::pc_enable`]), told its settings once
//! ([`PcSampler::configure`]: the period, continuous collection, every stall reason this GPU
//! names, the buffer sizes), read while the program runs ([`PcSampler::get_data`]) and disabled,
//! which hands over the last records ([`PcSampler::disable`]). What CUPTI writes is turned into
//! owned values by [`decode`] (its bounds and the tests of them are in `pc/decode.rs`). On the host
//! alone, [`Profiler::cubin_crc`] and [`Profiler::sass_to_source`] map a record's PC offset to a
//! source line when the cubin has line information.
//!
//! Call order (the header, and NVIDIA's pc_sampling samples): Enable; GetNumStallReasons and
//! GetStallReasons; SetConfigurationAttribute; then, with start/stop control, Start and Stop
//! around the code of interest (without it, sampling runs from configuration to Disable);
//! GetData as often as the buffer needs; Disable. The PC Sampling API needs no
//! `cuptiProfilerInitialize`.
//!
//! What the header says about the modes, quoted: continuous mode, "Kernels are not serialized in
//! this mode"; kernel-serialized mode, "Kernels are serialized in this mode". cutrace uses
//! continuous mode, so the program's kernels run as they would; the cost is that a record's
//! `correlationId` is "Only valid for serialized mode ... For continous mode of collection the
//! correlationId will be set to 0": records name the function and PC, not the launch.
//! `cuptiPCSamplingGetData` "never does device synchronization", and in continuous mode a flush
//! is "required ... after every module load-unload-load" to keep PCs unique.

mod decode;

use std::ffi::{c_char, CStr, CString};

use cutrace_cupti::driver::Context;
use cutrace_cupti::error::CUPTI_ERROR_OUT_OF_MEMORY;
use cutrace_cupti::sys;

use crate::{CountersError, Profiler, Result};

pub use decode::{
    decode, Capacity, DecodeProblems, PcBatch, PcBuffer, PcRecord, PcTotals, StallSamples,
    MAX_FUNCTION_NAME_BYTES,
};

/// Most PC records one buffer may be asked to hold (each takes 64 bytes, plus 8 per stall
/// reason); CUPTI's default scratch buffer holds about 5,500 PCs.
pub const MAX_PC_RECORDS: usize = 1 << 18;
/// Most stall reasons cutrace allocates for per PC (CUDA 13.0 names a few dozen per GPU).
pub const MAX_STALL_REASONS: usize = 256;

/// The sampling period: CUPTI samples each SM's warps every 2^N cycles, N in 5..=31
/// (`CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcPeriod(u32);

impl PcPeriod {
    pub fn new(exponent: u32) -> Result<PcPeriod> {
        if (sys::PC_SAMPLING_PERIOD_MIN..=sys::PC_SAMPLING_PERIOD_MAX).contains(&exponent) {
            Ok(PcPeriod(exponent))
        } else {
            Err(CountersError::PcPeriodOutOfRange(exponent))
        }
    }

    /// N, the value CUPTI is given.
    pub fn exponent(self) -> u32 {
        self.0
    }

    /// 2^N, the cycles between samples.
    pub fn cycles(self) -> u64 {
        1 << self.0
    }
}

/// A session's settings; `None` keeps CUPTI's default, which the header gives as: period "CUPTI
/// defined value based on number of SMs", scratch buffer 1 MB ("approximately 5500 PCs with all
/// stall reasons"), hardware buffer 512 MB, worker threads waking every 100 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcSamplingConfig {
    pub period: Option<PcPeriod>,
    /// PC records in each buffer cutrace gives CUPTI (`collectNumPcs`): the one
    /// [`PcSampler::get_data`] fills and the one CUPTI fills at Disable.
    pub records: usize,
    pub scratch_buffer_bytes: Option<usize>,
    /// "If sampling period is too less, HW buffer can overflow and drop PC data" (the header).
    pub hardware_buffer_bytes: Option<usize>,
    pub worker_thread_sleep_ms: Option<u32>,
    /// Sampling only between [`PcSampler::start`] and [`PcSampler::stop`]; off, it runs from
    /// configuration to Disable.
    pub start_stop_control: bool,
}

impl PcSamplingConfig {
    /// Continuous collection of every stall reason into buffers of `records` PCs, CUPTI's
    /// defaults otherwise, no start/stop control.
    pub fn continuous(records: usize) -> PcSamplingConfig {
        PcSamplingConfig {
            period: None,
            records,
            scratch_buffer_bytes: None,
            hardware_buffer_bytes: None,
            worker_thread_sleep_ms: None,
            start_stop_control: false,
        }
    }
}

/// One stall reason as `cuptiPCSamplingGetStallReasons` names it: CUPTI's index (what PC
/// records carry; not dense, not 0-based in general) and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallReason {
    pub index: u32,
    pub name: String,
}

/// The stall reasons of one context's GPU, in CUPTI's order, looked up by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StallReasons {
    reasons: Vec<StallReason>,
    /// (index, position in `reasons`), sorted by index.
    by_index: Vec<(u32, usize)>,
}

impl StallReasons {
    /// From (index, name) pairs; a repeated index keeps its first name.
    pub fn new(pairs: impl IntoIterator<Item = (u32, String)>) -> StallReasons {
        let mut s = StallReasons::default();
        for (index, name) in pairs {
            if s.reasons.iter().any(|r| r.index == index) {
                continue;
            }
            s.by_index.push((index, s.reasons.len()));
            s.reasons.push(StallReason { index, name });
        }
        s.by_index.sort_unstable();
        s
    }

    /// The name CUPTI gave `index`, `None` for an index it did not name.
    pub fn name(&self, index: u32) -> Option<&str> {
        let at = self.by_index.binary_search_by_key(&index, |e| e.0).ok()?;
        Some(&self.reasons[self.by_index[at].1].name)
    }

    pub fn contains(&self, index: u32) -> bool {
        self.name(index).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = &StallReason> {
        self.reasons.iter()
    }

    pub fn len(&self) -> usize {
        self.reasons.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// Where a PC offset of a function lies in the source, from the cubin's line information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    pub file: String,
    pub dir: String,
    pub line: u32,
}

impl<'c> Profiler<'c> {
    /// `cuptiPCSamplingEnable` on `ctx`, then the GPU's stall reasons
    /// (`cuptiPCSamplingGetNumStallReasons`, `cuptiPCSamplingGetStallReasons`). A session per
    /// context; disable it before the context is destroyed (the injection's
    /// CONTEXT_DESTROY_STARTING callback), or CUPTI tears it down with the context.
    pub fn pc_enable(&self, ctx: Context) -> Result<PcSampler<'_, 'c>> {
        let syms = self.cupti.pc_sampling();
        let mut p = sys::PcSamplingEnableParams::new();
        p.ctx = ctx.as_raw();
        // SAFETY: the context came from the driver or a CUPTI callback; no other pointer.
        unsafe { self.call("cuptiPCSamplingEnable", syms.enable, &mut p)? };
        let mut sampler = PcSampler {
            profiler: self,
            ctx,
            stall_reasons: StallReasons::default(),
            indices: Vec::new(),
            data_buffer: None,
            retired: Vec::new(),
            start_stop: false,
            started: false,
            disabled: false,
        };
        sampler.stall_reasons = sampler.read_stall_reasons()?;
        sampler.indices = sampler.stall_reasons.iter().map(|r| r.index).collect();
        Ok(sampler)
    }

    /// `cuptiGetCubinCrc`: the CRC CUPTI puts in PC records' `cubinCrc` for this cubin (host
    /// only: no GPU needed).
    pub fn cubin_crc(&self, cubin: &[u8]) -> Result<u64> {
        let mut p = sys::GetCubinCrcParams::new();
        p.cubin = cubin.as_ptr().cast();
        p.cubin_size = cubin.len();
        // SAFETY: the cubin is read within its length during the call.
        unsafe {
            self.call(
                "cuptiGetCubinCrc",
                self.cupti.pc_sampling().get_cubin_crc,
                &mut p,
            )?
        };
        Ok(p.cubin_crc)
    }

    /// `cuptiGetSassToSourceCorrelation`: the source line of `pc_offset` in `function` (its
    /// name as PC records give it) of `cubin` (host only). `Ok(None)` when CUPTI answers with
    /// no line: a cubin built without line information (`-lineinfo` or `-G`).
    pub fn sass_to_source(
        &self,
        cubin: &[u8],
        function: &str,
        pc_offset: u64,
    ) -> Result<Option<SourceLine>> {
        let name = CString::new(function).map_err(|_| CountersError::Nul {
            what: "function name",
            text: function.into(),
        })?;
        let mut p = sys::GetSassToSourceCorrelationParams::new();
        p.cubin = cubin.as_ptr().cast();
        p.cubin_size = cubin.len();
        p.function_name = name.as_ptr();
        p.pc_offset = pc_offset;
        // SAFETY: the cubin and the name are read during the call; fileName and dirName are out.
        let r = unsafe {
            self.call(
                "cuptiGetSassToSourceCorrelation",
                self.cupti.pc_sampling().get_sass_to_source_correlation,
                &mut p,
            )
        };
        // "It is expected from user to free allocated memory for fileName and dirName after
        // use" (the header): copied, then freed, on success and failure alike.
        // SAFETY: each is null or a NUL-terminated string CUPTI allocated for this call.
        let file = unsafe { take_c_string(p.file_name) };
        // SAFETY: as above.
        let dir = unsafe { take_c_string(p.dir_name) };
        r?;
        if p.line_number == 0 && file.as_deref().unwrap_or("").is_empty() {
            return Ok(None);
        }
        Ok(Some(SourceLine {
            file: file.unwrap_or_default(),
            dir: dir.unwrap_or_default(),
            line: p.line_number,
        }))
    }
}

/// A string CUPTI allocated for the caller to free: copied out and freed.
///
/// # Safety
/// `p` must be null or a NUL-terminated string from `malloc` that nothing else frees or uses.
unsafe fn take_c_string(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller vouches for the string.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: CUPTI allocated it for us to free, and it is not used after this.
    unsafe { libc::free(p.cast()) };
    Some(s)
}

/// One configuration attribute and the header's name for it (for errors).
type Attribute = (&'static str, sys::PcSamplingConfigurationInfo);

/// The attributes `configure` sets, in one `cuptiPCSamplingSetConfigurationAttribute` call:
/// continuous collection, parsed output, every stall reason in `indices`, the buffer CUPTI fills
/// at Disable, start/stop control as asked, and the sizes and period when given. The pointers
/// must outlive the session (CUPTI keeps the data buffer's).
fn attributes(
    c: &PcSamplingConfig,
    indices: &mut [u32],
    data_buffer: *mut sys::PcSamplingData,
) -> Vec<Attribute> {
    use sys::PcSamplingAttributeData as D;
    let zero = <D as sys::Zero>::ZERO;
    let attr = |t, d| sys::PcSamplingConfigurationInfo::with(t, d);
    let mut out = Vec::new();
    let mut d = zero;
    d.collection_mode = sys::PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    out.push((
        "COLLECTION_MODE",
        attr(sys::PC_SAMPLING_ATTR_COLLECTION_MODE, d),
    ));
    let mut d = zero;
    d.output_data_format = sys::PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
    out.push((
        "OUTPUT_DATA_FORMAT",
        attr(sys::PC_SAMPLING_ATTR_OUTPUT_DATA_FORMAT, d),
    ));
    let mut d = zero;
    d.stall_reason = sys::PcSamplingStallReasonData {
        stall_reason_count: indices.len(),
        p_stall_reason_index: indices.as_mut_ptr(),
    };
    out.push(("STALL_REASON", attr(sys::PC_SAMPLING_ATTR_STALL_REASON, d)));
    let mut d = zero;
    d.sampling_data_buffer = data_buffer.cast();
    out.push((
        "SAMPLING_DATA_BUFFER",
        attr(sys::PC_SAMPLING_ATTR_SAMPLING_DATA_BUFFER, d),
    ));
    let mut d = zero;
    d.enable_start_stop_control = u32::from(c.start_stop_control);
    out.push((
        "ENABLE_START_STOP_CONTROL",
        attr(sys::PC_SAMPLING_ATTR_ENABLE_START_STOP_CONTROL, d),
    ));
    if let Some(p) = c.period {
        let mut d = zero;
        d.sampling_period = p.exponent();
        out.push((
            "SAMPLING_PERIOD",
            attr(sys::PC_SAMPLING_ATTR_SAMPLING_PERIOD, d),
        ));
    }
    if let Some(n) = c.scratch_buffer_bytes {
        let mut d = zero;
        d.scratch_buffer_size = n;
        out.push((
            "SCRATCH_BUFFER_SIZE",
            attr(sys::PC_SAMPLING_ATTR_SCRATCH_BUFFER_SIZE, d),
        ));
    }
    if let Some(n) = c.hardware_buffer_bytes {
        let mut d = zero;
        d.hardware_buffer_size = n;
        out.push((
            "HARDWARE_BUFFER_SIZE",
            attr(sys::PC_SAMPLING_ATTR_HARDWARE_BUFFER_SIZE, d),
        ));
    }
    if let Some(ms) = c.worker_thread_sleep_ms {
        let mut d = zero;
        d.worker_thread_periodic_sleep_span = ms;
        out.push((
            "WORKER_THREAD_PERIODIC_SLEEP_SPAN",
            attr(sys::PC_SAMPLING_ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN, d),
        ));
    }
    out
}

/// An enabled PC Sampling session on one context. It owns the buffers CUPTI writes into until
/// it is disabled; disabled on drop if not before (and, if that Disable fails, the buffers are
/// leaked rather than freed under CUPTI).
///
/// Function names in the records are CUPTI's allocations, which the header says "might be
/// shared across all the records including records from activity APIs representing the same
/// function, and so it should not be modified or freed until post processing of all the records
/// is done": cutrace copies them and never frees them, as its activity records may still point
/// there.
pub struct PcSampler<'p, 'c> {
    profiler: &'p Profiler<'c>,
    ctx: Context,
    stall_reasons: StallReasons,
    /// The stall reasons' indices, given to CUPTI by pointer at configuration.
    indices: Vec<u32>,
    /// The buffer CUPTI fills at Disable (`SAMPLING_DATA_BUFFER`), and the one `get_data`
    /// passes; `None` until configured.
    data_buffer: Option<(PcBuffer, PcBuffer)>,
    /// Buffers of an earlier configuration: CUPTI may still hold their pointers.
    retired: Vec<(PcBuffer, PcBuffer)>,
    start_stop: bool,
    started: bool,
    disabled: bool,
}

impl PcSampler<'_, '_> {
    /// The GPU's stall reasons, as CUPTI named them at enable.
    pub fn stall_reasons(&self) -> &StallReasons {
        &self.stall_reasons
    }

    fn read_stall_reasons(&self) -> Result<StallReasons> {
        let syms = self.profiler.cupti.pc_sampling();
        let mut n = 0usize;
        let mut p = sys::PcSamplingGetNumStallReasonsParams::new();
        p.ctx = self.ctx.as_raw();
        p.num_stall_reasons = &mut n;
        // SAFETY: `n` is our local and outlives the call.
        unsafe {
            self.profiler.call(
                "cuptiPCSamplingGetNumStallReasons",
                syms.get_num_stall_reasons,
                &mut p,
            )?
        };
        if n == 0 || n > MAX_STALL_REASONS {
            return Err(CountersError::PcStallReasonCount(n));
        }
        let size = sys::STALL_REASON_STRING_SIZE;
        let mut index = vec![0u32; n];
        let mut names = vec![0 as c_char; n * size];
        let mut name_ptrs: Vec<*mut c_char> =
            names.chunks_mut(size).map(|c| c.as_mut_ptr()).collect();
        let mut p = sys::PcSamplingGetStallReasonsParams::new();
        p.ctx = self.ctx.as_raw();
        p.num_stall_reasons = n;
        p.stall_reason_index = index.as_mut_ptr();
        p.stall_reasons = name_ptrs.as_mut_ptr();
        // SAFETY: `n` indices and `n` name buffers of CUPTI_STALL_REASON_STRING_SIZE bytes,
        // which CUPTI fills; all outlive the call.
        unsafe {
            self.profiler.call(
                "cuptiPCSamplingGetStallReasons",
                syms.get_stall_reasons,
                &mut p,
            )?
        };
        let pairs = index.iter().zip(names.chunks(size)).map(|(&i, buf)| {
            // Our own buffer: a name is cut at its NUL, or at the buffer's end if CUPTI wrote none.
            let bytes: Vec<u8> = buf
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            (i, String::from_utf8_lossy(&bytes).into_owned())
        });
        Ok(StallReasons::new(pairs))
    }

    /// `cuptiPCSamplingSetConfigurationAttribute` with `attributes`: continuous mode, every
    /// stall reason, buffers of `c.records` PCs. A refused attribute is named in the error.
    pub fn configure(&mut self, c: &PcSamplingConfig) -> Result<()> {
        if c.records == 0 || c.records > MAX_PC_RECORDS {
            return Err(CountersError::PcBufferSize(c.records));
        }
        let n = self.stall_reasons.len();
        let at_disable = PcBuffer::new(c.records, n);
        let for_get_data = PcBuffer::new(c.records, n);
        let attrs = attributes(c, &mut self.indices, at_disable.as_raw());
        let mut infos: Vec<sys::PcSamplingConfigurationInfo> = attrs.iter().map(|a| a.1).collect();
        let mut p = sys::PcSamplingConfigurationInfoParams::new();
        p.ctx = self.ctx.as_raw();
        p.num_attributes = infos.len();
        p.p_pc_sampling_configuration_info = infos.as_mut_ptr();
        // Whatever CUPTI answers, it may have taken the data buffer's pointer: kept to the end.
        if let Some(old) = self.data_buffer.replace((at_disable, for_get_data)) {
            self.retired.push(old);
        }
        // SAFETY: the attribute array and the index array are live for the call; the data
        // buffer and the indices are owned by `self` until Disable.
        let r = unsafe {
            self.profiler.call(
                "cuptiPCSamplingSetConfigurationAttribute",
                self.profiler
                    .cupti
                    .pc_sampling()
                    .set_configuration_attribute,
                &mut p,
            )
        };
        if let Err(e) = r {
            // Each attribute has its own status: the first refused one is named.
            let refused = attrs
                .iter()
                .zip(&infos)
                .find(|(_, i)| i.attribute_status != 0);
            return Err(match refused {
                Some(((name, _), info)) => CountersError::PcAttributeRefused {
                    attribute: name,
                    code: info.attribute_status,
                },
                None => e,
            });
        }
        self.start_stop = c.start_stop_control;
        Ok(())
    }

    /// `cuptiPCSamplingStart`: only with start/stop control (the header: "Set configuration
    /// option ... ENABLE_START_STOP_CONTROL to use this API").
    pub fn start(&mut self) -> Result<()> {
        if !self.start_stop {
            return Err(CountersError::PcStartStopOff("cuptiPCSamplingStart"));
        }
        let mut p = sys::PcSamplingStartParams::new();
        p.ctx = self.ctx.as_raw();
        // SAFETY: the context is the only pointer.
        unsafe {
            self.profiler.call(
                "cuptiPCSamplingStart",
                self.profiler.cupti.pc_sampling().start,
                &mut p,
            )?
        };
        self.started = true;
        Ok(())
    }

    /// `cuptiPCSamplingStop`: only with start/stop control. With it, the header asks for a
    /// GetData "after every range end".
    pub fn stop(&mut self) -> Result<()> {
        if !self.start_stop {
            return Err(CountersError::PcStartStopOff("cuptiPCSamplingStop"));
        }
        self.started = false;
        let mut p = sys::PcSamplingStopParams::new();
        p.ctx = self.ctx.as_raw();
        // SAFETY: the context is the only pointer.
        unsafe {
            self.profiler.call(
                "cuptiPCSamplingStop",
                self.profiler.cupti.pc_sampling().stop,
                &mut p,
            )
        }
    }

    /// `cuptiPCSamplingGetData` into the session's buffer, decoded. CUPTI gives "only the data
    /// available with it at that moment" and never synchronizes the device; while
    /// `totals.pcs_remaining` is above 0 there is more to get. A full hardware buffer (CUPTI's
    /// OUT_OF_MEMORY) is `totals.hardware_buffer_full`, not an error: "When hardware buffer is
    /// full, user will get pc data as 0".
    pub fn get_data(&mut self) -> Result<PcBatch> {
        let Some((_, buf)) = self.data_buffer.as_mut() else {
            return Err(CountersError::PcNotConfigured("cuptiPCSamplingGetData"));
        };
        buf.reset();
        let mut p = sys::PcSamplingGetDataParams::new();
        p.ctx = self.ctx.as_raw();
        p.pc_sampling_data = buf.as_raw().cast();
        // SAFETY: the buffer is owned by `self`, sized as its `collectNumPcs` says, with a
        // stall-reason array of every stall reason per record; CUPTI writes it during the call.
        let r = unsafe {
            self.profiler.call(
                "cuptiPCSamplingGetData",
                self.profiler.cupti.pc_sampling().get_data,
                &mut p,
            )
        };
        let full = match r {
            Ok(()) => false,
            Err(CountersError::Call { code, .. }) if code == CUPTI_ERROR_OUT_OF_MEMORY => true,
            Err(e) => return Err(e),
        };
        let mut batch = buf.decode(&self.stall_reasons)?;
        batch.totals.hardware_buffer_full |= full;
        Ok(batch)
    }

    /// `cuptiPCSamplingDisable` (logged), after a stop if started; returns what CUPTI put in the
    /// configured buffer at Disable ("PC records which can't be accommodated in the buffer are
    /// discarded": counted in `totals.pcs_remaining` when CUPTI says so). An unconfigured
    /// session returns an empty batch.
    pub fn disable(mut self) -> Result<PcBatch> {
        if self.started {
            let _ = self.stop();
        }
        self.disabled = true;
        let mut p = sys::PcSamplingDisableParams::new();
        p.ctx = self.ctx.as_raw();
        // SAFETY: the context is the only pointer; the buffers CUPTI fills here are owned by
        // `self`, and `disabled` stops the drop from repeating the call.
        let r = unsafe {
            self.profiler.call(
                "cuptiPCSamplingDisable",
                self.profiler.cupti.pc_sampling().disable,
                &mut p,
            )
        };
        if let Err(e) = r {
            // CUPTI may still write into the buffers: they are never freed.
            self.leak_buffers();
            return Err(e);
        }
        match &self.data_buffer {
            Some((at_disable, _)) => at_disable.decode(&self.stall_reasons),
            None => Ok(PcBatch::default()),
        }
    }

    fn leak_buffers(&mut self) {
        for b in self
            .data_buffer
            .take()
            .into_iter()
            .chain(self.retired.drain(..))
        {
            std::mem::forget(b);
        }
    }
}

impl Drop for PcSampler<'_, '_> {
    fn drop(&mut self) {
        if self.disabled {
            return;
        }
        let syms = self.profiler.cupti.pc_sampling();
        if self.started {
            let mut s = sys::PcSamplingStopParams::new();
            s.ctx = self.ctx.as_raw();
            // SAFETY: the context is the only pointer.
            unsafe { self.profiler.call_quietly(syms.stop, &mut s) };
        }
        let mut p = sys::PcSamplingDisableParams::new();
        p.ctx = self.ctx.as_raw();
        let Some(f) = syms.disable else {
            self.leak_buffers();
            return;
        };
        // SAFETY: the context is the only pointer; disabled once, before the buffers are freed.
        let code = unsafe { f(&mut p) };
        if code != 0 {
            self.leak_buffers();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    #[test]
    fn the_period_is_an_exponent_from_5_to_31() {
        assert_eq!(PcPeriod::new(5).unwrap().cycles(), 32);
        assert_eq!(PcPeriod::new(31).unwrap().cycles(), 1 << 31);
        assert_eq!(PcPeriod::new(10).unwrap().exponent(), 10);
        for bad in [0, 4, 32, u32::MAX] {
            assert!(matches!(
                PcPeriod::new(bad),
                Err(CountersError::PcPeriodOutOfRange(n)) if n == bad
            ));
        }
    }

    #[test]
    fn stall_reasons_are_looked_up_by_cuptis_index_not_position() {
        let s = StallReasons::new([
            (
                12,
                "smsp__pcsamp_warps_issue_stalled_long_scoreboard".to_string(),
            ),
            (3, "smsp__pcsamp_warps_issue_stalled_barrier".to_string()),
            (12, "a repeat".to_string()),
            (u32::MAX, "last".to_string()),
        ]);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.name(12),
            Some("smsp__pcsamp_warps_issue_stalled_long_scoreboard")
        );
        assert_eq!(s.name(3), Some("smsp__pcsamp_warps_issue_stalled_barrier"));
        assert_eq!(s.name(u32::MAX), Some("last"));
        assert_eq!(s.name(0), None);
        assert_eq!(s.name(1), None);
        // CUPTI's order is kept for listing.
        let order: Vec<u32> = s.iter().map(|r| r.index).collect();
        assert_eq!(order, [12, 3, u32::MAX]);
    }

    #[test]
    fn the_configuration_is_continuous_with_every_stall_reason() {
        let mut indices = vec![2u32, 5, 9];
        let buf = PcBuffer::new(4, 3);
        let mut c = PcSamplingConfig::continuous(4);
        let a = attributes(&c, &mut indices, buf.as_raw());
        let names: Vec<&str> = a.iter().map(|x| x.0).collect();
        assert_eq!(
            names,
            [
                "COLLECTION_MODE",
                "OUTPUT_DATA_FORMAT",
                "STALL_REASON",
                "SAMPLING_DATA_BUFFER",
                "ENABLE_START_STOP_CONTROL"
            ]
        );
        // SAFETY: each union member read is the one `attributes` wrote for that type.
        unsafe {
            assert_eq!(a[0].1.attribute_type, sys::PC_SAMPLING_ATTR_COLLECTION_MODE);
            assert_eq!(
                a[0].1.attribute_data.collection_mode,
                sys::PC_SAMPLING_COLLECTION_MODE_CONTINUOUS
            );
            assert_eq!(
                a[1].1.attribute_data.output_data_format,
                sys::PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED
            );
            let sr = a[2].1.attribute_data.stall_reason;
            assert_eq!(sr.stall_reason_count, 3);
            assert_eq!(sr.p_stall_reason_index, indices.as_mut_ptr());
            assert_eq!(
                a[3].1.attribute_data.sampling_data_buffer,
                buf.as_raw().cast::<c_void>()
            );
            assert_eq!(a[4].1.attribute_data.enable_start_stop_control, 0);
        }
        c.period = Some(PcPeriod::new(9).unwrap());
        c.hardware_buffer_bytes = Some(64 << 20);
        c.scratch_buffer_bytes = Some(4 << 20);
        c.worker_thread_sleep_ms = Some(20);
        c.start_stop_control = true;
        let a = attributes(&c, &mut indices, buf.as_raw());
        let find = |n: &str| a.iter().find(|x| x.0 == n).unwrap().1;
        // SAFETY: as above.
        unsafe {
            assert_eq!(find("SAMPLING_PERIOD").attribute_data.sampling_period, 9);
            assert_eq!(
                find("HARDWARE_BUFFER_SIZE")
                    .attribute_data
                    .hardware_buffer_size,
                64 << 20
            );
            assert_eq!(
                find("SCRATCH_BUFFER_SIZE")
                    .attribute_data
                    .scratch_buffer_size,
                4 << 20
            );
            assert_eq!(
                find("WORKER_THREAD_PERIODIC_SLEEP_SPAN")
                    .attribute_data
                    .worker_thread_periodic_sleep_span,
                20
            );
            assert_eq!(
                find("ENABLE_START_STOP_CONTROL")
                    .attribute_data
                    .enable_start_stop_control,
                1
            );
        }
        assert!(a.iter().all(|x| x.1.attribute_status == 0));
    }
}
