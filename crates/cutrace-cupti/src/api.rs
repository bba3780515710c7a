//! The loaded libcupti: symbols resolved once, optional ones as `Option`s, never a panic.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use crate::error::{check, CuptiError, CuptiResult};
use crate::locate::Candidate;
use crate::symbols::{sym, PcSamplingSymbols, PmSamplingSymbols, ProfilerSymbols};

/// `CUpti_BuffersCallbackRequestFunc`.
pub type BufferRequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc` (context, stream id, buffer, size, valid size).
pub type BufferCompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `CUpti_CallbackFunc` (userdata, domain, callback id, callback data).
pub type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// `CUpti_CallbackDomain` values.
pub const CB_DOMAIN_DRIVER_API: u32 = 1;
pub const CB_DOMAIN_RUNTIME_API: u32 = 2;
/// Callback ids [`Cupti::callback_names`] asks about at most, and how many unnamed ids in a row
/// end the walk (CUDA 13.0's tables end below 1,000; ids are dense, with short gaps).
pub const MAX_CALLBACK_ID: u32 = 4096;
pub const UNNAMED_IDS_THAT_END_A_WALK: u32 = 512;
/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`.
pub const FLUSH_FORCED: u32 = 1;
/// `CUpti_ActivityAttribute` values used here.
pub const ATTR_DEVICE_BUFFER_SIZE: u32 = 0;
pub const ATTR_ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;
pub const ATTR_PER_THREAD_ACTIVITY_BUFFER: u32 = 9;

type GetVersion = unsafe extern "C" fn(*mut u32) -> CuptiResult;
type RegisterCallbacks = unsafe extern "C" fn(BufferRequestFn, BufferCompleteFn) -> CuptiResult;
type U32Fn = unsafe extern "C" fn(u32) -> CuptiResult;
type GetNextRecord = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult;
type GetDropped = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult;
type SetAttribute = unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> CuptiResult;
type GetTimestamp = unsafe extern "C" fn(*mut u64) -> CuptiResult;
type Subscribe = unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> CuptiResult;
type Unsubscribe = unsafe extern "C" fn(*mut c_void) -> CuptiResult;
type GetCallbackName = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult;
type EnableApi = unsafe extern "C" fn(u32, u8) -> CuptiResult;
type GetResultString = unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult;
type EnableCallback = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> CuptiResult;
type GetDeviceId = unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult;

/// `CUpti_CallbackDomain` value of context, stream and module events.
pub const CB_DOMAIN_RESOURCE: u32 = 3;
/// `CUpti_CallbackIdResource` values (cupti_callbacks.h).
pub const CBID_RESOURCE_CONTEXT_CREATED: u32 = 1;
pub const CBID_RESOURCE_CONTEXT_DESTROY_STARTING: u32 = 2;
pub const CBID_RESOURCE_MODULE_LOADED: u32 = 6;
pub const CBID_RESOURCE_MODULE_UNLOAD_STARTING: u32 = 7;
/// `CUpti_ApiCallbackSite`.
pub const API_ENTER: u32 = 0;
pub const API_EXIT: u32 = 1;

/// `CUpti_CallbackData` (cupti_callbacks.h): what an API callback is given.
#[repr(C)]
pub struct CallbackData {
    /// `CUpti_ApiCallbackSite`: [`API_ENTER`] or [`API_EXIT`].
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const c_void,
    pub function_return_value: *mut c_void,
    /// The kernel's (mangled) name for launch calls, else null.
    pub symbol_name: *const c_char,
    pub context: *mut c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    /// The same id the activity records of this call carry.
    pub correlation_id: u32,
}

/// `CUpti_ResourceData` (cupti_callbacks.h): what a resource callback is given.
#[repr(C)]
pub struct ResourceData {
    pub context: *mut c_void,
    /// `resourceHandle.stream` for stream events.
    pub resource_handle: *mut c_void,
    pub resource_descriptor: *mut c_void,
}

/// `CUpti_ModuleResourceData` (cupti_callbacks.h): a module's cubin, which
/// `ResourceData::resource_descriptor` points to in MODULE_LOADED and MODULE_UNLOAD_STARTING
/// callbacks.
#[repr(C)]
pub struct ModuleResourceData {
    pub module_id: u32,
    pub cubin_size: usize,
    pub cubin: *const c_char,
}

