#!/usr/bin/env python3
"""The agent's CPU and memory at a steady rate of kernel records, and the injected library's
CPU per record in monitor mode beside `cutrace record`'s, on the fake libcupti (no GPU).

usage: bench/agent_rate.py [--rate RECORDS_PER_S] [--seconds S] [--bin target/release/cutrace]

The fake libcupti (crates/cutrace-inject/tests/fake_cupti) plays a script whose groups come at
real time (`after MS`): every 10 ms a buffer of RATE/100 kernels on 4 streams, none touching
another (so none merge: the agent's worst case), for S seconds. One program reports to a
`cutrace agent`; the agent's CPU time (/proc/PID/stat) and resident memory (VmRSS before,
VmHWM after) are read around it, and the program's own CPU time (its injected library's
writer thread doing the work: the fake hands records over at next to no cost). Then the same
script under `cutrace record`. Prints a table; the release build is expected
(`cargo build --release -p cutrace -p cutrace-inject`).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "crates/cutrace-inject/tests/fake_cupti")
UUID_HEX = "00112233445566778899aabbccddeeff"


def build(w):
    cc = os.environ.get("CC", "cc")
    lib, host = os.path.join(w, "libcupti.so.13"), os.path.join(w, "host")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcupti.so.13", "-o", lib,
                    os.path.join(FAKE, "fake_cupti.c")], check=True)
    subprocess.run([cc, "-O1", "-o", host, os.path.join(FAKE, "host.c"), "-ldl"], check=True)
    return lib, host


def script(path, rate, seconds):
    per_group, groups = rate // 100, seconds * 100
    with open(path, "w") as f:
        f.write(f"device 0 {UUID_HEX}\n")
        t = 1_000_000_000
        for g in range(groups):
            f.write(f"after {g * 10}\n")
            lines = []
            for i in range(per_group):
                # 10 ms of GPU time per group, spread over 4 streams, gaps between kernels.
                start = t + g * 10_000_000 + i * (10_000_000 // per_group)
                lines.append(f"kernel 0 {7 + i % 4} {start} {start + 300} 0 0\n")
            f.write("".join(lines))
            f.write("flush\n")
    return per_group * groups


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run_program(cmd, env, go, seconds):
    """Runs `cmd`, lets it go after `seconds` + 1 s; its CPU seconds (user + system)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds + 1.0)
    open(go, "w").close()
    _, status, ru = os.wait4(p.pid, 0)
    os.remove(go)
    return ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/cutrace"))
    a = ap.parse_args()
    w = tempfile.mkdtemp(prefix="cutrace-agent-rate-")
    try:
        lib, host = build(w)
        sc = os.path.join(w, "script")
        records = script(sc, a.rate, a.seconds)
        go = os.path.join(w, "go")
        # Flushed every 20 ms in both modes, so that no flush takes more buffers than a
        # pool holds (at the default 1 s, a second of records at once).
        base = {**os.environ, "CUTRACE_CUPTI_LIB": lib, "FAKE_CUPTI_SCRIPT": sc,
                "CUTRACE_FLUSH_PERIOD_MS": "20",
                "FAKE_HOST_WAIT": go}
        # The agent, and a program with `cutrace agent env`'s environment.
        sock_dir, port = os.path.join(w, "agent"), free_port()
        agent = subprocess.Popen([a.bin, "agent", "-q", "--listen", f"127.0.0.1:{port}",
                                  "--socket-dir", sock_dir], stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(os.path.join(sock_dir, "monitor.sock")):
                break
            time.sleep(0.05)
        env_lines = subprocess.run([a.bin, "agent", "env", "--socket-dir", sock_dir],
                                   capture_output=True, text=True, check=True).stdout
        env = dict(base)
        for line in env_lines.splitlines():
            if line.startswith("export "):
                k, _, v = line[7:].partition("=")
                env[k] = v.strip("'")
        rss0, cpu0 = status_kb(agent.pid, "VmRSS"), cpu_s(agent.pid)
        prog_cpu, rc = run_program([host, "-", "local", "iw"], env, go, a.seconds)
        time.sleep(1.0)
        agent_cpu = cpu_s(agent.pid) - cpu0
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        seen = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                   if l.startswith("cutrace_process_kernels_total{"))
        hwm = status_kb(agent.pid, "VmHWM")
        agent.terminate()
        agent.wait(timeout=10)
        if rc != 3:
            sys.exit(f"the monitored program exited {rc}")
        # The same script recorded.
        rec_cpu, rc = run_program([a.bin, "record", "-q", "-o", os.path.join(w, "trace"), "--",
                                   host, "-", "local", "iw"], base, go, a.seconds)
        if rc != 3:
            sys.exit(f"the recorded program exited {rc}")
        rep = subprocess.run([a.bin, "report", "--format", "json", os.path.join(w, "trace")],
                             capture_output=True, text=True, check=True).stdout
        recorded = json.loads(rep)["devices"][0]["kernels"]
        if seen != records or recorded != records:
            sys.exit(f"{records} scripted, the agent saw {seen}, the trace holds {recorded}")
        per_m = 1e6 / records
        print(f"{records:,} kernel records in {a.seconds} s ({a.rate:,}/s), none touching")
        print("| what | CPU | per million records | memory |")
        print("|---|---|---|---|")
        print(f"| the agent | {agent_cpu:.2f} s ({agent_cpu / a.seconds:.1%} of a core) | "
              f"{agent_cpu * per_m:.2f} s | VmRSS {rss0 / 1024:.1f} MB before, "
              f"VmHWM {hwm / 1024:.1f} MB after |")
        print(f"| the program, monitor mode (agent env) | {prog_cpu:.2f} s | {prog_cpu * per_m:.2f} s | – |")
        print(f"| the program under `cutrace record` | {rec_cpu:.2f} s | {rec_cpu * per_m:.2f} s | – |")
    finally:
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
