//! A switch for overhead benchmarks, off unless `CUTRACE_BENCH_HOOK=1`: a program traced by
//! `cutrace record` may call `cutrace_bench_set(kinds, api)` (found with
//! `dlsym(RTLD_DEFAULT, ...)`; the injection library is preloaded) between timed batches to change
//! which activity kinds and API records CUPTI collects, so that one process can alternate
//! configurations batch by batch. Comparing configurations inside one process removes the
//! process-to-process spread that drowns few-percent effects when each configuration is its own
//! process (BENCHMARKS.md, "Record overhead").
//!
//! The trace of such a process is for timing only: its header names the kinds asked for at the
//! start, not the ones switched to later (a note names each configuration switched to, once).
//! Call it only when no work is in flight (after `cudaDeviceSynchronize`): records of work that
//! straddles a switch may be lost. Before switching, it has CUPTI hand over what it holds
//! (`FLUSH_FORCED`) and waits (up to 2 s) for the writer to take it, so that the previous
//! configuration's records are not decoded while the next one is timed. It refuses once another
//! tool has taken CUPTI's buffer callbacks.
//!
//! `lean` and `launches` are applied here as a deny-list: the RUNTIME/DRIVER kind on whole, then
//! `cuptiActivityEnable{Runtime,Driver}Api(cbid, 0)` for each id the mode leaves out (and back on
//! at the next switch). `cutrace record --api` uses an allow-list instead (ids on one by one, the
//! kind never on whole), but that cannot be switched to: on the H200 (CUDA 13.0) a process that
//! had the kind on whole, turned it off and then enabled ids one by one got no API records at all
//! (gpu/results/run15: 0 of 3,000 launches kept their call, in every order tried), while turning
//! the kind back on whole afterwards worked. gpu/bench_ab.py checks on a short run, phase by
//! phase, that every launch keeps its API record and that the left-out calls are gone, before it
//! times anything.

use std::ffi::{c_char, c_int, CStr};
use std::panic::catch_unwind;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cutrace_cupti::activity::kind;
use cutrace_cupti::api;

use crate::api_filter::{self, ApiMode};
use crate::config::parse_kinds;
use crate::{add_note, enable_kinds, is_tracing, GLOBAL, LIFECYCLE};

/// Switched.
pub const OK: c_int = 0;
/// Switched, but not exactly as asked: CUPTI refused a kind, or could not filter API records by
/// callback id and records them all (the trace's notes say which).
pub const APPROXIMATE: c_int = 1;
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

