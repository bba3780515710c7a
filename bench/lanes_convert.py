"""`cutrace convert --chrome` and `--perfetto` of 64k and 128k overlapping kernels, end to end.

usage: cargo build --release -p cutrace && cargo build --release -p cutrace-export --example
       bench_lanes && python3 bench/lanes_convert.py [ROUNDS]

Writes the two native parts with `bench_lanes --write-native` (64k and 128k kernels on one
stream, all running at once: a row each), then runs `cutrace convert PART --chrome OUT` and
`--perfetto OUT` on both, one process per run, the sizes alternating, ROUNDS rounds (default 7),
and measures each run's CPU time (user + system, from `os.wait4`, exact at exit). Prints the
best round per size and format with the ratio of 128k to 64k (the acceptance target of the
timeline exports is at most 2), and the CPU time of converting a 10-kernel trace
(examples/two_streams.json.gz): what every run costs whatever its size. Everything it writes
is under one temporary directory, removed at the end.
"""
import os
import shutil
import subprocess
import sys
import tempfile

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..")
cutrace = os.environ.get("CUTRACE", os.path.join(root, "target", "release", "cutrace"))
bench = os.path.join(root, "target", "release", "examples", "bench_lanes")

tmp = tempfile.mkdtemp(prefix="cutrace-lanes-")
try:
    subprocess.run([bench, "--write-native", tmp], check=True, stdout=subprocess.DEVNULL)
    sizes = [65536, 131072]
    best = {}
    for r in range(rounds):
        for fmt in ["chrome", "perfetto"]:
            for n in sizes:
                part = os.path.join(tmp, f"overlap-{n}.cutrace")
                out = os.path.join(tmp, f"out-{fmt}-{n}")
                # Identical kernels one nanosecond apart deflate far below any recording, past
                # the reader's rows-per-byte limit: raised for them.
                p = subprocess.Popen([cutrace, "convert", part, f"--{fmt}", out,
                                      "--limit", "rows-per-byte=1000"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                if status != 0:
                    raise SystemExit(f"cutrace convert {part} --{fmt} failed ({status})")
                os.unlink(out)
                cpu = ru.ru_utime + ru.ru_stime
                best[(fmt, n)] = min(best.get((fmt, n), float("inf")), cpu)
    tiny = float("inf")
    for r in range(rounds):
        out = os.path.join(tmp, "tiny.json")
        p = subprocess.Popen([cutrace, "convert", os.path.join(root, "examples",
                              "two_streams.json.gz"), "--chrome", out],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            raise SystemExit(f"cutrace convert examples/two_streams.json.gz failed ({status})")
        os.unlink(out)
        tiny = min(tiny, ru.ru_utime + ru.ru_stime)
    print(f"cutrace convert, CPU seconds (user + system), best of {rounds} alternating rounds")
    print("| format | 64k | 128k | ratio 128k/64k |")
    print("|---|---:|---:|---:|")
    for fmt in ["chrome", "perfetto"]:
        a, b = best[(fmt, 65536)], best[(fmt, 131072)]
        print(f"| {fmt} | {a:.4f} | {b:.4f} | {b / a:.2f} |")
    print(f"a 10-kernel trace's convert: {tiny:.4f} s")
finally:
    shutil.rmtree(tmp)
