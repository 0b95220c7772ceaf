"""What recording costs a capture.

Captures every model case of the engine corpus (the nn.Modules of tests/python/engine_cases.py;
first call = capture + FX + eager backend) in three modes, interleaved, in one process:
recording off, a do-nothing observer (the engine producing its events), and writing a .dyn trace.
Prints the median capture time per mode, the recorder's hot path in ns per step event (measured in
C++), and bytes per step on disk, split into the step records (the steps frames: opcode/arg/
offset/line columns, stack and locals deltas, value rows, keyframes; goal <= 6 B per step
compressed, <= 16 B raw) and the compile records (code objects, guards, graphs with their FX code,
breaks, cache events: a fixed cost per compile that the small model cases do not amortise). A
long capture (one compile of a 96-block residual model written with a Python loop) shows the
whole-file figure when steps dominate. Last line `record_slowdown: <x>` = trace / off (goal
<= 1.15).
"""
import os
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
warnings.filterwarnings("ignore")

import torch  # noqa: E402

import dynview  # noqa: E402
from engine_cases import CASES  # noqa: E402

REPS = int(os.environ.get("DV_BENCH_REPS", "7"))


class _Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.fc(self.norm(x))
        return x + torch.nn.functional.gelu(h) * 0.5


class _Deep(torch.nn.Module):  # long straight-line capture: 96 inlined blocks
    def __init__(self, d=16, n=96):
        super().__init__()
        self.blocks = torch.nn.ModuleList(_Block(d) for _ in range(n))

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = b(x) if i % 2 == 0 else x + b(x).relu()
        return x


def sizes(path):
    """(steps, file bytes, step-record bytes compressed, raw, compiles) of a trace."""
    t = dynview._C.TraceFile(path)
    ch = t.chunks()
    return (sum(c["steps"] for c in ch), os.path.getsize(path), sum(c["steps_zsize"] for c in ch),
            sum(c["steps_rsize"] for c in ch), sum(1 for _ in dynview.load_trace(path).compiles))


def capture_all(cases):
    dynview.reset()
    t0 = time.perf_counter()
    for name, fn, make, _ in cases:
        try:
            dynview.compile(fn, backend="eager")(*make(0))
        except Exception:
            pass
    return time.perf_counter() - t0


def main():
    torch.set_num_threads(1)
    cases = [c for c in CASES if isinstance(c[1], torch.nn.Module)]  # the model cases
    tmp = tempfile.mkdtemp()
    capture_all(cases)  # warm: imports, decoded code objects, torch caches
    times = {"off": [], "null observer": [], "trace": []}
    for r in range(REPS):
        for mode in ("off", "null observer", "trace"):
            if mode == "off":
                times[mode].append(capture_all(cases))
            elif mode == "null observer":
                dynview._C._null_observer(True)
                try:
                    times[mode].append(capture_all(cases))
                finally:
                    dynview._C._null_observer(False)
            else:
                path = os.path.join(tmp, f"run{r}.dyn")
                rec = dynview.record(path).start()
                try:
                    times[mode].append(capture_all(cases))
                finally:
                    st = rec.stop()
                if r == REPS - 1:
                    size = sizes(path)
                os.unlink(path)
    med = {k: statistics.median(v) for k, v in times.items()}
    hot_loop, null_loop, encode = dynview._C._bench_record_step(os.path.join(tmp, "hot.dyn"), 51, 20000)
    steps, nbytes, zsteps, rsteps, ncomp = size
    print(f"cases: {len(cases)}, steps per capture pass: {steps}, compiles: {ncomp}, repetitions: {REPS}")
    for k, v in med.items():
        print(f"capture {k:14s} {v * 1e3:9.1f} ms   ({v / max(1, steps) * 1e9:7.0f} ns per step)")
    print(f"events without recording: {med['null observer'] / med['off']:.3f}x")
    print(f"recorder hot path: {hot_loop - null_loop:.1f} ns per step event on the engine thread (goal <= 20): "
          f"a loop sending step events takes {hot_loop:.1f} ns per step to the recorder, {null_loop:.1f} to a "
          f"do-nothing observer (medians of 51 batches of 20000)")
    print(f"recorder background thread: {encode:.1f} ns per step (column encoding, zstd, write)")
    print(f"step records: {zsteps / steps:.2f} bytes per step on disk (goal <= 6), {rsteps / steps:.2f} raw (goal <= 16)")
    print(f"compile records and chunk headers: {(nbytes - zsteps) / ncomp:.0f} bytes per compile")
    print(f"whole file: {nbytes} bytes, {nbytes / steps:.2f} bytes per step")
    deep = _Deep().eval()
    x = torch.randn(4, 16)
    path = os.path.join(tmp, "deep.dyn")
    dynview.reset()
    with dynview.record(path):
        with torch.no_grad():
            torch.testing.assert_close(dynview.compile(deep, backend="eager")(x), deep(x))
    dsteps, dbytes, dz, dr, dcomp = sizes(path)
    print(f"long capture ({dcomp} compile, {dsteps} steps): step records {dz / dsteps:.2f} B/step "
          f"({dr / dsteps:.2f} raw), whole file {dbytes / dsteps:.2f} bytes per step")
    print(f"record_slowdown: {med['trace'] / med['off']:.3f}")


if __name__ == "__main__":
    main()
