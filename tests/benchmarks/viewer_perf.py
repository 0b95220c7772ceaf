"""The viewer on a big trace: start to first frame, frame time while scrubbing, memory.

Writes (or reuses) the synthetic 10M-step trace of tests/tools/synth_trace.cpp, then runs
`dynview TRACE --bench-scrub 600` under xvfb-run (Mesa's software GL): the viewer opens the trace
(index and events only, on a thread while the window is created), draws its first frame, then
moves the cursor across the whole run one frame at a time (a sweep plus random jumps, as when
dragging the timeline; chunks are decoded by the loader thread, latest request wins) and reports
the CPU time per frame (p50/p95/max), the peak RSS, and the time from process start to the first
frame. Reference, same run: `dynview stats` on the same trace (opening it without any window).
Goals: open <= 150 ms, frame p95 <= 6 ms, RSS <= 256 MB. Last line `viewer_open_ms: <x>` (median
of 5 starts).
"""
import json
import os
import shutil
import statistics
import subprocess

from trace_open import CLI, synthetic_trace


def main():
    cli = CLI
    path = synthetic_trace()
    xvfb = [shutil.which("xvfb-run"), "-a", "-s", "-screen 0 1600x1000x24"] if not os.environ.get("DISPLAY") else []
    stats = []
    for _ in range(5):
        out = subprocess.run([cli, "stats", path, "--json", "--no-verify"], capture_output=True, text=True, check=True)
        stats.append(json.loads(out.stdout)["open_ms"])
    runs = []
    for i in range(5):
        out = subprocess.run([*xvfb, cli, path, "--bench-scrub", "600" if i == 0 else "5"], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    scrub = runs[0]
    open_ms = statistics.median(r["first_frame_ms"] for r in runs)
    print(f"trace: {path} ({os.path.getsize(path)} bytes, {scrub['steps']} steps)")
    print(f"reference: dynview stats opens it in {statistics.median(stats):.1f} ms (median of 5, in-process)")
    print(f"start to first frame: {open_ms:.1f} ms (median of 5; goal <= 150; includes creating the GL window)")
    ph = {k: statistics.median(r["phases_ms"][k] for r in runs) for k in ("display", "window", "trace open")}
    print(f"  of which: display connection (GLFW init: X11, input method) {ph['display']:.1f} ms, "
          f"GL window + context (GLX, Mesa driver) {ph['window'] - ph['display']:.1f} ms, "
          f"ImGui init + waiting for the trace {ph['trace open'] - ph['window']:.1f} ms, "
          f"first frame (layout, draw, swap) {open_ms - ph['trace open']:.1f} ms")
    print(f"scrubbing {scrub['frames']} frames: CPU per frame p50 {scrub['frame_cpu_ms_p50']:.2f} ms, "
          f"p95 {scrub['frame_cpu_ms_p95']:.2f} ms (goal <= 6), max {scrub['frame_cpu_ms_max']:.2f} ms")
    print(f"peak RSS: {scrub['peak_rss_mb']:.1f} MB (goal <= 256)")
    print(f"viewer_open_ms: {open_ms:.1f}")


if __name__ == "__main__":
    main()
