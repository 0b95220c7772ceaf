"""Importing a large TORCH_TRACE log: `dynview import` vs tlparse on the same log, same run.

The log is written once by torch.compile itself (TORCH_TRACE set) on a many-frame model: N
generated layers, each a function of ~20 tensor ops with a graph break in the middle (two frames
each), some called again with float64 (recompiles), compiled with aot_eager (AOT graphs in the log
too); it is kept in the build folder (build/import_bench_tt/, regenerated when missing). Then the
wall time of `dynview import LOG -o OUT.dyn` and of `tlparse LOG -o DIR --overwrite --no-browser`
(each process start to exit, median of 5). Goal: at least 2x faster than tlparse. Last line
`import_speedup_vs_tlparse: <x>`.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("DV_BUILD", os.path.join(ROOT, "build"))
CLI = os.environ.get("DYNVIEW_BIN", os.path.join(BUILD, "dynview"))
LAYERS = int(os.environ.get("DV_IMPORT_LAYERS", "160"))

MODEL = r'''
import sys
import torch

layers = int(sys.argv[1])
src = []
for i in range(layers):
    ops = "\n".join(f"    x = (x * {k + 1}.5).sin() + x.cos() * {k}" for k in range(5))
    ops2 = "\n".join(f"    y = torch.relu(y @ w) + y.mean() * {k}" for k in range(4))
    src.append(f"def layer{i}(x, w):\n{ops}\n    torch._dynamo.graph_break()\n    y = x\n{ops2}\n    return y\n")
ns = {"torch": torch}
exec(compile("\n".join(src), "many_layers.py", "exec"), ns)
w = torch.randn(8, 8)
for i in range(layers):
    f = torch.compile(ns[f"layer{i}"], backend="aot_eager")
    f(torch.randn(4, 8), w)
    if i % 4 == 0:
        f(torch.randn(4, 8, dtype=torch.float64), w.double())
'''


def big_log():
    d = os.path.join(BUILD, f"import_bench_tt_{LAYERS}")
    logs = [os.path.join(d, f) for f in os.listdir(d)] if os.path.isdir(d) else []
    if len(logs) == 1:
        return logs[0]
    shutil.rmtree(d, ignore_errors=True)
    script = os.path.join(BUILD, "import_bench_model.py")
    with open(script, "w") as f:
        f.write(MODEL)
    t0 = time.perf_counter()
    env = dict(os.environ, TORCH_TRACE=d)
    env.pop("TORCH_LOGS", None)
    subprocess.run([sys.executable, script, str(LAYERS)], env=env, check=True, stdout=subprocess.DEVNULL)
    log = os.path.join(d, os.listdir(d)[0])
    print(f"wrote {log}: {os.path.getsize(log) / 1e6:.1f} MB in {time.perf_counter() - t0:.0f} s (torch.compile, {LAYERS} layers)")
    return log


def wall(cmd, runs=5):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    tlparse = shutil.which("tlparse")
    if not tlparse:
        sys.exit("tlparse is needed (pip install tlparse; make deps installs it)")
    log = big_log()
    size = os.path.getsize(log)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.dyn")
        p = subprocess.run([CLI, "import", log, "-o", out], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        print(p.stderr.strip())
        ours = wall([CLI, "import", log, "-o", out])
        theirs = wall([tlparse, log, "-o", os.path.join(tmp, "tl"), "--overwrite", "--no-browser"])
        dyn_size = os.path.getsize(out)
    print(f"log: {size / 1e6:.1f} MB; .dyn: {dyn_size / 1e6:.2f} MB")
    print(f"dynview import: {ours * 1e3:.0f} ms ({size / 1e6 / ours:.0f} MB/s), median of 5")
    print(f"tlparse:        {theirs * 1e3:.0f} ms ({size / 1e6 / theirs:.0f} MB/s), median of 5")
    print(f"import_speedup_vs_tlparse: {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
