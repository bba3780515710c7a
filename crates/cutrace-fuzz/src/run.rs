//! Runs one case: the cutrace binary as a child with a deadline, its peak memory (of that child
//! alone) from the resource usage of a launcher that starts nothing else, and a verdict.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::targets::{Case, Feed};

/// What a child may use beyond what it writes: the ceiling.
pub const MEMORY_CEILING: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exited by itself (any status but a panic's), within the deadline and the ceiling.
    Pass,
    /// A panic (exit 101) or a signal (an abort, a crash).
    Crash(String),
    Hang,
    /// Peak RSS beyond the ceiling plus the output's size.
    Memory {
        peak: u64,
        output: u64,
    },
}

pub struct Outcome {
    pub verdict: Verdict,
    pub peak_rss: u64,
    pub stderr_tail: String,
}

/// Starts cutrace's children on the fuzzer's behalf, each from a launcher of its own: this same
/// program with `--launcher`, which starts one child, waits for it and answers with its peak.
/// Two reasons. Linux carries the starter's peak RSS into a child it starts (a `vfork`ed child
/// shares its memory until `exec`, which records that peak as the child's), so children started
/// by the fuzzer itself, after it built a large input, would report the fuzzer's peak as theirs;
/// a launcher is freshly exec'd and small. And `getrusage(RUSAGE_CHILDREN)`, the safe way to
/// read a child's peak, reports the largest peak of all the children a process has waited for:
/// in a launcher that started exactly one, it is that child's.
pub struct Launcher {
    exe: PathBuf,
}

const ARG_SEP: char = '\u{1f}';
const LINE_SEP: char = '\u{1e}';

impl Launcher {
    pub fn start() -> std::io::Result<Self> {
        Ok(Launcher {
            exe: std::env::current_exe()?,
        })
    }

    fn run(
        &mut self,
        bin: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        deadline: Duration,
    ) -> std::io::Result<Outcome> {
        use std::io::BufRead;
        let mut line = format!("{}{ARG_SEP}{}", deadline.as_millis(), bin.display());
        for a in args {
            line.push(ARG_SEP);
            line.push_str(&a.to_string_lossy());
        }
        line.push('\n');
        // The launcher's environment is its child's.
        let mut launcher = Command::new(&self.exe)
            .arg("--launcher")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let reply = (|| {
            let mut to = launcher
                .stdin
                .take()
                .ok_or_else(|| std::io::Error::other("no stdin"))?;
            to.write_all(line.as_bytes())?;
            drop(to);
            let mut from = std::io::BufReader::new(
                launcher
                    .stdout
                    .take()
                    .ok_or_else(|| std::io::Error::other("no stdout"))?,
            );
            let mut reply = String::new();
            if from.read_line(&mut reply)? == 0 {
                return Err(std::io::Error::other("the launcher exited"));
            }
            Ok(reply)
        })();
        if reply.is_err() {
            let _ = launcher.kill();
        }
        let _ = launcher.wait();
        let reply = reply?;
        let mut f = reply.trim_end_matches('\n').splitn(3, ARG_SEP);
        let (kind, peak, detail) = (
            f.next().unwrap_or(""),
            f.next().unwrap_or("0").parse().unwrap_or(0),
            f.next().unwrap_or("").replace(LINE_SEP, "\n"),
        );
        let (verdict, stderr_tail) = match kind {
            "pass" => (Verdict::Pass, detail),
            "hang" => (Verdict::Hang, detail),
            "crash" => {
                let (why, tail) = detail.split_once('\n').unwrap_or((&detail, ""));
                (Verdict::Crash(why.to_string()), tail.to_string())
            }
            _ => return Err(std::io::Error::other(format!("launcher said {reply:?}"))),
        };
        Ok(Outcome {
            verdict,
            peak_rss: peak,
            stderr_tail,
        })
    }
}

/// The launcher: one request line (deadline in ms, the binary, its arguments), one reply line
/// (verdict, peak RSS, detail), then exit: a second child would share the first one's peak.
pub fn launcher_main() -> std::io::Result<()> {
    use std::io::BufRead;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    if let Some(line) = stdin.lock().lines().next() {
        let line = line?;
        let mut f = line.split(ARG_SEP);
        let ms: u64 = f.next().unwrap_or("0").parse().unwrap_or(0);
        let bin = PathBuf::from(f.next().unwrap_or(""));
        let args: Vec<OsString> = f.map(OsString::from).collect();
        let o = run(&bin, &args, Duration::from_millis(ms))?;
        let (kind, detail) = match o.verdict {
            Verdict::Pass | Verdict::Memory { .. } => ("pass", o.stderr_tail),
            Verdict::Hang => ("hang", o.stderr_tail),
            Verdict::Crash(why) => ("crash", format!("{why}\n{}", o.stderr_tail)),
        };
        let detail = detail
            .replace(['\n', '\r'], &LINE_SEP.to_string())
            .replace(ARG_SEP, " ");
        writeln!(out, "{kind}{ARG_SEP}{}{ARG_SEP}{detail}", o.peak_rss)?;
        out.flush()?;
    }
    Ok(())
}

