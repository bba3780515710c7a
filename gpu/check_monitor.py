#!/usr/bin/env python3
"""`cutrace monitor` on a real GPU, checked against `cutrace report` of the same records.

usage: check_monitor.py CUTRACE WORKLOADS GPU_DIR WORK_DIR OUT_DIR

For each workload (the C++ launch loop, two processes sharing the GPU, a PyTorch training step)
it runs `cutrace monitor --record DIR --linger 20 -- CMD`, scrapes /metrics once a second while
the program runs, and, once every process has ended, compares the last scrape with
`cutrace report DIR --format json`: the GPU's busy union and each process's own busy (report of
its part) must be equal to the nanosecond, as must the kernel counts, and the GPU's busy must not
be the sum of the processes' where they overlapped. The scrape series is kept (monitor_series.json
under OUT_DIR) for the fixture. Then the cost: the launch loop and the training step untraced,
under `cutrace record` and under `cutrace monitor`, pinned to one core, alternated. One JSON line
per check on stdout, with "ok".
"""
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

CT, WL, G, W, OUT = sys.argv[1:6]
SAMPLE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def scrape(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


def samples(text, name):
    """[(labels dict, value str)] of metric `name`."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((labels, m.group(3)))
    return out


def ns(seconds):
    whole, _, frac = seconds.partition(".")
    return int(whole) * 10**9 + int((frac + "000000000")[:9])


def gauge(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def report(path):
    r = subprocess.run([CT, "report", "--format", "json", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"report {path}: {r.stderr[-400:]}")
    return json.loads(r.stdout)


def monitored(name, cmd, env=None):
    port = free_port()
    trace = f"{W}/mon_{name}"
    subprocess.run(["rm", "-rf", trace])
    log = open(f"{W}/logs/monitor_{name}.err", "w")
    p = subprocess.Popen([CT, "monitor", "-q", "--listen", f"127.0.0.1:{port}", "--linger", "20",
                          "--record", trace, "--"] + cmd, stdout=subprocess.DEVNULL, stderr=log,
                         env={**os.environ, **(env or {})})
    series, last, t0 = [], None, time.time()
    while time.time() - t0 < 280:
        t = scrape(port)
        if t is not None:
            last = t
            gpu = samples(t, "cutrace_gpu_busy_seconds_total")
            series.append({"t_s": round(time.time() - t0, 3),
                           "gpu_busy_ns": [ns(v) for _, v in gpu],
                           "processes": gauge(t, "cutrace_monitor_processes"),
                           "open": gauge(t, "cutrace_monitor_connections_open")})
            ups = samples(t, "cutrace_process_up")
            if ups and all(v == "0" for _, v in ups) and gauge(t, "cutrace_monitor_connections_open") == 0 \
                    and p.poll() is None and time.time() - t0 > 3:
                # Every process ended and the monitor lingers: this scrape is final.
                break
        if p.poll() is not None:
            break
        time.sleep(1.0)
    p.terminate()
    rc = p.wait(timeout=30)
    return trace, last or "", series, rc


def check(name, cmd, env=None, processes=1):
    trace, text, series, rc = monitored(name, cmd, env)
    open(f"{OUT}/last_scrape_{name}.txt", "w").write(text)
    fails = []
    rep = report(trace)
    devs = rep.get("devices", [])
    gpu = samples(text, "cutrace_gpu_busy_seconds_total")
    if len(devs) != 1 or len(gpu) != 1:
        fails.append(f"{len(devs)} devices in the report, {len(gpu)} GPUs in the metrics")
        return {"mode": f"monitor {name}", "ok": False, "fails": fails, "rc": rc}
    want, got = devs[0]["busy_ns"], ns(gpu[0][1])
    if want != got:
        fails.append(f"GPU busy: metrics {got} ns, report {want} ns")
    parts = sorted(f for f in os.listdir(trace) if f.endswith(".cutrace"))
    each = {}
    for f in parts:
        pid = f.rsplit("-", 1)[-1].split(".")[0]
        d = report(f"{trace}/{f}")["devices"]
        each[pid] = (d[0]["busy_ns"], d[0]["kernels"]) if d else (0, 0)
    mine = {l["pid"]: ns(v) for l, v in samples(text, "cutrace_process_gpu_busy_seconds_total")}
    kern = {l["pid"]: int(v) for l, v in samples(text, "cutrace_process_kernels_total")}
    with_kernels = {p: v for p, v in each.items() if v[1] > 0}
    if len(with_kernels) != processes:
        fails.append(f"{len(with_kernels)} processes ran kernels, {processes} expected")
    for pid, (busy, k) in with_kernels.items():
        if mine.get(pid) != busy or kern.get(pid) != k:
            fails.append(f"pid {pid}: metrics {mine.get(pid)} ns / {kern.get(pid)} kernels, "
                         f"report {busy} ns / {k} kernels")
    total = sum(b for b, _ in with_kernels.values())
    for l, v in samples(text, "cutrace_process_dropped_records_total") + samples(text, "cutrace_monitor_rejected_frames_total"):
        if v != "0":
            fails.append(f"{l.get('source') or l.get('reason')}: {v}")
    if processes > 1 and not got < total:
        fails.append(f"the GPU's busy {got} is not below the processes' sum {total}")
    json.dump({"workload": name, "series": series}, open(f"{OUT}/monitor_series_{name}.json", "w"))
    return {"mode": f"monitor {name}", "ok": not fails and rc == 0, "rc": rc, "gpu_busy_ns": got,
            "report_busy_ns": want, "process_busy_ns": sorted(mine.values()), "processes_sum_ns": total,
            "scrapes": len(series), "kernels": sum(kern.values()), "fails": fails}


def cost():
    """Pinned to core 2, the variants alternated: the launch loop's µs per launch and the
    training step's ms per step (each the mean over the run's batches), untraced, recorded, monitored, and monitored with the duty
    cycle MON_DUTY (default 2s/20s: records on 2 s of every 20). A duty cycle's cost depends on
    how many of its periods a run holds, so the duty-cycled runs and an untraced run beside them
    are long (MON_LOOP_LONG_BATCHES batches of 100,000 launches, MON_TRAIN_LONG_BATCHES batches
    of 25 steps: about 40 s, two periods), the others short (MON_LOOP_BATCHES,
    MON_TRAIN_BATCHES); each ratio is taken against the untraced run of its own length.
    MON_VARIANTS names the variants to run (default all)."""
    duty = os.environ.get("MON_DUTY", "2s/20s")
    res = {}
    mon = [CT, "monitor", "-q", "--listen", "127.0.0.1:0"]
    variants = {"untraced": ([], False), "record": ([CT, "record", "-q", "-o", f"{W}/cost.trace", "--"], False),
                "monitor": (mon + ["--"], False),
                "untraced long": ([], True), "monitor duty": (mon + ["--duty", duty, "--"], True)}
    only = os.environ.get("MON_VARIANTS", "").split(",")
    variants = {k: v for k, v in variants.items() if only == [""] or k in only}

    def alternate(reps, what, cmd, out, key, env=None):
        for i in range(reps):
            order = list(variants.items()) if i % 2 == 0 else list(variants.items())[::-1]
            for k, (pre, long) in order:
                subprocess.run(["rm", "-rf", f"{W}/cost.trace", out])
                subprocess.run(["taskset", "-c", "2"] + pre + cmd(long), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env(long) if env else None, timeout=600)
                try:
                    # The mean over the run's batches (all the same size): the whole run's time
                    # per launch or step. A median batch would hide a duty cycle's cost, which
                    # falls on the tenth of the batches that ran while records were on.
                    b = json.load(open(out))[key]
                    res.setdefault(f"{what} {k}", []).append(sum(b) / len(b))
                except (OSError, ValueError, KeyError, ZeroDivisionError):
                    pass
    if os.environ.get("MON_LOOP_REPS", "3") != "0":
        def loop(long):
            n = os.environ.get("MON_LOOP_LONG_BATCHES", "92") if long else os.environ.get("MON_LOOP_BATCHES", "30")
            return [WL, "tiny", "100000", "--batches", n, "--json", f"{W}/cost.json"]
        alternate(int(os.environ.get("MON_LOOP_REPS", 3)), "loop", loop, f"{W}/cost.json", "batch_us_per_launch")
    if os.environ.get("MON_TORCH_REPS", "3") != "0":
        def steps(long):
            n = os.environ.get("MON_TRAIN_LONG_BATCHES", "270") if long else os.environ.get("MON_TRAIN_BATCHES", "40")
            return {**os.environ, "EAGER_BATCHES": "0", "TRAIN_BATCHES": n}
        alternate(int(os.environ.get("MON_TORCH_REPS", 3)), "step",
                  lambda long: ["python3", f"{G}/bench_torch.py", "--json", f"{W}/bt.json"], f"{W}/bt.json",
                  "train_batches", steps)
    med = {k: statistics.median(v) for k, v in res.items() if v}
    ratio = {}
    for w in ("loop", "step"):
        for k, base in (("record", "untraced"), ("monitor", "untraced"), ("monitor duty", "untraced long")):
            b = med.get(f"{w} {base}")
            if b and f"{w} {k}" in med:
                ratio[f"{w} {k} / {base}"] = round(med[f"{w} {k}"] / b, 4)
    ok = bool(ratio) and all(len(v) >= 1 for v in res.values())
    return {"mode": "monitor cost", "ok": ok, "duty": duty, "medians": med, "ratios": ratio, "samples": res}


def stuck():
    """A kernel that hangs (spinning on a pinned host flag, released after MON_HANG_S seconds)
    beside a process that goes on launching: the hang is logged once past --stuck-after, its
    flight recorder lands in --dump-stuck, and the other process's kernels keep rising."""
    hang_s, after = int(os.environ.get("MON_HANG_S", 40)), int(os.environ.get("MON_STUCK_AFTER", 15))
    port, dump = free_port(), f"{W}/stuck_dump"
    subprocess.run(["rm", "-rf", dump])
    err_path = f"{W}/logs/monitor_stuck.err"
    prog = f"{WL} hang {hang_s} & {WL} longrun {hang_s + 8} & wait"
    last_dir = f"{W}/stuck_last"
    subprocess.run(["rm", "-rf", last_dir])
    # Not quiet: the monitor's first line names its socket, which `cutrace capture` needs.
    p = subprocess.Popen([CT, "monitor", "--listen", f"127.0.0.1:{port}", "--stuck-after", str(after),
                          "--dump-stuck", dump, "--", "/bin/sh", "-c", prog],
                         stdout=subprocess.DEVNULL, stderr=open(err_path, "w"))
    series, t0, captured = [], time.time(), None
    while p.poll() is None and time.time() - t0 < hang_s + 60:
        if captured is None:
            captured = capture_last_once_stuck(open(err_path).read(), last_dir, t0)
        t = scrape(port)
        if t:
            pend = {l["pid"]: ns(v) for l, v in samples(t, "cutrace_process_oldest_pending_launch_seconds")}
            kern = {l["pid"]: int(v) for l, v in samples(t, "cutrace_process_kernels_total")}
            named = {l["pid"]: l.get("kernel") for l, v in samples(t, "cutrace_process_pending_kernel_info")}
            unfinished = {l["pid"]: int(v) for l, v in samples(t, "cutrace_process_unfinished_kernels_total")}
            series.append({"t_s": round(time.time() - t0, 1), "pending_ns": pend, "kernels": kern,
                           "named": named, "unfinished": unfinished})
        time.sleep(1.0)
    rc = p.wait(timeout=60)
    err = open(err_path).read()
    json.dump(series, open(f"{OUT}/stuck_series.json", "w"))
    fails = []
    told = [l for l in err.splitlines() if "stuck kernel:" in l]
    if len(told) != 1:
        fails.append(f"{len(told)} stuck-kernel lines: {told[:3]}")
    hung = {pid for s_ in series for pid, a in s_["pending_ns"].items() if a >= after * 10**9}
    if len(hung) != 1:
        fails.append(f"processes pending past {after} s: {sorted(hung)}")
    if len(told) == 1 and not ("(wait_for_host(" in told[0] and all(f"pid {p_}" in told[0] for p_ in hung)):
        fails.append(f"the stuck-kernel line names neither the kernel nor the pid: {told[0]}")
    names = {n for s_ in series for n in s_["named"].values()}
    if not any(n and n.startswith("wait_for_host(") for n in names):
        fails.append(f"cutrace_process_pending_kernel_info never named the hung kernel: {sorted(map(str, names))}")
    last = series[-1] if series else {"pending_ns": {}, "unfinished": {}, "named": {}}
    for pid in hung:
        if last["pending_ns"].get(pid, 0) != 0 or last["unfinished"].get(pid) != 1 or pid in last["named"]:
            fails.append(f"after the release pid {pid} still reads pending {last['pending_ns'].get(pid)} ns, "
                         f"unfinished {last['unfinished'].get(pid)}, named {last['named'].get(pid)}")
    others = [s_["kernels"].get(pid) for s_ in series for pid in s_["kernels"] if pid not in hung]
    rising = len([k for k in others if k]) >= 2 and max(k for k in others if k) > min(k for k in others if k)
    if not rising:
        fails.append("the other process's kernels did not rise while the first hung")
    parts = [f for f in os.listdir(dump)] if os.path.isdir(dump) else []
    dumped = report(dump)["devices"][0]["kernels"] if parts else 0
    if dumped < 100:
        fails.append(f"the flight recorder dump holds {dumped} kernels, not the 100 before the hang")
    # `cutrace capture --last`, asked by hand while the kernel still hung: the same records.
    last_kernels = None
    if not captured or captured["rc"] != 0:
        fails.append(f"capture --last during the hang: {captured}")
    else:
        devs = report(last_dir).get("devices", [])
        last_kernels = devs[0]["kernels"] if devs else 0
        if last_kernels < 100:
            fails.append(f"capture --last holds {last_kernels} kernels, not the 100 before the hang")
        if captured["t_s"] >= hang_s:
            fails.append(f"capture --last came {captured['t_s']} s in, after the release at {hang_s} s")
    return {"mode": "monitor stuck", "ok": not fails and rc == 0, "rc": rc, "stuck_lines": told,
            "dump_kernels": dumped, "capture_last_kernels": last_kernels,
            "capture_last_at_s": (captured or {}).get("t_s"), "scrapes": len(series), "fails": fails}


