"""cutrace's critical path beside Holistic Trace Analysis' on HTA's own critical-path test traces.

usage: python3 tests/hta_critical_path.py CUTRACE HTA_PYTHON [--record]

For each trace of tests/fixtures/hta/critical_path/ (its README names HTA's span for each), runs
HTA's critical_path_analysis through bench/hta_critical_path.py with HTA_PYTHON, and `CUTRACE
report --critical-path` over the same span, prints them side by side, and checks what
docs/HTA.md ("Critical path") says of them:

- cutrace's path is as long as the span, exactly; HTA's is at most that long (its edges between
  nested host ops weigh nothing, so host time between ops drops out of its length);
- where HTA's path runs through the same kernels, the GPU compute on both paths agrees to HTA's
  microsecond; on simple_add HTA's path holds kernels that ended before the host waited for
  them, and cutrace's holds none.

With --record, writes HTA's figures into tests/fixtures/hta/critical_path.json (the Rust test
crates/cutrace/tests/cli/hta_critical_path.rs checks cutrace against them without HTA).
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
fixtures = os.path.join(root, "tests", "fixtures", "hta", "critical_path")
ANN = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
# name → (HTA annotation, instance, cutrace's arguments for the same span)
CASES = {
    "alexnet": (ANN, "1", ["--from", "1695835585827782000", "--to", "1695835585864138000"]),
    "simple_add": (ANN, "1", ["--from", "1694040009854190000", "--to", "1694040010097541000"]),
    "event_sync": ("ProfilerStep", "0", []),
    "event_sync_multi_stream": ("", "none", []),
}


def cutrace_path(cutrace, trace, extra):
    out = subprocess.run([cutrace, "report", trace, "--critical-path", "--format", "json"] + extra,
                         check=True, capture_output=True).stdout
    return json.loads(out)["critical_path"]["window"]


def hta_path(py, trace_dir, ann, inst):
    out = subprocess.run([py, os.path.join(root, "bench", "hta_critical_path.py"), trace_dir, ann, inst],
                         check=True, capture_output=True, env=dict(os.environ, HTA_DISABLE_NS_ROUNDING="1"))
    return json.loads(out.stdout)


def main():
    cutrace, py = sys.argv[1], sys.argv[2]
    record = "--record" in sys.argv[3:]
    recorded = {}
    failures = []
    print(f"{'trace':<24} {'span µs':>9} {'cutrace':>9} {'HTA':>9} {'compute c/H':>13} {'launch c/H':>11}")
    for name, (ann, inst, extra) in CASES.items():
        trace = os.path.join(fixtures, f"{name}.json.gz")
        c = cutrace_path(cutrace, trace, extra)
        # HTA reads a directory of traces: one holding this one alone.
        with tempfile.TemporaryDirectory() as tmp:
            os.symlink(trace, os.path.join(tmp, "trace.json.gz"))
            h = hta_path(py, tmp, ann, inst)
        comp = c["composition"]
        hb = h["by_bound_us"]
        h_compute = hb.get("gpu_compute_bound", 0.0)
        h_launch = hb.get("gpu_kernel_launch_overhead", 0.0) + hb.get("gpu_kernel_kernel_overhead", 0.0)
        span = c["end_ns"] - c["start_ns"]
        print(f"{name:<24} {span / 1000:>9.0f} {c['length_ns'] / 1000:>9.0f} {h['length_us']:>9.0f} "
              f"{comp['compute_ns'] / 1000:>6.0f}/{h_compute:<6.0f} {comp['launch_ns'] / 1000:>5.0f}/{h_launch:<5.0f}")
        recorded[name] = {k: h[k] for k in ("length_us", "by_bound_us", "by_edge_type_us", "edges")}
        if c["length_ns"] != span:
            failures.append(f"{name}: cutrace's path {c['length_ns']} ns, span {span} ns")
        if h["length_us"] * 1000 > span + 1000:
            failures.append(f"{name}: HTA's path {h['length_us']} µs is longer than the span")
        if name == "simple_add":
            if not (comp["compute_ns"] == 0 and h_compute > 0):
                failures.append(f"{name}: expected GPU compute on HTA's path only")
        elif abs(comp["compute_ns"] / 1000 - h_compute) > 2:
            failures.append(f"{name}: GPU compute {comp['compute_ns']} ns against HTA's {h_compute} µs")
    if record:
        path = os.path.join(root, "tests", "fixtures", "hta", "critical_path.json")
        with open(path, "w") as f:
            version = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('holistictraceanalysis'))"],
                                     check=True, capture_output=True, text=True).stdout.strip()
            json.dump({"hta": f"holistictraceanalysis {version} (PyPI), HTA_DISABLE_NS_ROUNDING=1",
                       "traces": recorded},
                      f, indent=1, sort_keys=True)
            f.write("\n")
    if failures:
        raise SystemExit("\n".join(failures))


main()
