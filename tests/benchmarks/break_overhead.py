"""Per-call overhead over eager of frames split at a graph break, dynview against torch.compile
(backend "eager"), same run.

Two workloads, each a 3-layer MLP whose weights are arguments:
  print: a print() between the layers (to a null stream): graph, print, resume function's graph;
  item:  an `.item()` check between the layers: graph, .item(), resume function (its float argument
         differs per call in real code; here the input is fixed, so both engines hit their caches).
overhead = (compiled call time - eager call time), medians of interleaved timed blocks.
Last line: break_overhead_ratio_vs_torch_dynamo = dynview overhead / TorchDynamo overhead (max of the two).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import dynview  # noqa: E402
from hit_overhead import per_call  # noqa: E402

N = int(os.environ.get("DV_BENCH_N", "5000"))
NULL = open(os.devnull, "w")


def mlp_print(x, w1, b1, w2, b2, w3, b3):
    h = torch.relu(x @ w1 + b1)
    print("hidden", file=NULL)
    h = torch.relu(h @ w2 + b2)
    return h @ w3 + b3


def mlp_item(x, w1, b1, w2, b2, w3, b3):
    h = torch.relu(x @ w1 + b1)
    if h.abs().max().item() > 1e6:
        raise ValueError("diverged")
    h = torch.relu(h @ w2 + b2)
    return h @ w3 + b3


def main():
    torch.manual_seed(0)
    args = (torch.randn(4, 16), torch.randn(16, 32), torch.randn(32), torch.randn(32, 32), torch.randn(32),
            torch.randn(32, 8), torch.randn(8))
    ratios = []
    for fn in (mlp_print, mlp_item):
        torch._dynamo.reset()
        dynview.reset()
        td = torch.compile(fn, backend="eager")
        dv = dynview.compile(fn, backend="eager")
        torch.testing.assert_close(td(*args), fn(*args))
        torch.testing.assert_close(dv(*args), fn(*args))
        e = dynview.explain(fn)(*args)
        torch._dynamo.reset()
        te = torch._dynamo.explain(fn)(*args)
        torch._dynamo.reset()
        td = torch.compile(fn, backend="eager")
        td(*args)
        dv = dynview.compile(fn, backend="eager")
        dv(*args)
        eager, t_td, t_dv = per_call([fn, td, dv], args, N)
        o_td, o_dv = t_td - eager, t_dv - eager
        ratios.append(o_dv / o_td)
        print(f"{fn.__name__}: graphs dynview {e.graph_count} / TorchDynamo {te.graph_count} | eager {eager * 1e6:.2f} us"
              f" | torch.compile {t_td * 1e6:.2f} us (overhead {o_td * 1e6:.2f} us)"
              f" | dynview {t_dv * 1e6:.2f} us (overhead {o_dv * 1e6:.2f} us) | ratio {o_dv / o_td:.3f}")
    print(f"break_overhead_ratio_vs_torch_dynamo: {max(ratios):.3f}")


if __name__ == "__main__":
    main()
