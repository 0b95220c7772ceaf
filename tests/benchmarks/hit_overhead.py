"""Per-call overhead over eager on the cache-hit path, dynview against torch.compile, same run.

Two workloads, both with backend "eager" so the graph itself costs what eager costs:
  add: x + y on small tensors;  mlp: a functional 3-layer MLP with the weights as arguments.
A third line times the MLP on a dynamic-shape entry (first called with two batch sizes, so both
engines compiled a graph symbolic in the batch; timed with a third): its shape guards run in C++.
A fourth scales the MLP's output by a float argument first called with two values (a symbolic float:
its guards, type and not NaN, run in C++; the transformed code passes it as a 0-d tensor).
overhead = (compiled call time - eager call time), medians of interleaved timed blocks.
A line `hit_overhead_float_input_ratio_vs_torch_dynamo` gives the fourth's ratio alone (the transformed
code of both engines makes a tensor of the float on every call, which the first three do not pay).
Headline: hit_overhead_ratio_vs_torch_dynamo = dynview overhead / TorchDynamo overhead (the largest of the first three);
then the same headline on CPython 3.12 and 3.13 (their .venv-X.Y from `make test`), one line each.
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import dynview  # noqa: E402

N = int(os.environ.get("DV_BENCH_N", "20000"))
BLOCKS = 7


def add(x, y):
    return x + y


def mlp(x, w1, b1, w2, b2, w3, b3):
    h = torch.relu(x @ w1 + b1)
    h = torch.relu(h @ w2 + b2)
    return h @ w3 + b3


def scaled_mlp(x, scale, w1, b1, w2, b2, w3, b3):
    return mlp(x, w1, b1, w2, b2, w3, b3) * scale


def per_call(fns, args, n=N):
    """Median seconds per call of each function in `fns`, timed in interleaved blocks so that
    drift of the machine affects every variant alike (also used by break_overhead.py)."""
    for fn in fns:
        for _ in range(200):
            fn(*args)
    samples = [[] for _ in fns]
    for _ in range(BLOCKS):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(n):
                fn(*args)
            samples[i].append((time.perf_counter() - t0) / n)
    return [statistics.median(s) for s in samples]


def main():
    torch.manual_seed(0)
    cases = {
        "add": (add, (torch.randn(8), torch.randn(8))),
        "mlp": (mlp, (torch.randn(4, 16), torch.randn(16, 32), torch.randn(32), torch.randn(32, 32),
                      torch.randn(32), torch.randn(32, 8), torch.randn(8))),
    }
    w = cases["mlp"][1][1:]
    cases["mlp, dynamic batch"] = (mlp, (torch.randn(6, 16), *w))
    cases["mlp, changing float scale"] = (scaled_mlp, (cases["mlp"][1][0], 0.25, *w))
    prime = {"mlp, dynamic batch": [(torch.randn(2, 16), *w), (torch.randn(3, 16), *w)],
             "mlp, changing float scale": [(cases["mlp"][1][0], 0.5, *w), (cases["mlp"][1][0], 0.75, *w)]}
    ratios = []
    for name, (fn, args) in cases.items():
        torch._dynamo.reset()
        dynview.reset()
        td = torch.compile(fn, backend="eager")
        dv = dynview.compile(fn, backend="eager")
        for a in prime.get(name, []):
            td(*a)
            dv(*a)
        torch.testing.assert_close(td(*args), fn(*args))
        torch.testing.assert_close(dv(*args), fn(*args))
        eager, t_td, t_dv = per_call([fn, td, dv], args)
        o_td, o_dv = t_td - eager, t_dv - eager
        if name == "mlp, changing float scale":
            float_line = f"hit_overhead_float_input_ratio_vs_torch_dynamo: {o_dv / o_td:.3f}"
        else:
            ratios.append(o_dv / o_td)
        print(f"{name}: eager {eager * 1e6:.2f} us | torch.compile {t_td * 1e6:.2f} us (overhead {o_td * 1e6:.2f} us)"
              f" | dynview {t_dv * 1e6:.2f} us (overhead {o_dv * 1e6:.2f} us) | ratio {o_dv / o_td:.3f}")
    print(float_line)
    line = f"hit_overhead_ratio_vs_torch_dynamo: {max(ratios):.3f}"
    print(line)
    return line


if __name__ == "__main__":
    own = main()
    if not os.environ.get("DV_BENCH_CHILD"):  # the same headline on the other CPython versions
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
        import other_pythons  # noqa: E402
        other_pythons.headline_per_version(os.path.abspath(__file__), "hit_overhead_ratio_vs_torch_dynamo", own)