// Layouts checked against cupti_callbacks.h of CUDA 13.0 (x86-64).
const _: () = {
    assert!(std::mem::size_of::<CallbackData>() == 72);
    assert!(std::mem::offset_of!(CallbackData, symbol_name) == 32);
    assert!(std::mem::offset_of!(CallbackData, context) == 40);
    assert!(std::mem::offset_of!(CallbackData, correlation_id) == 64);
    assert!(std::mem::size_of::<ResourceData>() == 24);
    assert!(std::mem::size_of::<ModuleResourceData>() == 24);
    assert!(std::mem::offset_of!(ModuleResourceData, cubin_size) == 8);
    assert!(std::mem::offset_of!(ModuleResourceData, cubin) == 16);
};

/// A loaded libcupti. Dropping it unloads nothing that CUPTI still uses only if the caller
/// keeps it alive as long as callbacks may fire: the injection leaks it on purpose.
pub struct Cupti {
    lib: Arc<libloading::Library>,
    pub path: String,
    pub source: &'static str,
    get_version: GetVersion,
    register_callbacks: RegisterCallbacks,
    enable: U32Fn,
    disable: U32Fn,
    get_next_record: GetNextRecord,
    flush_all: U32Fn,
    get_dropped: Option<GetDropped>,
    set_attribute: Option<SetAttribute>,
    get_timestamp: Option<GetTimestamp>,
    subscribe: Option<Subscribe>,
    unsubscribe: Option<Unsubscribe>,
    get_callback_name: Option<GetCallbackName>,
    enable_runtime_api: Option<EnableApi>,
    enable_driver_api: Option<EnableApi>,
    get_result_string: Option<GetResultString>,
    enable_callback: Option<EnableCallback>,
    get_device_id: Option<GetDeviceId>,
    profiler: ProfilerSymbols,
    pm_sampling: PmSamplingSymbols,
    pc_sampling: PcSamplingSymbols,
}

impl Cupti {
    /// Tries the candidates in order; the first library that loads and has the core symbols wins.
    pub fn load(cands: &[Candidate]) -> Result<Cupti, CuptiError> {
        let mut tried = Vec::new();
        let mut last_err = None;
        for c in cands {
            let path = c.path.display().to_string();
            match Self::load_one(&path, c.source) {
                Ok(l) => return Ok(l),
                Err(e) => {
                    tried.push(format!("{path} ({})", c.source));
                    // A library that exists but fails to load says more than "not found".
                    if !matches!(e, CuptiError::Load { .. }) || c.path.is_absolute() {
                        last_err = Some(e);
                    }
                }
            }
        }
        Err(last_err.unwrap_or(CuptiError::NotFound {
            tried: tried.join(", "),
        }))
    }

    /// Loads one library by path or soname.
    pub fn load_one(path: &str, source: &'static str) -> Result<Cupti, CuptiError> {
        // RTLD_NODELETE: once any CUPTI call has hooked it into the driver, libcupti must never
        // be unmapped, even when a start fails later and this handle is dropped (an unloaded
        // CUPTI with live driver hooks would crash the program at its next CUDA call). It also
        // keeps every symbol resolved below valid for the life of the process.
        let flags = libc::RTLD_LAZY | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
        let lib: libloading::Library =
            // SAFETY: loading libcupti runs its initializers, which is what every CUPTI tool does.
            unsafe { libloading::os::unix::Library::open(Some(path), flags) }
                .map_err(|e| CuptiError::Load {
                    path: path.into(),
                    reason: e.to_string(),
                })?
                .into();
        macro_rules! req {
            ($name:literal) => {
                // SAFETY: each field's type is the signature cupti_activity.h / cupti_callbacks.h
                // declare for this name.
                unsafe { sym(&lib, concat!($name, "\0").as_bytes()) }.ok_or(
                    CuptiError::MissingSymbol {
                        path: path.into(),
                        symbol: $name,
                    },
                )?
            };
        }
        macro_rules! opt {
            ($name:literal) => {
                // SAFETY: as for `req`; absent on older releases.
                unsafe { sym(&lib, concat!($name, "\0").as_bytes()) }
            };
        }
        Ok(Cupti {
            get_version: req!("cuptiGetVersion"),
            register_callbacks: req!("cuptiActivityRegisterCallbacks"),
            enable: req!("cuptiActivityEnable"),
            disable: req!("cuptiActivityDisable"),
            get_next_record: req!("cuptiActivityGetNextRecord"),
            flush_all: req!("cuptiActivityFlushAll"),
            get_dropped: opt!("cuptiActivityGetNumDroppedRecords"),
            set_attribute: opt!("cuptiActivitySetAttribute"),
            get_timestamp: opt!("cuptiGetTimestamp"),
            subscribe: opt!("cuptiSubscribe"),
            unsubscribe: opt!("cuptiUnsubscribe"),
            get_callback_name: opt!("cuptiGetCallbackName"),
            enable_runtime_api: opt!("cuptiActivityEnableRuntimeApi"),
            enable_driver_api: opt!("cuptiActivityEnableDriverApi"),
            get_result_string: opt!("cuptiGetResultString"),
            enable_callback: opt!("cuptiEnableCallback"),
            get_device_id: opt!("cuptiGetDeviceId"),
            profiler: ProfilerSymbols::resolve(&lib),
            pm_sampling: PmSamplingSymbols::resolve(&lib),
            pc_sampling: PcSamplingSymbols::resolve(&lib),
            path: path.into(),
            source,
            lib: Arc::new(lib),
        })
    }