/// What is on now, once a switch has happened, and the configurations already noted.
struct State {
    whole: Vec<u32>,
    /// Ids on one by one (the allow-list a process started with `--api lean` has).
    by_id: Vec<(bool, u32)>,
    /// Ids turned off while their kind is on whole (this hook's deny-list).
    denied: Vec<(bool, u32)>,
    noted: Vec<String>,
}
static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The request as cutrace understands it: activity kinds (cutrace's names, comma-separated; ""
/// turns every record off) and an API mode (`all`, `lean`, `launches`; absent means `all`).
pub fn parse_request(kinds: &str, api: Option<&str>) -> Result<(Vec<u32>, ApiMode), String> {
    let (kinds, unknown) = parse_kinds(kinds.split(','), false);
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
    *ON.get_or_init(|| {
        cutrace_settings::Settings::from_process_env()
            .0
            .knobs
            .bench_hook
    })
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
    // SAFETY: non-null, and the caller vouches for NUL termination.
    let kinds = unsafe { CStr::from_ptr(kinds) }
        .to_string_lossy()
        .into_owned();
    let api = (!api.is_null()).then(|| {
        // SAFETY: non-null here, and the caller vouches for NUL termination.
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
    if !is_tracing() || LIFECYCLE.callbacks_taken() {
        return NOT_TRACING;
    }
    let Ok(mut state) = STATE.lock() else {
        return INTERNAL;
    };
    let st = state.get_or_insert_with(|| State {
        whole: g
            .enabled_kinds
            .iter()
            .copied()
            .filter(|&k| k != cutrace_cupti::activity::kind::DEVICE)
            .collect(),
        by_id: g.enabled_api_records.clone(),
        denied: Vec::new(),
        noted: Vec::new(),
    });
    // The previous configuration's records go to the writer now, not during the next batch.
    let _ = g.cupti.flush_all(api::FLUSH_FORCED);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2)
        && g.queue.lock().map(|q| !q.is_empty()).unwrap_or(false)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    for &(driver, cbid) in &st.denied {
        let _ = g.cupti.enable_api_record(driver, cbid, true);
    }
    st.denied.clear();
    for &(driver, cbid) in &st.by_id {
        let _ = g.cupti.enable_api_record(driver, cbid, false);
    }
    for &k in &st.whole {
        let _ = g.cupti.disable(k);
    }
    let mut notes = Vec::new();
    let r = enable_kinds(&g.cupti, &kinds, ApiMode::All, None, &mut notes);
    let mut denied_exactly = true;
    if let (Ok(on), true) = (&r, mode != ApiMode::All) {
        for (driver, k, domain) in [
            (false, kind::RUNTIME, api::CB_DOMAIN_RUNTIME_API),
            (true, kind::DRIVER, api::CB_DOMAIN_DRIVER_API),
        ] {
            if on.whole.contains(&k) {
                denied_exactly &= deny(g, driver, domain, mode, &mut st.denied, &mut notes);
            }
        }
    }
    let label = format!("kinds '{kinds_text}', api {}", mode.as_str());
    // Each configuration's notes once; again whenever this switch was not exact (a refusal
    // that came later must not go unrecorded).
    let exact_so_far = denied_exactly && r.as_ref().is_ok_and(|on| on.kinds.len() == kinds.len());
    let first = !st.noted.contains(&label);
    if first || !exact_so_far {
        if first {
            st.noted.push(label.clone());
        }
        add_note(format!("bench hook: records switched to {label}"));
        for n in &notes {
            add_note(format!("bench hook ({label}): {n}"));
        }
    }
    match r {
        Ok(on) => {
            let exact = denied_exactly && on.kinds.len() == kinds.len();
            st.whole = on.whole;
            st.by_id = on.by_id;
            if exact {
                OK
            } else {
                APPROXIMATE
            }
        }
        Err(e) => {
            add_note(format!("bench hook: {e}"));
            st.whole.clear();
            st.by_id.clear();
            st.denied.clear();
            CUPTI_FAILED
        }
    }
}

/// Turns off the records of the `domain` ids `mode` leaves out, its kind being on whole; adds
/// them to `denied`. `false` (with a note) when not every one could be turned off.
fn deny(
    g: &crate::Global,
    driver: bool,
    domain: u32,
    mode: ApiMode,
    denied: &mut Vec<(bool, u32)>,
    notes: &mut Vec<String>,
) -> bool {
    let what = if driver { "driver" } else { "runtime" };
    if !g.cupti.has_api_record_filter(driver) {
        notes.push(format!(
            "api {}: this libcupti cannot turn {what} records off by callback id: all recorded",
            mode.as_str()
        ));
        return false;
    }
    let names = g.cupti.callback_names(domain);
    if names.is_empty() {
        notes.push(format!(
            "api {}: cuptiGetCallbackName named no {what} callback id: all recorded",
            mode.as_str()
        ));
        return false;
    }
    let (kept, outcome) = api_filter::split(mode, &names);
    let mut refused = 0;
    for (cbid, _) in &names {
        if kept.iter().any(|(k, _)| k == cbid) {
            continue;
        }
        match g.cupti.enable_api_record(driver, *cbid, false) {
            Ok(()) => denied.push((driver, *cbid)),
            Err(_) => refused += 1,
        }
    }
    notes.push(format!(
        "api {} as a deny-list: {} of {} {what} callback ids off while the kind is on whole{}",
        mode.as_str(),
        outcome.dropped - refused,
        names.len(),
        if refused > 0 {
            format!(" ({refused} refused: still recorded)")
        } else {
            String::new()
        }
    ));
    refused == 0
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
        // The test binary never sets the bench hook's variable (`Knobs::bench_hook`).
        // SAFETY: a C string literal and a null `api`, as the function allows.
        let r = unsafe { cutrace_bench_set(c"kernel".as_ptr(), std::ptr::null()) };
        assert_eq!(r, NOT_ENABLED);
    }
}
