"""dynview demo: compile a small PyTorch model with dynview, check it against eager, and print
dynview.explain -- graphs, graph breaks with their reasons, guards -- next to what
torch._dynamo.explain reports for the same code. Then show the bytecode model: dynview's C++
disassembler against CPython's `dis`, with and without Python.
"""
import dis
import io
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynview
from dynview import _C

warnings.filterwarnings("ignore")


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.proj(self.norm(x))
        return x + self.mlp(self.norm(x))


class TinyModel(nn.Module):
    def __init__(self, d=32, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return F.log_softmax(self.head(x.mean(dim=1)), dim=-1)


def clip_if_large(x):
    y = x * 2
    if y.abs().max() > 3:      # data-dependent: a graph break, as in torch.compile
        y = y.clamp(-3, 3)
    return y.sum(dim=-1)


def find_cli():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("DYNVIEW_BIN"), os.path.join(here, "..", "..", "build", "dynview"),
                 shutil.which("dynview")):
        if cand and os.path.exists(cand):
            return cand
    return None


def main():
    torch.manual_seed(0)
    model = TinyModel().eval()
    x = torch.randn(4, 8, 32)

    print("=== dynview.compile(model) ===")
    compiled = dynview.compile(model, backend="eager")
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    compiled(x)
    hits = sum(e["hits"] for e in _C.cache_entries(TinyModel.forward.__code__))
    print(f"output matches eager: True; second call was a cache hit: {hits == 1}")

    print("\n=== dynview.explain(model)(x) ===")
    ours = dynview.explain(model)(x)
    print(ours)
    ref = torch._dynamo.explain(model)(x)
    print(f"torch._dynamo.explain: graph_count={ref.graph_count}, break reasons={len(ref.break_reasons)}"
          f"  |  dynview: graph_count={ours.graph_count}, graph breaks={ours.graph_break_count}")

    print("\n=== dynview.explain(clip_if_large)(x) -- a data-dependent branch ===")
    e = dynview.explain(clip_if_large)(torch.randn(3, 5))
    for b in e.break_reasons:
        print(f"{b.break_id}: {b.reason}\n  hint: {b.hint}\n  at {b.user_stack[-1]}")

    print("\n=== bytecode model (core/) ===")
    ref_listing = io.StringIO()
    dis.dis(clip_if_large, file=ref_listing)
    ours_listing = dynview.disassemble(clip_if_large)
    print(ours_listing)
    same = ours_listing == ref_listing.getvalue()
    print(f"dynview.disassemble identical to dis.dis: {same}")
    cli = find_cli()
    if cli:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(_C.code_json(clip_if_large))
        text = subprocess.run([cli, "disasm", f.name], capture_output=True, text=True, check=True).stdout
        os.unlink(f.name)
        print(f"`dynview disasm` (no Python) identical to dis.dis: {text == ref_listing.getvalue()}")
    code = dynview.reassemble(clip_if_large)
    identical = all(getattr(code, a) == getattr(clip_if_large.__code__, a)
                    for a in ("co_code", "co_linetable", "co_exceptiontable", "co_stacksize"))
    print(f"re-assembled code object byte-identical: {identical}")

    print("\n=== a recorded run: dynview.record -> run.dyn -> `dynview explain` ===")
    dynview.reset()
    trace_path = os.path.join(os.environ.get("DYNVIEW_DEMO_DIR", tempfile.gettempdir()), "dynview_demo.dyn")
    with dynview.record(trace_path) as rec:
        m = dynview.compile(model, backend="eager")
        m(x)
        m(x)
        m(x.double().float()[:2])          # another batch size: a recompile
        dynview.compile(clip_if_large, backend="eager")(torch.randn(3, 5))
    t = dynview.load_trace(trace_path)
    print(f"recorded {t.num_steps} steps, {len(t.compiles)} compiles, {len(t.chunks)} chunks, "
          f"{os.path.getsize(trace_path)} bytes -> {trace_path}")
    # the model twice (a recompile for the batch size), clip_if_large split at its branch + the resume function
    ok_trace = t.problems == [] and len(t.compiles) == 4
    if cli:
        for args in (["explain", trace_path], ["recompiles", trace_path],
                     ["check", trace_path, "--max-graph-breaks", "1", "--max-recompiles", "1"]):
            out = subprocess.run([cli, *args], capture_output=True, text=True)
            print(f"$ dynview {' '.join(args)}\n{out.stdout}")
            ok_trace &= out.returncode == 0
        ok_trace &= show_viewer(cli, trace_path)
    return 0 if same and identical and ok_trace else 1


def show_viewer(cli, trace_path):
    """Opens the viewer on the trace; without a display, writes a screenshot of it (xvfb-run)."""
    if os.environ.get("DISPLAY") and not os.environ.get("DYNVIEW_DEMO_NO_WINDOW"):
        print(f"$ dynview {trace_path}   (close the window to finish)")
        return subprocess.run([cli, trace_path]).returncode == 0
    shot = os.path.splitext(trace_path)[0] + ".png"
    xvfb = shutil.which("xvfb-run")
    cmd = [cli, trace_path, "--select", "compile:1", "--screenshot", shot]
    out = subprocess.run(([xvfb, "-a", "-s", "-screen 0 1600x1000x24"] if xvfb else []) + cmd, capture_output=True, text=True)
    print(f"$ dynview {' '.join(cmd[1:])}   (no display: the viewer rendered offscreen)\n"
          f"{out.stderr.strip() or 'wrote ' + shot}")
    return out.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