    /// The profiling symbols (profiler target/host, Range Profiler); absent ones are `None`.
    pub fn profiler(&self) -> &ProfilerSymbols {
        &self.profiler
    }

    /// The PM Sampling symbols; absent ones are `None`.
    pub fn pm_sampling(&self) -> &PmSamplingSymbols {
        &self.pm_sampling
    }

    /// The PC Sampling symbols (sessions, SASS-to-source, cubin CRC); absent ones are `None`.
    pub fn pc_sampling(&self) -> &PcSamplingSymbols {
        &self.pc_sampling
    }

    /// `cuptiGetResultString`: CUPTI's own name for a result code; `None` without the symbol.
    pub fn result_string(&self, code: CuptiResult) -> Option<String> {
        let f = self.get_result_string?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: an out-pointer to our local.
        if unsafe { f(code, &mut p) } != 0 || p.is_null() {
            return None;
        }
        // SAFETY: CUPTI returns a NUL-terminated static string.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    pub fn version(&self) -> Result<u32, CuptiError> {
        let mut v = 0u32;
        // SAFETY: an out-pointer to our local.
        check("cuptiGetVersion", unsafe { (self.get_version)(&mut v) })?;
        Ok(v)
    }

    pub fn register_callbacks(
        &self,
        req: BufferRequestFn,
        done: BufferCompleteFn,
    ) -> Result<(), CuptiError> {
        // SAFETY: the callbacks have the signatures CUPTI calls them with.
        check("cuptiActivityRegisterCallbacks", unsafe {
            (self.register_callbacks)(req, done)
        })
    }

    pub fn enable(&self, kind: u32) -> Result<(), CuptiError> {
        // SAFETY: plain integer argument.
        check("cuptiActivityEnable", unsafe { (self.enable)(kind) })
    }

    pub fn disable(&self, kind: u32) -> Result<(), CuptiError> {
        // SAFETY: plain integer argument.
        check("cuptiActivityDisable", unsafe { (self.disable)(kind) })
    }

    /// `cuptiActivityFlushAll(flag)`.
    pub fn flush_all(&self, flag: u32) -> Result<(), CuptiError> {
        // SAFETY: plain integer argument.
        check("cuptiActivityFlushAll", unsafe { (self.flush_all)(flag) })
    }

    /// The next record after `cur` (null for the first) in `buffer[..valid]`; `Ok(None)` at the
    /// end. An error means the rest of the buffer cannot be walked.
    ///
    /// # Safety
    /// `buffer` must be a completed CUPTI activity buffer with `valid` valid bytes.
    pub unsafe fn next_record(
        &self,
        buffer: *mut u8,
        valid: usize,
        cur: *mut u8,
    ) -> Result<Option<*mut u8>, CuptiError> {
        let mut rec = cur;
        // SAFETY: the caller vouches for the buffer; `rec` is our local.
        let r = unsafe { (self.get_next_record)(buffer, valid, &mut rec) };
        match r {
            0 => Ok(Some(rec)),
            crate::error::CUPTI_ERROR_MAX_LIMIT_REACHED => Ok(None),
            code => Err(CuptiError::Call {
                call: "cuptiActivityGetNextRecord",
                code,
            }),
        }
    }

