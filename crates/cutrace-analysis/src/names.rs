//! Names as reports hold them. CUPTI reports mangled C++ names (`_Z10add_kernelPfS_i`); reports
//! show them demangled (`add_kernel(float*, float*, int)`). Kineto traces already carry demangled
//! names, which pass through unchanged, as does anything that fails to demangle.
//!
//! A report names one kernel or range in many entries (every gap beside it, every step, every
//! rank), so a name the trace holds once can be copied thousands of times: a 1.7 KB native part
//! whose 2,000 kernels share one 1 MiB name once made the report take 3.9 GB. Every name a report
//! takes from a trace is therefore cut to [`REPORT_NAME_BYTES`] ([`held`]); the tables and
//! timeline exports keep names whole.

use std::borrow::Cow;

/// The longest name a report holds whole, in bytes. Real kernel names run past 5 KB (PyTorch's
/// nested lambdas), so a longer name keeps its first and last [`REPORT_NAME_BYTES`]` / 2` bytes,
/// where the parts that tell kernels apart are, and says how long it was.
pub const REPORT_NAME_BYTES: usize = 16 << 10;

/// `name` as a report holds it: whole up to [`REPORT_NAME_BYTES`], else its first and last
/// halves of that (on character boundaries) around `…(N bytes, #HASH)…`, the hash of the whole
/// name, so that names differing only in their middle stay apart.
pub fn held(name: &str) -> String {
    if name.len() <= REPORT_NAME_BYTES {
        return name.to_owned();
    }
    let mut head = REPORT_NAME_BYTES / 2;
    while !name.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = name.len() - REPORT_NAME_BYTES / 2;
    while !name.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}…({} bytes, #{:016x})…{}",
        &name[..head],
        name.len(),
        fnv1a(name.as_bytes()),
        &name[tail..]
    )
}

/// FNV-1a over `b`: two long names that differ only in their middle stay different once cut.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The demangled form of an Itanium-mangled name, or the name itself.
pub fn display_name(raw: &str) -> Cow<'_, str> {
    if !raw.starts_with("_Z") {
        return Cow::Borrowed(raw);
    }
    // The demangler parses untrusted text from the trace: contain any panic it might have, and
    // stop it past DEMANGLED_BYTES of output (substitutions can double a name's length at each
    // level: a 50-byte name once demangled for a second, a 10 MB trace holds thousands).
    let demangled = std::panic::catch_unwind(|| {
        let sym = cpp_demangle::Symbol::new(raw).ok()?;
        let mut out = Bounded(String::new());
        sym.structured_demangle(&mut out, &Default::default())
            .ok()?;
        Some(out.0)
    })
    .ok()
    .flatten();
    match demangled {
        Some(d) if !d.is_empty() => Cow::Owned(d),
        _ => Cow::Borrowed(raw),
    }
}

/// The longest demangled name kept; past it, the mangled name is shown as it is.
pub const DEMANGLED_BYTES: usize = 64 << 10;

/// A `String` that refuses to grow past [`DEMANGLED_BYTES`], ending the formatting.
struct Bounded(String);

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.0.len() + s.len() > DEMANGLED_BYTES {
            return Err(std::fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

/// `(display name, the raw name when it differs)`, as stored in report rows, each [`held`].
pub fn name_pair(raw: &str) -> (String, Option<String>) {
    // A name past the report's length is not demangled for a report: it is cut anyway, and
    // demangling costs grow with the name. (Exports demangle whole names: `display_name`.)
    if raw.len() > REPORT_NAME_BYTES {
        return (held(raw), None);
    }
    match display_name(raw) {
        Cow::Borrowed(same) => (held(same), None),
        Cow::Owned(d) => (held(&d), Some(held(raw))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_itanium_names_and_passes_others_through() {
        assert_eq!(
            display_name("_Z10add_kernelPfS_i"),
            "add_kernel(float*, float*, int)"
        );
        let kineto = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)";
        assert_eq!(display_name(kineto), kineto);
        assert_eq!(display_name("_Zgarbage"), "_Zgarbage");
        assert_eq!(
            name_pair("_Z3fooi"),
            ("foo(int)".to_owned(), Some("_Z3fooi".to_owned()))
        );
        assert_eq!(name_pair("gemm"), ("gemm".to_owned(), None));
    }

    #[test]
    fn a_name_whose_demangling_doubles_at_each_level_is_stopped() {
        // X<a, a> where each a is the previous X<…>, by substitution: 2^23 copies of the first.
        let sub = |i: usize| match i {
            0 => "S_".to_string(),
            i => format!(
                "S{}_",
                char::from_digit((i - 1) as u32, 36)
                    .unwrap()
                    .to_ascii_uppercase()
            ),
        };
        let mut n = "_Z2f01A1XIS_S_E".to_string();
        for level in 2..25 {
            n += &format!("S0_I{}{}E", sub(level), sub(level));
        }
        // Its demangled form is megabytes long: the demangler stops at DEMANGLED_BYTES (the
        // work is bounded by the output; it took over a second before), and the name is shown
        // as it is.
        assert_eq!(display_name(&n), n);
        // The first level alone demangles.
        assert!(display_name("_Z2f01A1XIS_S_E").starts_with("f0"));
    }

    #[test]
    fn long_names_keep_both_ends_on_character_boundaries_and_say_their_length() {
        let exact = "a".repeat(REPORT_NAME_BYTES);
        assert_eq!(held(&exact), exact);
        let half = REPORT_NAME_BYTES / 2;
        let long = format!(
            "{}é{}é{}",
            "a".repeat(half - 1),
            "m".repeat(100),
            "z".repeat(half - 1)
        );
        let h = held(&long);
        assert!(h.starts_with(&"a".repeat(half - 1)), "{h}");
        assert!(h.ends_with(&"z".repeat(half - 1)));
        assert!(h.contains(&format!("…({} bytes, #", long.len())));
        // Two names alike but in their middle stay apart.
        let other = long.replacen('m', "n", 1);
        assert_eq!(other.len(), long.len());
        assert_ne!(held(&other), h);
        assert!(!h.contains('é') && !h.contains('m'));
        let mangled = format!("_Z{}", "9abcdefghi".repeat(4000));
        let (shown, raw) = name_pair(&mangled);
        assert!(shown.len() < REPORT_NAME_BYTES + 64 && raw.is_none());
    }
}