/// Runs `bin` with the case's arguments through the launcher, feeding a FIFO when the case reads
/// one.
pub fn run_case(
    launcher: &mut Launcher,
    bin: &Path,
    case: &Case,
    deadline: Duration,
) -> std::io::Result<Outcome> {
    let feeder = match &case.feed {
        Feed::File => None,
        Feed::Fifo { path, bytes } => {
            make_fifo(path)?;
            let (path, bytes) = (path.clone(), bytes.clone());
            Some(std::thread::spawn(move || {
                // Opening blocks until cutrace opens it; a cutrace that exits first leaves it
                // blocked, so the runner opens it itself to release it (below).
                if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(path) {
                    let _ = f.write_all(&bytes);
                }
            }))
        }
    };
    let out = launcher.run(bin, &case.args, &case.env, deadline)?;
    if let (Some(h), Feed::Fifo { path, .. }) = (feeder, &case.feed) {
        // Release a writer still waiting for a reader (cutrace exited without opening it).
        if !h.is_finished() {
            if let Ok(f) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags_nonblock()
                .open(path)
            {
                drop(f);
            }
        }
        let _ = h.join();
    }
    let output = case.outputs.iter().map(|p| size_of(p)).sum();
    let verdict = match out.verdict {
        Verdict::Pass if out.peak_rss > MEMORY_CEILING + output => Verdict::Memory {
            peak: out.peak_rss,
            output,
        },
        v => v,
    };
    Ok(Outcome { verdict, ..out })
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
    }
}

fn make_fifo(path: &Path) -> std::io::Result<()> {
    use rustix::fs::Mode;
    Ok(rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        Mode::RUSR | Mode::WUSR,
    )?)
}

/// Bytes under `p` (a file, or a directory's files).
fn size_of(p: &Path) -> u64 {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| size_of(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// Runs a command with a deadline. Its peak RSS is read with `getrusage(RUSAGE_CHILDREN)`: the
/// largest of all the children this process has waited for, so it is the command's own only in
/// a process that starts nothing else (the launcher). Linux reports it in KiB.
pub fn run(bin: &Path, args: &[OsString], deadline: Duration) -> std::io::Result<Outcome> {
    use std::os::unix::process::ExitStatusExt;
    let stderr_file = std::env::temp_dir().join(format!(
        "cutrace-fuzz-stderr-{}-{}",
        std::process::id(),
        unique()
    ));
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_file)?)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&stderr_file);
            return Err(e);
        }
    };
    let start = Instant::now();
    let mut hung = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(&stderr_file);
                return Err(e);
            }
        }
        if start.elapsed() > deadline && !hung {
            hung = true;
            let _ = child.kill(); // SIGKILL; reaped by the next try_wait
        }
        std::thread::sleep(Duration::from_millis(if start.elapsed().as_millis() < 50 {
            2
        } else {
            10
        }));
    };
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_err(std::io::Error::from)?;
    let stderr = std::fs::read(&stderr_file).unwrap_or_default();
    let _ = std::fs::remove_file(&stderr_file);
    let tail = String::from_utf8_lossy(&stderr[stderr.len().saturating_sub(2000)..]).into_owned();
    let peak_rss = (usage.max_rss().max(0) as u64) * 1024;
    let verdict = if hung {
        Verdict::Hang
    } else if let Some(sig) = status.signal() {
        Verdict::Crash(format!("killed by signal {sig}"))
    } else if status.code() == Some(101) {
        Verdict::Crash("panicked (exit 101)".into())
    } else {
        Verdict::Pass
    };
    Ok(Outcome {
        verdict,
        peak_rss,
        stderr_tail: tail,
    })
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A scratch directory for one case, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let d = root.join(format!("case-{}", unique()));
        std::fs::create_dir_all(&d)?;
        Ok(Scratch(d))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, deadline_ms: u64) -> Verdict {
        let args: Vec<OsString> = vec!["-c".into(), script.into()];
        run(
            Path::new("/bin/sh"),
            &args,
            Duration::from_millis(deadline_ms),
        )
        .unwrap()
        .verdict
    }

    #[test]
    fn the_oracle_tells_exit_panic_signal_and_hang_apart() {
        assert_eq!(sh("exit 0", 5000), Verdict::Pass);
        assert_eq!(sh("exit 1", 5000), Verdict::Pass, "an error is an answer");
        assert!(matches!(sh("exit 101", 5000), Verdict::Crash(_)));
        assert!(matches!(sh("kill -ABRT $$", 5000), Verdict::Crash(_)));
        assert_eq!(sh("sleep 5", 200), Verdict::Hang);
    }

    #[test]
    fn peak_memory_is_the_childs() {
        // A child that touches 64 MiB reports at least that much.
        let args: Vec<OsString> = vec![
            "-c".into(),
            "dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null".into(),
        ];
        let o = run(Path::new("/bin/sh"), &args, Duration::from_secs(30)).unwrap();
        assert_eq!(o.verdict, Verdict::Pass, "{}", o.stderr_tail);
        assert!(o.peak_rss >= 60 << 20, "{}", o.peak_rss);
    }
}