    /// Records CUPTI dropped for (context, stream); `None` when the symbol is absent.
    ///
    /// # Safety
    /// `context` must be a context CUPTI passed to the buffer-complete callback (or null).
    pub unsafe fn dropped_records(&self, context: *mut c_void, stream: u32) -> Option<u64> {
        let f = self.get_dropped?;
        let mut n = 0usize;
        // SAFETY: the caller vouches for the context; `n` is our local.
        (unsafe { f(context, stream, &mut n) } == 0).then_some(n as u64)
    }

    /// Sets an activity attribute to `value` (its size is the attribute's value size).
    pub fn set_attribute<T: Copy>(&self, attr: u32, value: T) -> Result<(), CuptiError> {
        let f = self.set_attribute.ok_or(CuptiError::MissingSymbol {
            path: self.path.clone(),
            symbol: "cuptiActivitySetAttribute",
        })?;
        let mut v = value;
        let mut size = std::mem::size_of::<T>();
        // SAFETY: `v` is a live value of `size` bytes, as the attribute call expects.
        check("cuptiActivitySetAttribute", unsafe {
            f(attr, &mut size, &mut v as *mut T as *mut c_void)
        })
    }

    pub fn timestamp(&self) -> Option<u64> {
        let f = self.get_timestamp?;
        let mut t = 0u64;
        // SAFETY: an out-pointer to our local.
        (unsafe { f(&mut t) } == 0).then_some(t)
    }

