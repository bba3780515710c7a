"""Writes tests/fixtures/kineto/tb_resnet50_2021_operators.json.gz from a public torch.profiler
trace of January 2021 (torch 1.8 nightly, the TensorBoard plugin's first ResNet-50 sample), in
the layout torch wrote then: CPU ops under category `Operator` (`ProfilerStep#N` among them),
`Runtime`, `Kernel`, `Memcpy`, `Memset`, thread ids as strings (`"tid": "1890023232"`).

Source: pytorch/kineto, `tb_plugin/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz`
at commit 34d6ad534a947ebd4b2173e1d4dd0072cadb0d73 (the commit that added it).

The cut keeps `ProfilerStep#6` and `ProfilerStep#7`, every event that overlaps one of a few
short windows (the start of each step, both ends of the longest gap between kernels in each step, which
falls inside the step's `enumerate(DataLoader)` op, and the end of step 7) and the metadata
events, each event unchanged and in its original order.
The events are written as a bare JSON array, as the oldest Chrome traces of torch's profiler
were (no `schemaVersion`, no `traceEvents` member). Deterministic: the same bytes every run.

    git -C kineto show 34d6ad53:tb_plugin/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz \
        | gunzip > /tmp/worker0.json
    python3 tests/tools/make_old_kineto_fixture.py /tmp/worker0.json
"""
import gzip
import json
import sys

OUT = "tests/fixtures/kineto/tb_resnet50_2021_operators.json.gz"
STEPS = ("ProfilerStep#6", "ProfilerStep#7")


def main():
    with open(sys.argv[1]) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), int)]
    steps = [e for e in spans if e.get("name") in STEPS]
    assert len(steps) == 2, steps
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e.get("cat") == "Kernel")
    windows = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        windows.append((lo - 60, lo + 150))
        # The GPU's longest wait in the step: both its ends, with what ran around them.
        busy_end, longest = None, None
        for a, b in kernels:
            if busy_end is not None and a > busy_end and lo <= busy_end < hi:
                if longest is None or a - busy_end > longest[1] - longest[0]:
                    longest = (busy_end, a)
            busy_end = b if busy_end is None else max(busy_end, b)
        windows.append((longest[0] - 60, longest[0] + 10))
        windows.append((longest[1] - 10, longest[1] + 80))
    last = steps[-1]["ts"] + steps[-1]["dur"]
    windows.append((last - 80, last))

    def keep(e):
        if e.get("ph") == "M":
            return True
        if e.get("name") in STEPS:
            return True
        ts = e.get("ts")
        if not isinstance(ts, int) or e.get("cat") == "Trace":
            return False
        end = ts + e.get("dur", 0)
        return any(ts < hi and end > lo or lo <= ts < hi for lo, hi in windows)

    kept = [e for e in events if keep(e)]
    # One event a line, indented as torch indented them.
    body = "[\n  " + ",\n  ".join(json.dumps(e) for e in kept) + "\n]\n"
    with open(OUT, "wb") as f:
        f.write(gzip.compress(body.encode(), mtime=0))
    print(f"{OUT}: {len(kept)} events, {len(body)} bytes")


if __name__ == "__main__":
    main()
