"""What recording costs a capture.

Captures every model case of the engine corpus (the nn.Modules of tests/python/engine_cases.py;
first call = capture + FX + eager backend) in three modes, interleaved, in one process:
recording off, a do-nothing observer (the engine producing its events), and writing a .dyn trace.
Prints the median capture time per mode, the recorder's hot path in ns per step event (measured in
C++), bytes per step on disk; last line `record_slowdown: <x>` = trace / off (goal <= 1.15, with
<= 6 bytes per step).
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
    steps = nbytes = 0
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
                steps, nbytes = st["steps"], os.path.getsize(path)
                os.unlink(path)
    med = {k: statistics.median(v) for k, v in times.items()}
    hot = dynview._C._bench_record_step(os.path.join(tmp, "hot.dyn"), 51, 20000)
    print(f"cases: {len(cases)}, steps per capture pass: {steps}, repetitions: {REPS}")
    for k, v in med.items():
        print(f"capture {k:14s} {v * 1e3:9.1f} ms   ({v / max(1, steps) * 1e9:7.0f} ns per step)")
    print(f"events without recording: {med['null observer'] / med['off']:.3f}x")
    print(f"recorder hot path: {hot:.1f} ns per step event (median of 51 batches of 20000)")
    print(f"trace size: {nbytes} bytes, {nbytes / max(1, steps):.2f} bytes per step (goal <= 6)")
    print(f"record_slowdown: {med['trace'] / med['off']:.3f}")


if __name__ == "__main__":
    main()
