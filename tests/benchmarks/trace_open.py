"""Opening a big trace and jumping around in it.

Writes a synthetic 10M-step trace with tests/tools/synth_trace.cpp (build/dv_synth_trace; shaped
like real captures: ~100k-step compiles, unrolled loops, inlined calls, values, guards, nodes,
breaks), then: the wall time of `dynview stats --no-verify` on it (process start to exit, which opens the
trace through its index; the in-process open time is printed too), and `dynview seek` for the p99
time to reach 1000 random steps (decode one chunk + rebuild the frames). Reference: reading the
whole file once (what a loader without an index must at least do). Goals: open <= 150 ms, p99
jump <= 10 ms. Last line `trace_open_ms: <x>` (median of 5 runs of `dynview stats`).
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("DV_BUILD", os.path.join(ROOT, "build"))
STEPS = int(os.environ.get("DV_TRACE_STEPS", "10000000"))


CLI = os.environ.get("DYNVIEW_BIN", os.path.join(BUILD, "dynview"))


def synthetic_trace():
    """The synthetic STEPS-step trace in the build folder, written by build/dv_synth_trace if missing."""
    path = os.path.join(BUILD, f"synthetic_{STEPS}_v3.dyn")
    if not os.path.exists(path):
        t0 = time.perf_counter()
        out = subprocess.run([os.path.join(BUILD, "dv_synth_trace"), path, "--steps", str(STEPS)],
                             check=True, capture_output=True, text=True)
        print(f"wrote {path}: {out.stdout.strip()} in {time.perf_counter() - t0:.1f} s")
    return path


def main():
    cli = CLI
    path = synthetic_trace()
    size = os.path.getsize(path)
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass
    read_ms = (time.perf_counter() - t0) * 1e3
    walls, opens = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        out = subprocess.run([cli, "stats", path, "--json", "--no-verify"], check=True, capture_output=True, text=True)
        walls.append((time.perf_counter() - t0) * 1e3)
        j = json.loads(out.stdout)
        opens.append(j["open_ms"])
    seek = json.loads(subprocess.run([cli, "seek", path, "--random", "1000", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    print(f"trace: {j['steps']} steps, {j['chunks']} chunks, {size / 1e6:.1f} MB, {j['bytes_per_step']:.2f} bytes/step")
    print(f"reference: reading the whole file once: {read_ms:.1f} ms")
    print(f"dynview stats (process wall time): median {statistics.median(walls):.1f} ms (goal <= 150)")
    print(f"open inside the process: median {statistics.median(opens):.1f} ms")
    print(f"jump to 1000 random steps: p50 {seek['p50_ms']:.2f} ms, p99 {seek['p99_ms']:.2f} ms, "
          f"max {seek['max_ms']:.2f} ms (goal p99 <= 10)")
    print(f"trace_open_ms: {statistics.median(walls):.1f}")


if __name__ == "__main__":
    sys.exit(main())
