//! A real Prometheus server scrapes `cutrace monitor` (the fake libcupti playing scripted
//! records, as in `monitor_cli.rs`), and the last values its HTTP API holds for the GPU's and the
//! process's busy time equal `cutrace report` of a recording of the same records, to within
//! 1 ns (Prometheus keeps float64 seconds); and the same for `cutrace agent` with three
//! processes on one GPU, whose union is not the sum of theirs; and a `rate()` of two processes
//! whose records come at real time follows each one's scripted duty. Ignored by default: `.ci/run` installs Debian's
//! `prometheus` package and runs it with `--ignored`, or says SKIPPED when it cannot.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cutrace_testkit::Run;

use super::monitor_cli::{
    free_port, kernels_seen, metrics, poll, script, setup, Running, UUID, UUID_HEX,
};

/// A Prometheus server of our own, killed when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_prometheus(dir: &Path, target: u16, port: u16) -> Prometheus {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\nscrape_configs:\n  - \
             job_name: cutrace\n    static_configs:\n      - targets: [\"127.0.0.1:{target}\"]\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus is not installed (.ci/run installs Debian's package)");
    Prometheus(child)
}

/// The whole answer of Prometheus's API to an instant query.
fn query_json(port: u16, promql: &str) -> Option<serde_json::Value> {
    let q: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(c, "GET /api/v1/query?query={q} HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()
}

/// The value Prometheus's API gives for an instant query, as its text (`"0.000123456"`).
fn query(port: u16, promql: &str) -> Option<String> {
    let v = query_json(port, promql)?;
    let r = v["data"]["result"].as_array()?;
    (r.len() == 1).then(|| r[0]["value"][1].as_str().map(str::to_string))?
}

/// Decimal seconds as Prometheus writes a float64 (`12.000000345`, `1.5e-05`), in ns, rounded.
fn prom_ns(text: &str) -> u64 {
    let (mant, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap()),
        None => (text, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{int}{frac}");
    // value = digits × 10^(exp − frac.len()) s = digits × 10^(exp − frac.len() + 9) ns.
    let shift = exp - frac.len() as i32 + 9;
    let d: u128 = digits.parse().unwrap();
    if shift >= 0 {
        (d * 10u128.pow(shift as u32)) as u64
    } else {
        let p = 10u128.pow((-shift) as u32);
        ((d + p / 2) / p) as u64
    }
}

#[test]
fn prom_ns_reads_prometheus_floats() {
    assert_eq!(prom_ns("12.000000345"), 12_000_000_345);
    assert_eq!(prom_ns("1.5e-05"), 15_000);
    assert_eq!(prom_ns("0"), 0);
    assert_eq!(prom_ns("0.0000012344999"), 1_234);
}

#[test]
#[ignore = "needs Prometheus: .ci/run installs Debian's package and runs it"]
fn a_real_prometheus_scrapes_the_monitor_and_holds_the_reports_busy() {
    let Some(s) = setup("monitor-prometheus") else {
        panic!("the C stand-ins or the injection library are missing (see above)");
    };
    let (text, kernels) = script(41, 6);
    let sc = s.write("script", &text);
    let trace = s.record_script(&sc, "iw");
    let want = s.report_busy(&trace);
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "-q", "--listen", &listen], &wait);
    c.args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc);
    let m = Running::start(c, &wait);
    poll(port, &|t| kernels_seen(t) == kernels as u64);
    let prom_port = free_port();
    let _prom = start_prometheus(&s.dir, port, prom_port);
    let gpu_q = format!("cutrace_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}");
    let proc_q = format!("cutrace_process_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}");
    let start = Instant::now();
    let (mut gpu, mut proc) = (None, None);
    while start.elapsed() < Duration::from_secs(60) && (gpu != Some(want) || proc != Some(want)) {
        std::thread::sleep(Duration::from_millis(200));
        gpu = query(prom_port, &gpu_q).map(|v| prom_ns(&v));
        proc = query(prom_port, &proc_q).map(|v| prom_ns(&v));
    }
    let last = metrics(port).unwrap_or_default();
    assert!(
        gpu.is_some_and(|g| g.abs_diff(want) <= 1),
        "Prometheus holds {gpu:?} ns for the GPU, report says {want}; /metrics:\n{last}"
    );
    assert!(
        proc.is_some_and(|p| p.abs_diff(want) <= 1),
        "Prometheus holds {proc:?} ns for the process, report says {want}"
    );
    // Every expression of the Grafana dashboard is valid PromQL over these series, and the
    // busy panels have data.
    for e in super::monitor_cli::dashboard_exprs() {
        // A rate needs two scrapes in its window: wait for them (at most 20 s).
        let wants_data = e.contains("busy_seconds_total") && !e.contains("exposed");
        let start = Instant::now();
        let v = loop {
            let v = query_json(prom_port, &e).unwrap_or_default();
            let has = v["data"]["result"]
                .as_array()
                .is_some_and(|r| !r.is_empty());
            let done = v["status"] != "success" || has || !wants_data;
            if done || start.elapsed() > Duration::from_secs(20) {
                break v;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(v["status"], "success", "{e}: {v}");
        if wants_data {
            assert!(
                !v["data"]["result"].as_array().unwrap().is_empty(),
                "{e}: {v}"
            );
        }
    }
    assert_eq!(m.finish().status.code(), Some(3));
}

#[test]
#[ignore = "needs Prometheus: .ci/run installs Debian's package and runs it"]
fn a_real_prometheus_scrapes_an_agent_of_three_processes_on_one_gpu() {
    let Some(s) = setup("agent-prometheus") else {
        panic!("the C stand-ins or the injection library are missing (see above)");
    };
    let scripts: Vec<(std::path::PathBuf, usize)> = [73, 79, 83]
        .iter()
        .map(|&seed| {
            let (text, n) = script(seed, 3);
            (s.write(&format!("script-{seed}"), &text), n)
        })
        .collect();
    let total: usize = scripts.iter().map(|(_, n)| n).sum();
    let all: Vec<String> = scripts
        .iter()
        .map(|(p, _)| format!("FAKE_CUPTI_SCRIPT={} host - local i &", p.display()))
        .collect();
    let done = s.write("go", "");
    let trace = s.dir.join("trace");
    let mut rec = s.cutrace(
        &[
            "record",
            "-q",
            "--kinds",
            "kernel,runtime,driver,memcpy",
            "-o",
        ],
        &done,
    );
    rec.arg(&trace)
        .args(["--", "/bin/sh", "-c", &format!("{} wait", all.join(" "))])
        .run_ok();
    let union = s.report_busy(&trace);
    let mut each: Vec<u64> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| s.report_busy(&e.unwrap().path()))
        .collect();
    each.sort_unstable();
    let sum: u64 = each.iter().sum();
    assert!(union < sum);
    let sock_dir = s.dir.join("agent");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = crate::util::bin();
    c.args(["agent", "-q", "--listen", &listen, "--socket-dir"])
        .arg(&sock_dir);
    let mut agent = Running::start(c, &s.dir.join("unused"));
    poll(port, &|_| sock_dir.join("monitor.sock").exists());
    let env = super::monitor_cli::agent_env(&s, &sock_dir);
    for (p, _) in &scripts {
        Command::new(&s.host)
            .args(["-", "local", "i"])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env(cutrace_settings::var::CUPTI_LIB, &s.fake_cupti)
            .env("FAKE_CUPTI_SCRIPT", p)
            .run_code(3);
    }
    poll(port, &|t| kernels_seen(t) == total as u64);
    let prom_port = free_port();
    let _prom = start_prometheus(&s.dir, port, prom_port);
    let gpu_q = format!("cutrace_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}");
    let sum_q = format!("sum(cutrace_process_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}})");
    let start = Instant::now();
    let (mut gpu, mut procs) = (None, None);
    while start.elapsed() < Duration::from_secs(60)
        && !(gpu.is_some_and(|g: u64| g.abs_diff(union) <= 1)
            && procs.is_some_and(|p: u64| p.abs_diff(sum) <= 3))
    {
        std::thread::sleep(Duration::from_millis(200));
        gpu = query(prom_port, &gpu_q).map(|v| prom_ns(&v));
        procs = query(prom_port, &sum_q).map(|v| prom_ns(&v));
    }
    assert!(
        gpu.is_some_and(|g| g.abs_diff(union) <= 1),
        "Prometheus holds {gpu:?} ns for the GPU, the recording's union is {union}"
    );
    assert!(
        procs.is_some_and(|p| p.abs_diff(sum) <= 3),
        "Prometheus sums the processes to {procs:?} ns, the parts to {sum}"
    );
    // Each process on its own, within 1 ns: the three scripts' parts (a recording's pids are
    // not the agent's, so the two sets are compared in order of size).
    let mut mine: Vec<u64> = query_values(
        prom_port,
        &format!("cutrace_process_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}"),
    )
    .into_iter()
    .map(|v| prom_ns(&format!("{v:.9}")))
    .collect();
    mine.sort_unstable();
    assert_eq!(mine.len(), 3, "{mine:?}");
    for (got, want) in mine.iter().zip(&each) {
        assert!(
            got.abs_diff(*want) <= 1,
            "processes {mine:?} ns, parts {each:?} ns"
        );
    }
    let child = agent.child.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .run_ok();
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
}