def capture_last_once_stuck(err, out_dir, t0):
    """Once the monitor's log names a stuck kernel, `cutrace capture --socket S --pid P --last`
    for it; None before that."""
    sock = re.search(r"capture --socket (\S+) --all", err)
    hung = re.search(r"stuck kernel: .*\(pid (\d+)", err)
    if not (sock and hung):
        return None
    time.sleep(2.5)  # the process takes at most one capture every 2 s: the automatic dump came first
    r = subprocess.run([CT, "capture", "--socket", sock.group(1), "--pid", hung.group(1), "--last",
                        "-o", out_dir], capture_output=True, text=True, timeout=60)
    open(f"{W}/logs/capture_last.err", "w").write(r.stdout + r.stderr)
    return {"rc": r.returncode, "pid": hung.group(1), "t_s": round(time.time() - t0, 1)}


if __name__ == "__main__":
    two = ["/bin/sh", "-c", f"{WL} longrun 6 & {WL} longrun 6 & wait"]
    torch_env = {"EAGER_BATCHES": "0", "TRAIN_BATCHES": "2"}
    only = os.environ.get("MON_ONLY", "").split()
    for name, cmd, env, n in [("launch_loop", [WL, "tiny", "100000"], None, 1),
                              ("two_processes", two, None, 2),
                              ("torch_step", ["python3", f"{G}/bench_torch.py"], torch_env, 1)]:
        if only and name not in only:
            continue
        try:
            print(json.dumps(check(name, cmd, env, n)), flush=True)
        except Exception as e:  # noqa: BLE001 - one workload's failure is a row, not a stop
            print(json.dumps({"mode": f"monitor {name}", "ok": False, "fails": [repr(e)[:300]]}), flush=True)
    if os.environ.get("MON_STUCK", "1") == "1":
        try:
            print(json.dumps(stuck()), flush=True)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"mode": "monitor stuck", "ok": False, "fails": [repr(e)[:300]]}), flush=True)
    if os.environ.get("MON_COST", "1") == "1":
        print(json.dumps(cost()), flush=True)
