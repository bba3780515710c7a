//! Kernel names for display: CUPTI reports mangled C++ names (`_Z10add_kernelPfS_i`); reports
//! show them demangled (`add_kernel(float*, float*, int)`). Kineto traces already carry demangled
//! names, which pass through unchanged, as does anything that fails to demangle.

use std::borrow::Cow;

/// The demangled form of an Itanium-mangled name, or the name itself.
pub fn display_name(raw: &str) -> Cow<'_, str> {
    if !raw.starts_with("_Z") {
        return Cow::Borrowed(raw);
    }
    // The demangler parses untrusted text from the trace: contain any panic it might have.
    let demangled = std::panic::catch_unwind(|| {
        cpp_demangle::Symbol::new(raw)
            .ok()
            .and_then(|s| s.demangle().ok())
    })
    .ok()
    .flatten();
    match demangled {
        Some(d) if !d.is_empty() => Cow::Owned(d),
        _ => Cow::Borrowed(raw),
    }
}

/// `(display name, the raw name when it differs)`, as stored in report rows.
pub fn name_pair(raw: &str) -> (String, Option<String>) {
    match display_name(raw) {
        Cow::Borrowed(same) => (same.to_owned(), None),
        Cow::Owned(d) => (d, Some(raw.to_owned())),
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
}