/// Each series' value of an instant query, as numbers, in the order of their `pid` labels.
fn query_values(port: u16, promql: &str) -> Vec<f64> {
    let v = query_json(port, promql).unwrap_or_default();
    let mut r: Vec<(String, f64)> = v["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|s| {
                    let pid = s["metric"]["pid"].as_str().unwrap_or("").to_string();
                    Some((pid, s["value"][1].as_str()?.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    r.sort_by(|a, b| a.0.cmp(&b.0));
    r.into_iter().map(|(_, v)| v).collect()
}

/// A script whose groups come at real time (the fake libcupti's `after`), one every 100 ms:
/// group k, after k × 100 ms, holds one kernel busy from `from_ms` to `to_ms` of its own 100 ms
/// of GPU time, so the process's busy grows by (to − from)/100 of wall-clock time.
fn paced_script(groups: u64, from_ms: u64, to_ms: u64) -> String {
    let mut s = format!("device 0 {UUID_HEX}\n");
    for k in 0..groups {
        let base = 1_000_000_000 + k * 100_000_000;
        let (start, end) = (base + from_ms * 1_000_000, base + to_ms * 1_000_000);
        let corr = k + 1;
        s += &format!(
            "after {}\napi {corr} {} {}\nkernel 0 7 {start} {end} {corr} 0\nflush\n",
            k * 100,
            start - 2_000,
            start - 1_000
        );
    }
    s
}

#[test]
#[ignore = "needs Prometheus: .ci/run installs Debian's package and runs it"]
fn a_prometheus_rate_of_busy_follows_each_processs_scripted_duty() {
    let Some(s) = setup("monitor-rate") else {
        panic!("the C stand-ins or the injection library are missing (see above)");
    };
    // Two processes on one GPU for up to 40 s: one busy 25 % of the time ([0, 25) ms of every
    // 100), the other 50 % ([10, 60) ms): their union is busy 60 %, not 75 %.
    let a = s.write("script-a", &paced_script(400, 0, 25));
    let b = s.write("script-b", &paced_script(400, 10, 60));
    let port = free_port();
    let prom_port = free_port();
    let _prom = start_prometheus(&s.dir, port, prom_port);
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "-q", "--listen", &listen], &wait);
    let both = format!(
        "FAKE_CUPTI_SCRIPT={} host - local iw & FAKE_CUPTI_SCRIPT={} host - local iw & wait",
        a.display(),
        b.display()
    );
    c.args(["--", "/bin/sh", "-c", &both]);
    let m = Running::start(c, &wait);
    // Prometheus must have scraped the series for the whole window (a series that starts
    // inside it has its rate extrapolated over the part it was not there): wait until it held
    // the GPU's series 6 s ago (at most 30 s).
    let gpu_q = format!("cutrace_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}");
    let start = Instant::now();
    while query_values(prom_port, &format!("{gpu_q} offset 7s")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Prometheus never held the GPU's series for 7 s; /metrics:\n{}",
            metrics(port).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let procs = query_values(
        prom_port,
        &format!("rate(cutrace_process_gpu_busy_seconds_total{{gpu_uuid=\"{UUID}\"}}[6s])"),
    );
    let gpu = query_values(prom_port, &format!("rate({gpu_q}[6s])"));
    let last = metrics(port).unwrap_or_default();
    let mut shares = procs.clone();
    shares.sort_by(f64::total_cmp);
    assert_eq!(shares.len(), 2, "{procs:?}; /metrics:\n{last}");
    for (got, want) in shares.iter().zip([0.25, 0.5]) {
        assert!(
            (got - want).abs() <= 0.05,
            "a process's busy rate is {got}, its script {want}: {procs:?}; /metrics:\n{last}"
        );
    }
    assert!(
        gpu.len() == 1 && (gpu[0] - 0.6).abs() <= 0.05,
        "the GPU's busy rate is {gpu:?}, the scripts' union 0.6 (their sum 0.75)"
    );
    assert_eq!(m.finish().status.code(), Some(0));
}
