//! CUPTI entry points this library exports so that another CUPTI tool started inside the traced
//! program (torch.profiler's Kineto, Nsight, a CUPTI library) is told, in one line, why it gets
//! nothing while cutrace holds CUPTI.
//!
//! `cutrace record` preloads this library (`LD_PRELOAD`). Preloaded objects are in the global
//! lookup scope, which the dynamic loader searches before a library's own dependencies, so a
//! CUPTI user's `cuptiSubscribe` binds here even when it was dlopen'ed `RTLD_LOCAL` with libcupti
//! in its local scope (as Python loads torch). Each function forwards to the real one and
//! returns its result unchanged: the program behaves as it would without cutrace, with at most
//! one added line on stderr and a note in the trace.
//!
//! cutrace's own CUPTI calls never come here: they go through pointers that libloading resolved
//! with `dlsym` on libcupti's own handle, which searches that library and its dependencies, not
//! the preloads.
//!
//! Nothing here runs at load time (no constructor, no initialised state): a process that never
//! calls CUPTI (a shell, a compiler) pays only for mapping the library and the one environment
//! lookup of `root_exit.rs`, and prints nothing.

use std::ffi::{c_int, c_void, CStr, CString};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cutrace_cupti::error::{
    CuptiResult, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, CUPTI_ERROR_NOT_INITIALIZED,
};
use cutrace_cupti::locate::KNOWN_SONAMES;

type SubscribeFn = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *mut c_void) -> CuptiResult;
type RegisterCallbacksFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> CuptiResult;

/// The real functions, once found (0 = not yet).
static REAL_SUBSCRIBE: AtomicUsize = AtomicUsize::new(0);
static REAL_REGISTER: AtomicUsize = AtomicUsize::new(0);
/// Each conflict is reported once per process.
static SUBSCRIBE_REPORTED: AtomicBool = AtomicBool::new(false);
static REGISTER_REPORTED: AtomicBool = AtomicBool::new(false);
/// cutrace is handing CUPTI's buffers over to another tool's callbacks, or has.
static HANDING_OVER: AtomicBool = AtomicBool::new(false);

