//! A switch for overhead benchmarks, off unless `CUTRACE_BENCH_HOOK=1`: a program traced by
//! `cutrace record` may call `cutrace_bench_set(kinds, api)` (found with
//! `dlsym(RTLD_DEFAULT, ...)`; the injection library is preloaded) between timed batches to change
//! which activity kinds and API records CUPTI collects, so that one process can alternate
//! configurations batch by batch. Comparing configurations inside one process removes the
//! process-to-process spread that drowns few-percent effects when each configuration is its own
//! process (BENCHMARKS.md, "Record overhead").
//!
//! The trace of such a process is for timing only: its header names the kinds asked for at the
//! start, not the ones switched to later (a note records each switch). Call it only when no work
//! is in flight (after `cudaDeviceSynchronize`): records of work that straddles a switch may be
//! lost. It refuses once another tool has taken CUPTI's buffer callbacks.

use std::ffi::{c_char, c_int, CStr};
use std::panic::catch_unwind;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use crate::api_filter::ApiMode;
use crate::config::parse_kinds;
use crate::{add_note, enable_kinds, CALLBACKS_TAKEN, GLOBAL, TRACING};

/// Switched.
pub const OK: c_int = 0;
/// `CUTRACE_BENCH_HOOK` is not `1`: nothing was changed.
pub const NOT_ENABLED: c_int = -1;
/// cutrace is not tracing this process (CUPTI missing or refused, or another tool took over).
pub const NOT_TRACING: c_int = -2;
/// A kind or API mode cutrace does not know; nothing was changed.
pub const BAD_REQUEST: c_int = -3;
/// CUPTI refused to enable a kind: every record is off now.
pub const CUPTI_FAILED: c_int = -4;
/// A panic inside cutrace, caught at the boundary.
pub const INTERNAL: c_int = -5;

/// What is on now, when a switch has happened: (kinds on whole, API callback ids on).
type State = (Vec<u32>, Vec<(bool, u32)>);
static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The request as cutrace understands it: activity kinds (cutrace's names, comma-separated; ""
/// turns every record off) and an API mode (`all`, `lean`, `launches`; absent means `all`).
pub fn parse_request(kinds: &str, api: Option<&str>) -> Result<(Vec<u32>, ApiMode), String> {
    let (kinds, unknown) = parse_kinds(kinds, false);
    if !unknown.is_empty() {
        return Err(format!("unknown activity kinds: {}", unknown.join(", ")));
    }
    let mode = match api {
        None => ApiMode::All,
        Some(s) => ApiMode::parse(s).ok_or_else(|| format!("unknown API mode '{s}'"))?,
    };
    Ok((kinds, mode))
}

fn enabled_by_env() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CUTRACE_BENCH_HOOK").as_deref() == Ok("1"))
}

/// # Safety
/// `kinds` must be a NUL-terminated string; `api` NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn cutrace_bench_set(kinds: *const c_char, api: *const c_char) -> c_int {
    if !enabled_by_env() {
        return NOT_ENABLED;
    }
    if kinds.is_null() {
        return BAD_REQUEST;
    }
    let kinds = unsafe { CStr::from_ptr(kinds) }
        .to_string_lossy()
        .into_owned();
    let api = (!api.is_null()).then(|| {
        unsafe { CStr::from_ptr(api) }
            .to_string_lossy()
            .into_owned()
    });
    catch_unwind(move || switch(&kinds, api.as_deref())).unwrap_or(INTERNAL)
}

fn switch(kinds_text: &str, api: Option<&str>) -> c_int {
    let Ok((kinds, mode)) = parse_request(kinds_text, api) else {
        return BAD_REQUEST;
    };
    let Some(g) = GLOBAL.get() else {
        return NOT_TRACING;
    };
    if !TRACING.load(Ordering::SeqCst) || CALLBACKS_TAKEN.load(Ordering::SeqCst) {
        return NOT_TRACING;
    }
    let Ok(mut state) = STATE.lock() else {
        return INTERNAL;
    };
    let (whole, by_id) = state.take().unwrap_or_else(|| {
        let whole = g
            .enabled_kinds
            .iter()
            .copied()
            .filter(|&k| k != cutrace_cupti::activity::kind::DEVICE)
            .collect();
        (whole, g.enabled_api_records.clone())
    });
    for &(driver, cbid) in &by_id {
        let _ = g.cupti.enable_api_record(driver, cbid, false);
    }
    for &k in &whole {
        let _ = g.cupti.disable(k);
    }
    let mut notes = Vec::new();
    let r = enable_kinds(&g.cupti, &kinds, mode, None, &mut notes);
    add_note(format!(
        "bench hook: records switched to kinds '{kinds_text}', api {}",
        mode.name()
    ));
    match r {
        Ok(on) => {
            *state = Some((on.whole, on.by_id));
            OK
        }
        Err(e) => {
            add_note(format!("bench hook: {e}"));
            *state = Some((Vec::new(), Vec::new()));
            CUPTI_FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_cupti::activity::kind;

    #[test]
    fn requests_are_parsed_or_refused_whole() {
        let (k, m) = parse_request("kernel,runtime", Some("lean")).unwrap();
        assert_eq!(k, vec![kind::CONCURRENT_KERNEL, kind::RUNTIME]);
        assert_eq!(m, ApiMode::Lean);
        assert_eq!(parse_request("", None).unwrap(), (vec![], ApiMode::All));
        let e = parse_request("kernel,bogus", None).unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        assert!(parse_request("kernel", Some("few"))
            .unwrap_err()
            .contains("few"));
    }

    #[test]
    fn without_the_environment_switch_nothing_happens() {
        // The test binary never sets CUTRACE_BENCH_HOOK.
        let r = unsafe { cutrace_bench_set(c"kernel".as_ptr(), std::ptr::null()) };
        assert_eq!(r, NOT_ENABLED);
    }
}
