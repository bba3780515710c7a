//! Test helpers that need no cutrace binary: the repository root, the committed native traces,
//! a temporary directory per test, and records written by hand. Shared by the CLI's tests (through `common`) and by
//! cutrace-export's format tests (which include this file by path).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use cutrace_trace::native::Writer;
use cutrace_trace::{ApiCall, ApiKind, Kernel};

/// Every committed native trace under `tests/fixtures/native`, as paths relative to it: a folder
/// holding `.cutrace` parts is a trace, any other folder is searched (`lean/two_streams`).
pub fn native_fixtures(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let subdirs: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if subdirs
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "cutrace"))
        {
            out.push(rel.to_string());
            return;
        }
        for p in subdirs.iter().filter(|p| p.is_dir()) {
            let name = p.file_name().unwrap().to_string_lossy();
            let rel = if rel.is_empty() {
                name.into_owned()
            } else {
                format!("{rel}/{name}")
            };
            walk(p, &rel, out);
        }
    }
    let mut out = Vec::new();
    walk(&root.join("tests/fixtures/native"), "", &mut out);
    out.sort();
    out
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A temporary directory for one test, removed when dropped (also when the test fails: tests
/// leave nothing behind).
pub struct Dir(pub PathBuf);

impl Dir {
    /// `$TMPDIR/cutrace-NAME-PID`, empty.
    pub fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("cutrace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `cudaLaunchKernel` call of process `pid` at `t0` (100 ns long) and the kernel it launched,
/// `gemm` on device 0 stream 7, from `t0 + 1,000` to `t0 + 4,000` ns; both with correlation id 1.
pub fn push_launch_and_kernel(w: &mut Writer<Cursor<Vec<u8>>>, pid: u32, t0: u64) {
    let k = w.intern("_Z4gemmPf");
    let a = w.intern("cudaLaunchKernel");
    w.push_api(&ApiCall {
        kind: ApiKind::Runtime,
        name: a,
        cbid: 211,
        process: pid,
        thread: 1,
        correlation_id: 1,
        start_ns: t0,
        end_ns: t0 + 100,
        return_value: 0,
    });
    w.push_kernel(&Kernel {
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 1,
        start_ns: t0 + 1_000,
        end_ns: t0 + 4_000,
        name: k,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        registers_per_thread: 8,
        static_shared_bytes: 0,
        dynamic_shared_bytes: 0,
        graph_id: 0,
    });
}