/// `cuptiSubscribe`, forwarded. When it fails because cutrace holds the one subscriber slot
/// that CUPTI before 13.3 allows, says so once.
///
/// # Safety
/// The caller's arguments go to libcupti unchanged; the caller owes libcupti's contract.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    callback: *mut c_void,
    userdata: *mut c_void,
) -> CuptiResult {
    let real = real_function(
        c"cuptiSubscribe",
        cuptiSubscribe as *const () as usize,
        &REAL_SUBSCRIBE,
    );
    if real == 0 {
        // Cannot normally happen: whoever calls cuptiSubscribe linked or loaded libcupti, so it
        // is mapped and found above. A caller that looked the name up in the global scope
        // without loading libcupti is told CUPTI is not there.
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    // SAFETY: `real` is libcupti's cuptiSubscribe (never this function), which has this type.
    let f: SubscribeFn = unsafe { std::mem::transmute::<usize, SubscribeFn>(real) };
    // SAFETY: the caller's own arguments, passed on unchanged to the real function.
    let result = unsafe { f(subscriber, callback, userdata) };
    let _ = catch_unwind(|| after_subscribe(result));
    result
}

/// `cuptiActivityRegisterCallbacks`, forwarded. When another tool replaces cutrace's buffer
/// callbacks while cutrace traces, cutrace first turns off the records it enabled and has CUPTI
/// deliver what it holds for cutrace (so the trace keeps everything up to that point and the
/// tool gets no record it did not ask for), then forwards, and says once that cutrace's trace
/// ends there. The tool is not blocked: it keeps working as it would without cutrace.
///
/// # Safety
/// The caller's arguments go to libcupti unchanged; the caller owes libcupti's contract.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    requested: *mut c_void,
    completed: *mut c_void,
) -> CuptiResult {
    let real = real_function(
        c"cuptiActivityRegisterCallbacks",
        cuptiActivityRegisterCallbacks as *const () as usize,
        &REAL_REGISTER,
    );
    if real == 0 {
        // As in cuptiSubscribe: the caller linked libcupti, so this does not normally happen.
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    // SAFETY: `real` is libcupti's function of this type, never this one.
    let f: RegisterCallbacksFn = unsafe { std::mem::transmute::<usize, RegisterCallbacksFn>(real) };
    let handed = catch_unwind(|| before_register(requested as usize)).unwrap_or(false);
    // SAFETY: the caller's own callbacks, passed on unchanged to the real function.
    let result = unsafe { f(requested, completed) };
    let _ = catch_unwind(|| after_register(result, handed));
    result
}

fn after_subscribe(result: CuptiResult) {
    if result != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
        || !crate::LIFECYCLE.subscribed()
        || SUBSCRIBE_REPORTED.swap(true, Ordering::SeqCst)
    {
        return;
    }
    if crate::LIFECYCLE.is_forked() {
        // A child forked (without exec) from a traced process: the slot is held by the copy of
        // cutrace's subscription it inherited; cutrace records nothing here.
        say(
            "another CUPTI tool tried to start in a process forked from a traced one and got \
             CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUPTI's one subscriber slot is still \
             held by cutrace's copy from the parent (cutrace records nothing in this child). \
             Fix: start children with exec (multiprocessing's 'spawn'), which gives each its own \
             CUPTI, or run without `cutrace record`",
        );
        return;
    }
    let (when, ours) = if crate::is_tracing() {
        ("is tracing", " and cutrace's trace is unaffected")
    } else {
        (
            "holds CUPTI",
            "; cutrace is not tracing either (see its earlier message)",
        )
    };
    say(&format!(
        "another CUPTI tool in this program (torch.profiler, Nsight, or a CUPTI library) tried \
         to start while cutrace {when} and got CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: \
         before CUDA 13.3 with driver r610 only one CUPTI subscriber is allowed per process, so \
         that tool gets no CUDA activity (torch.profiler: no GPU events; Kineto then warns 'CUPTI \
         initialization failed'){ours}. Fix: to use that tool, run the program without \
         `cutrace record`"
    ));
    crate::add_note(
        "another CUPTI tool in the program (torch.profiler, Nsight, a CUPTI library) tried to \
         subscribe and got CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: it recorded no CUDA \
         activity; this trace is unaffected"
            .into(),
    );
}

/// Whether this registration takes CUPTI's buffers from cutrace; if so, cutrace's records are
/// turned off and flushed to cutrace first (`hand_over_buffers`).
fn before_register(requested: usize) -> bool {
    if !crate::is_tracing()
        || crate::is_our_buffer_callback(requested)
        || HANDING_OVER.swap(true, Ordering::SeqCst)
    {
        return false;
    }
    crate::hand_over_buffers();
    true
}

fn after_register(result: CuptiResult, handed: bool) {
    if !handed {
        return;
    }
    if result != 0 {
        // CUPTI kept cutrace's callbacks: cutrace records on, and a later registration is
        // handled afresh.
        crate::take_buffers_back();
        HANDING_OVER.store(false, Ordering::SeqCst);
        return;
    }
    crate::LIFECYCLE.set_callbacks_taken();
    if REGISTER_REPORTED.swap(true, Ordering::SeqCst) {
        return;
    }
    let at = crate::cupti_timestamp()
        .map(|t| format!(" at CUPTI time {t} ns"))
        .unwrap_or_default();
    say(
        "another CUPTI tool in this program registered its own activity buffer callbacks \
         (cuptiActivityRegisterCallbacks) while cutrace is tracing: CUPTI now hands activity \
         records to that tool, so cutrace's trace ends here (cutrace flushed what it had recorded \
         so far into its trace and turned its own activity records off first, so that tool gets \
         only the records it asks for). Fix: trace with one tool at a time: run the program without that tool, or without \
         `cutrace record`",
    );
    crate::add_note(format!(
        "another CUPTI tool in the program replaced cutrace's activity buffer callbacks{at}; \
         cutrace flushed the records CUPTI held for it and turned its activity records off just \
         before, so activity after that point is missing from this trace"
    ));
}

/// One line on stderr, written at once so it does not interleave with the program's output.
fn say(msg: &str) {
    let line = format!("cutrace: pid {}: {msg}\n", std::process::id());
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The real `name`, cached; 0 when no libcupti in the process has it.
fn real_function(name: &CStr, ours: usize, cache: &AtomicUsize) -> usize {
    let cached = cache.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let found = catch_unwind(AssertUnwindSafe(|| find_real(name, ours))).unwrap_or(0);
    if found != 0 {
        cache.store(found, Ordering::Release);
    }
    found
}

fn find_real(name: &CStr, ours: usize) -> usize {
    // The next definition after this library in the global scope: libcupti when the program,
    // or a library it loaded RTLD_GLOBAL, linked it.
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if usable(next, ours) {
        return next as usize;
    }
    // A libcupti in some library's local scope (torch's, loaded RTLD_LOCAL): by its soname, then
    // any libcupti the loader has mapped, then the copy cutrace itself loaded. If several
    // copies are loaded the first found wins; a process with two CUPTIs is broken anyway.
    let mut files: Vec<CString> = KNOWN_SONAMES
        .iter()
        .filter_map(|s| CString::new(*s).ok())
        .collect();
    files.extend(loaded_cupti_objects());
    if let Some(p) = crate::cupti_path().and_then(|p| CString::new(p).ok()) {
        files.push(p);
    }
    for file in &files {
        let p = sym_in_loaded(file, name);
        if usable(p, ours) {
            return p as usize;
        }
    }
    0
}

fn usable(p: *mut c_void, ours: usize) -> bool {
    !p.is_null() && p as usize != ours
}

/// `name` in an already loaded library `file`; loads nothing.
fn sym_in_loaded(file: &CStr, name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NOLOAD returns a loaded object or null; dlsym on a valid handle.
    unsafe {
        let h = libc::dlopen(file.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if h.is_null() {
            return std::ptr::null_mut();
        }
        let p = libc::dlsym(h, name.as_ptr());
        // On a hit the reference is kept: it keeps that libcupti mapped for as long as the
        // cached pointer may be called.
        if p.is_null() {
            libc::dlclose(h);
        }
        p
    }
}

/// Paths of every loaded object whose file name starts with `libcupti.so`.
fn loaded_cupti_objects() -> Vec<CString> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info; data is the Vec below.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<CString>)) };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: non-null; the loader's object names are NUL-terminated.
        let path = unsafe { CStr::from_ptr(info.dlpi_name) };
        let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or(&[]);
        if file.starts_with(b"libcupti.so") {
            out.push(path.to_owned());
        }
        0
    }
    let mut out: Vec<CString> = Vec::new();
    // SAFETY: the callback only reads the info it is given and pushes to `out`. dlopen is not
    // called inside it (the loader's lock is held there).
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut Vec<CString> as *mut c_void) };
    out
}
