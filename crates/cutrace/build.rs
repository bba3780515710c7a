//! Embeds `libcutrace_inject.so` in release builds of the `cutrace` binary.
//!
//! `cargo install --path crates/cutrace` installs binaries only, never a cdylib, so a binary
//! installed that way would have no injection library to point `CUDA_INJECTION64_PATH` at. A
//! release build therefore builds cutrace-inject itself (a nested `cargo build` into its own target
//! directory under OUT_DIR: the outer build holds the lock on the outer one) and the binary carries
//! the bytes, compressed; `cutrace record` inflates and writes them out under a content-addressed name when no library is
//! found beside it (src/cmd/record.rs). Debug builds (tests, clippy) embed nothing, so they cost
//! nothing. `cutrace_settings::var::EMBED_INJECT` set to 0 turns it off, to 1 turns it on for
//! any profile.

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    use cutrace_settings::var::EMBED_INJECT;
    println!("cargo:rerun-if-env-changed={EMBED_INJECT}");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir.join("../..");
    let wanted = match std::env::var(EMBED_INJECT).as_deref() {
        Ok("0") => false,
        Ok(_) => true,
        Err(_) => std::env::var("PROFILE").as_deref() == Ok("release"),
    };
    let inject_manifest = root.join("crates/cutrace-inject/Cargo.toml");
    let bytes = if wanted && inject_manifest.is_file() {
        // Whatever goes into the library: a change there rebuilds the embedded copy.
        for p in [
            "crates/cutrace-inject",
            "crates/cutrace-cupti",
            "crates/cutrace-counters",
            "crates/cutrace-trace",
            "crates/cutrace-settings",
            // Monitor mode's wire message and fold, and the interval helpers they use.
            "crates/cutrace-monitor",
            "crates/cutrace-analysis",
            "Cargo.lock",
            "Cargo.toml",
        ] {
            println!("cargo:rerun-if-changed={}", root.join(p).display());
        }
        build_inject(&inject_manifest, &out.join("inject-target"))
    } else {
        if wanted {
            // A packaged crate without the workspace around it: record then needs the library
            // beside the binary or CUTRACE_INJECT_LIB, and says so.
            println!("cargo:warning=cutrace-inject not found beside this crate; not embedding it");
        }
        Vec::new()
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    // The library's content id, the name of its directory in the cache.
    std::fs::write(out.join("inject-id"), format!("{:016x}", h.finish()))
        .expect("writing into OUT_DIR");
    // Compressed (zlib, best): 1.06 MB of library take about 0.4 MB of the binary; `record`
    // inflates it only when it has to unpack it. Nothing to embed stays empty.
    let packed = if bytes.is_empty() {
        Vec::new()
    } else {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&bytes).expect("compressing into memory");
        z.finish().expect("compressing into memory")
    };
    std::fs::write(out.join("libcutrace_inject.so.zz"), &packed).expect("writing into OUT_DIR");
}

fn build_inject(manifest: &std::path::Path, target_dir: &std::path::Path) -> Vec<u8> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--lib", "--manifest-path"])
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir)
        // The embedded copy carries no debug info or symbol table beyond the dynamic symbols
        // a loader needs: 11 MB unstripped, about 1 MB so.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
        .status()
        .expect("running cargo to build cutrace-inject");
    assert!(
        status.success(),
        "building cutrace-inject failed ({status})"
    );
    std::fs::read(target_dir.join("release/libcutrace_inject.so"))
        .expect("reading the libcutrace_inject.so just built")
}
