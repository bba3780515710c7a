//! The few CUDA driver calls a profiling session needs (cuda.h), from libcuda loaded at run
//! time: a missing library or symbol is an error value, never a panic.

use std::ffi::{c_char, c_int, CStr};

use crate::sys::{CUcontext, CUdevice, CUresult};

/// `CUDA_ERROR_STUB_LIBRARY`: the toolkit's stub libcuda, not a driver.
pub const CUDA_ERROR_STUB_LIBRARY: CUresult = 34;

/// Sonames tried in order.
pub const LIBCUDA_NAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// Errors from loading libcuda.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("libcuda not found: {0}")]
    NotFound(String),
    #[error("symbol {symbol} missing: {reason}")]
    MissingSymbol {
        symbol: &'static str,
        reason: String,
    },
}

/// A CUDA context this process holds (from [`CudaDriver::primary_ctx_retain`]).
#[derive(Debug, Clone, Copy)]
pub struct Context(CUcontext);

impl Context {
    /// A context CUPTI handed to a callback (`CUpti_ResourceData::context`,
    /// `CUpti_CallbackData::context`): the injection profiles contexts it did not create.
    pub fn from_raw(ctx: CUcontext) -> Context {
        Context(ctx)
    }

    /// The driver handle, for CUPTI parameter structs.
    pub fn as_raw(self) -> CUcontext {
        self.0
    }
}

/// A loaded libcuda.
pub struct CudaDriver {
    _lib: libloading::Library,
    /// The name it was loaded by.
    pub name: String,
    init: unsafe extern "C" fn(u32) -> CUresult,
    driver_get_version: unsafe extern "C" fn(*mut c_int) -> CUresult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CUresult,
    device_get: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    primary_ctx_release: unsafe extern "C" fn(CUdevice) -> CUresult,
    ctx_push_current: unsafe extern "C" fn(CUcontext) -> CUresult,
    ctx_pop_current: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    get_error_name: Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
}

impl CudaDriver {
    /// Opens the first of [`LIBCUDA_NAMES`] that loads.
    pub fn load() -> Result<CudaDriver, DriverError> {
        let mut errors = Vec::new();
        for n in LIBCUDA_NAMES {
            // SAFETY: loading NVIDIA's driver library runs its initializers, as any CUDA
            // program does; no Rust invariant depends on them.
            match unsafe { libloading::Library::new(n) } {
                Ok(lib) => return Self::resolve(lib, n),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(DriverError::NotFound(errors.join("; ")))
    }

    fn resolve(lib: libloading::Library, name: &str) -> Result<CudaDriver, DriverError> {
        macro_rules! req {
            ($name:literal) => {
                // SAFETY: the field's type is the signature cuda.h declares for this name.
                match unsafe { lib.get(concat!($name, "\0").as_bytes()) } {
                    Ok(s) => *s,
                    Err(e) => {
                        return Err(DriverError::MissingSymbol {
                            symbol: $name,
                            reason: e.to_string(),
                        })
                    }
                }
            };
        }
        Ok(CudaDriver {
            init: req!("cuInit"),
            driver_get_version: req!("cuDriverGetVersion"),
            device_get_count: req!("cuDeviceGetCount"),
            device_get: req!("cuDeviceGet"),
            device_get_name: req!("cuDeviceGetName"),
            primary_ctx_retain: req!("cuDevicePrimaryCtxRetain"),
            primary_ctx_release: req!("cuDevicePrimaryCtxRelease_v2"),
            ctx_push_current: req!("cuCtxPushCurrent_v2"),
            ctx_pop_current: req!("cuCtxPopCurrent_v2"),
            // SAFETY: as above; absent on very old drivers.
            get_error_name: unsafe { lib.get(b"cuGetErrorName\0") }.ok().map(|s| *s),
            name: name.to_string(),
            _lib: lib,
        })
    }

    /// `cuInit(flags)`.
    pub fn init(&self, flags: u32) -> CUresult {
        // SAFETY: a plain integer argument.
        unsafe { (self.init)(flags) }
    }

    /// `cuDriverGetVersion` (13000 for CUDA 13.0).
    pub fn driver_version(&self) -> Result<c_int, CUresult> {
        let mut v = 0;
        // SAFETY: an out-pointer to our local.
        match unsafe { (self.driver_get_version)(&mut v) } {
            0 => Ok(v),
            r => Err(r),
        }
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<c_int, CUresult> {
        let mut n = 0;
        // SAFETY: an out-pointer to our local.
        match unsafe { (self.device_get_count)(&mut n) } {
            0 => Ok(n),
            r => Err(r),
        }
    }

    /// `cuDeviceGet` then `cuDeviceGetName`; `None` when either fails.
    pub fn device(&self, ordinal: c_int) -> (CUdevice, Option<String>) {
        let mut dev: CUdevice = 0;
        let mut buf = [0 as c_char; 256];
        // SAFETY: out-pointers to our locals; the name call is told one byte less than the
        // buffer, so the result stays NUL-terminated.
        let name = unsafe {
            if (self.device_get)(&mut dev, ordinal) == 0
                && (self.device_get_name)(buf.as_mut_ptr(), 255, dev) == 0
            {
                Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
            } else {
                None
            }
        };
        (dev, name)
    }

    /// `cuDevicePrimaryCtxRetain`.
    pub fn primary_ctx_retain(&self, dev: CUdevice) -> Result<Context, CUresult> {
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer to our local.
        match unsafe { (self.primary_ctx_retain)(&mut ctx, dev) } {
            0 => Ok(Context(ctx)),
            r => Err(r),
        }
    }

    /// `cuDevicePrimaryCtxRelease_v2`.
    pub fn primary_ctx_release(&self, dev: CUdevice) -> CUresult {
        // SAFETY: a plain device ordinal; the driver checks it.
        unsafe { (self.primary_ctx_release)(dev) }
    }

    /// `cuCtxPushCurrent_v2`.
    pub fn ctx_push_current(&self, ctx: Context) -> CUresult {
        // SAFETY: a context the driver handed out (only `primary_ctx_retain` makes one).
        unsafe { (self.ctx_push_current)(ctx.0) }
    }

    /// `cuCtxPopCurrent_v2`.
    pub fn ctx_pop_current(&self) -> CUresult {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer to our local.
        unsafe { (self.ctx_pop_current)(&mut popped) }
    }

    /// `cuGetErrorName`, or `CUresult <n>` when it cannot say.
    pub fn error_name(&self, r: CUresult) -> String {
        let mut p: *const c_char = std::ptr::null();
        if let Some(f) = self.get_error_name {
            // SAFETY: an out-pointer to our local; the driver writes a static string.
            if unsafe { f(r, &mut p) } == 0 && !p.is_null() {
                // SAFETY: NUL-terminated static string from the driver.
                return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
            }
        }
        format!("CUresult {r}")
    }
}