    /// `cuptiSubscribe` with a callback that enables no domain: it claims CUPTI for this
    /// process so a second tool is told, and tells us when one was here first. `Ok(None)` when
    /// this CUPTI has no `cuptiSubscribe` (no CUPTI 13 lacks it): nothing was claimed.
    pub fn subscribe(&self, cb: CallbackFn) -> Result<Option<Subscription>, CuptiError> {
        let Some(f) = self.subscribe else {
            return Ok(None);
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer to our local; the callback has CUPTI's callback signature.
        check("cuptiSubscribe", unsafe {
            f(&mut handle, cb, std::ptr::null_mut())
        })?;
        Ok(Some(Subscription {
            handle,
            unsubscribe: self.unsubscribe,
            path: self.path.clone(),
            _lib: Arc::clone(&self.lib),
        }))
    }

    /// The API function name of a callback id (`cudaLaunchKernel_v7000`).
    pub fn callback_name(&self, domain: u32, cbid: u32) -> Option<String> {
        let f = self.get_callback_name?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: an out-pointer to our local.
        if unsafe { f(domain, cbid, &mut p) } != 0 || p.is_null() {
            return None;
        }
        // SAFETY: CUPTI returns a NUL-terminated static string.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Every callback id of `domain` that has a name, with the name, walking ids from 1 until
    /// [`UNNAMED_IDS_THAT_END_A_WALK`] in a row have none (or [`MAX_CALLBACK_ID`]). Empty
    /// without `cuptiGetCallbackName`.
    pub fn callback_names(&self, domain: u32) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        if self.get_callback_name.is_none() {
            return out;
        }
        let mut misses = 0;
        for cbid in 1..=MAX_CALLBACK_ID {
            match self.callback_name(domain, cbid) {
                Some(n) if !n.is_empty() => {
                    out.push((cbid, n));
                    misses = 0;
                }
                _ => {
                    misses += 1;
                    if misses >= UNNAMED_IDS_THAT_END_A_WALK {
                        break;
                    }
                }
            }
        }
        out
    }

    /// `cuptiEnableCallback`: turns one callback id of `domain` on or off for `sub`.
    pub fn enable_callback(
        &self,
        sub: &Subscription,
        domain: u32,
        cbid: u32,
        on: bool,
    ) -> Result<(), CuptiError> {
        let f = self.enable_callback.ok_or(CuptiError::MissingSymbol {
            path: self.path.clone(),
            symbol: "cuptiEnableCallback",
        })?;
        // SAFETY: the live subscriber handle `sub` holds; the rest are integers.
        check("cuptiEnableCallback", unsafe {
            f(u32::from(on), sub.handle, domain, cbid)
        })
    }

    /// `cuptiGetDeviceId`: the device ordinal of a context.
    ///
    /// # Safety
    /// `ctx` must be a live CUDA context (one CUPTI passed to a callback).
    pub unsafe fn device_of(&self, ctx: *mut c_void) -> Result<u32, CuptiError> {
        let f = self.get_device_id.ok_or(CuptiError::MissingSymbol {
            path: self.path.clone(),
            symbol: "cuptiGetDeviceId",
        })?;
        let mut id = 0u32;
        // SAFETY: the caller vouches for the context; `id` is our local.
        check("cuptiGetDeviceId", unsafe { f(ctx, &mut id) })?;
        Ok(id)
    }

    /// This CUPTI can name callback ids and enable RUNTIME (or DRIVER) records per id.
    pub fn has_api_record_filter(&self, driver: bool) -> bool {
        let per_id = if driver {
            self.enable_driver_api.is_some()
        } else {
            self.enable_runtime_api.is_some()
        };
        per_id && self.get_callback_name.is_some()
    }

    /// Per-callback-id enabling of RUNTIME (or DRIVER) records, when this CUPTI has it.
    pub fn enable_api_record(&self, driver: bool, cbid: u32, on: bool) -> Result<(), CuptiError> {
        let (f, name) = if driver {
            (self.enable_driver_api, "cuptiActivityEnableDriverApi")
        } else {
            (self.enable_runtime_api, "cuptiActivityEnableRuntimeApi")
        };
        let f = f.ok_or(CuptiError::MissingSymbol {
            path: self.path.clone(),
            symbol: name,
        })?;
        // SAFETY: plain integer arguments.
        check(name, unsafe { f(cbid, u8::from(on)) })
    }
}

/// A `cuptiSubscribe` subscriber: this process's CUPTI subscriber slot (one per process before
/// CUDA 13.3). Dropping it keeps the subscription for the life of the process; [`release`] gives
/// the slot back. It keeps its libcupti loaded, so it may outlive the [`Cupti`] it came from.
///
/// [`release`]: Subscription::release
pub struct Subscription {
    handle: *mut c_void,
    unsubscribe: Option<Unsubscribe>,
    path: String,
    _lib: Arc<libloading::Library>,
}

impl Subscription {
    /// `cuptiUnsubscribe`: frees the slot for another tool. An error (or a CUPTI without
    /// `cuptiUnsubscribe`) means the slot is still taken.
    pub fn release(self) -> Result<(), CuptiError> {
        let f = self.unsubscribe.ok_or(CuptiError::MissingSymbol {
            path: self.path.clone(),
            symbol: "cuptiUnsubscribe",
        })?;
        // SAFETY: the handle cuptiSubscribe returned, released once (release takes self); the
        // library is kept loaded by `_lib`.
        check("cuptiUnsubscribe", unsafe { f(self.handle) })
    }
}

/// `cuDriverGetVersion` from the already loaded libcuda (`None` when unavailable).
pub fn driver_version() -> Option<u32> {
    type DriverGetVersion = unsafe extern "C" fn(*mut i32) -> i32;
    let flags = libc::RTLD_NOW | libc::RTLD_NOLOAD;
    // SAFETY: libcuda is already loaded in a CUDA process (RTLD_NOLOAD); else load it plainly.
    let lib = unsafe { libloading::os::unix::Library::open(Some("libcuda.so.1"), flags) }
        // SAFETY: loading libcuda runs its initializers, as any CUDA program does.
        .or_else(|_| unsafe { libloading::os::unix::Library::new("libcuda.so.1") })
        .ok()?;
    // SAFETY: the signature cuda.h declares for cuDriverGetVersion.
    let f: DriverGetVersion = unsafe { lib.get::<DriverGetVersion>(b"cuDriverGetVersion\0") }
        .ok()
        .map(|s| *s)?;
    let mut v = 0i32;
    // SAFETY: an out-pointer to our local.
    let r = unsafe { f(&mut v) };
    // Keep libcuda mapped: it is the program's own.
    std::mem::forget(lib);
    (r == 0 && v > 0).then_some(v as u32)
}
