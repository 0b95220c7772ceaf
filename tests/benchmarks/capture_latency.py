"""First-call time (capture + FX graph + eager backend) for dynview and TorchDynamo, same run.

Workloads: a 200-op straight-line function, and an nn.Module MLP (4 Linear + GELU + LayerNorm).
Each first call runs after a reset of both engines on a fresh function object (so no cache is
reused); the median of REPEAT first calls is kept. Headline:
capture_speedup_vs_torch_dynamo = min over workloads of (TorchDynamo time / dynview time); then the
same headline on CPython 3.12 and 3.13 (their .venv-X.Y from `make test`), one line each.
"""
import os
import statistics
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import dynview  # noqa: E402

REPEAT = int(os.environ.get("DV_BENCH_REPEAT", "5"))


def make_straight_line(n_ops=200):
    lines = ["def straight(x, y):", "    a = x"]
    ops = ["a = a + y", "a = a * 1.5", "a = torch.sin(a)", "a = a - x", "a = torch.relu(a)",
           "a = a / 2.0", "a = torch.tanh(a)", "a = a @ w_eye"]
    for i in range(n_ops):
        lines.append("    " + ops[i % len(ops)])
    lines.append("    return a")
    src = "\n".join(lines).replace("a @ w_eye", "a * y")
    ns = {"torch": torch}
    exec(compile(src, "<straight_line>", "exec"), ns)
    return ns["straight"]


class MLP(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(4)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.norm(x)


def fresh(fn):
    """A new function object with a new code object: nothing cached anywhere."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name)
    code = code.replace(co_consts=code.co_consts + (object(),))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def first_call(compile_fn, make, args):
    times = []
    for _ in range(REPEAT):
        torch._dynamo.reset()
        dynview.reset()
        target = make()
        t0 = time.perf_counter()
        out = compile_fn(target)(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    torch.manual_seed(0)
    straight = make_straight_line()
    x, y = torch.randn(16, 16), torch.randn(16, 16)
    model = MLP().eval()
    xm = torch.randn(8, 64)

    def make_module():
        m = MLP().eval()
        m.load_state_dict(model.state_dict())
        m.forward = types.MethodType(fresh(MLP.forward), m)
        return m

    workloads = {
        "straight_line_200": (lambda: fresh(straight), (x, y), straight(x, y)),
        "nn_module_mlp": (make_module, (xm,), model(xm)),
    }
    speedups = []
    for name, (make, args, ref) in workloads.items():
        t_td, out_td = first_call(lambda f: torch.compile(f, backend="eager"), make, args)
        t_dv, out_dv = first_call(lambda f: dynview.compile(f, backend="eager"), make, args)
        torch.testing.assert_close(out_td, ref)
        torch.testing.assert_close(out_dv, ref)
        speedups.append(t_td / t_dv)
        print(f"{name}: torch.compile {t_td * 1e3:.1f} ms | dynview {t_dv * 1e3:.1f} ms | speedup {t_td / t_dv:.1f}x")
    line = f"capture_speedup_vs_torch_dynamo: {min(speedups):.1f}"
    print(line)
    return line


if __name__ == "__main__":
    own = main()
    if not os.environ.get("DV_BENCH_CHILD"):  # the same headline on the other CPython versions
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
        import other_pythons  # noqa: E402
        other_pythons.headline_per_version(os.path.abspath(__file__), "capture_speedup_vs_torch_dynamo", own)
