"""An optimizer's step compiled as torch.compile's optimizer tutorial compiles it (a function that
calls opt.step()), dynview against torch.compile and eager in the same process and run, backend
"eager" for both engines (the graphs cost what eager costs, so the figures are the engines' own).

For each optimizer over an MLP (4 Linear layers of 256): the first call (capture + compile, from a
reset engine: _init_group, the step's graph) and the per-step time on cache hits (medians of
interleaved blocks, the gradients set once). Last line: optimizer_step_per_call_ratio_vs_torch_compile
= geomean(dynview per step / torch.compile's); before it, the first-call speedup (torch.compile's
first call / dynview's).
"""
import math
import os
import sys
import time

import torch
from torch import nn

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import dynview  # noqa: E402
from hit_overhead import per_call  # noqa: E402
from test_engine_behaviour import counting_dynamo  # noqa: E402

STEPS = int(os.environ.get("DV_BENCH_STEPS", "100"))  # steps per timed block (7 blocks each)
OPTIMIZERS = {
    "SGD(momentum)": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "Adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
    "AdamW(foreach)": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=1e-3),
}


def setup(make):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])
    model(torch.randn(8, 256)).sum().backward()  # gradients, kept for every step timed
    opt = make(model.parameters())
    return model, opt


def main():
    torch.set_num_threads(1)
    speedups, ratios = [], []
    print(f"{'optimizer':16} {'first call: dynview':>20} {'torch.compile':>14} {'per step: eager':>16} "
          f"{'dynview':>9} {'torch.compile':>14} {'graphs dv/tc':>13}")
    for name, make in OPTIMIZERS.items():
        firsts, fns, graphs = {}, {}, {}
        for engine in ("dynview", "torch.compile"):
            model, opt = setup(make)

            def step():
                opt.step()

            if engine == "dynview":
                dynview.reset()
                fn = dynview.compile(step, backend="eager")
                dynview._C.take_records()
            else:
                fn, count = counting_dynamo(step)  # (it resets TorchDynamo first)
            t0 = time.perf_counter()
            fn()
            firsts[engine] = time.perf_counter() - t0
            fns[engine] = fn
            graphs[engine] = (len([r for r in dynview._C.take_records() if r["graph"] is not None])
                              if engine == "dynview" else count[0])
        model, opt = setup(make)
        t_eager, t_dv, t_tc = per_call([opt.step, fns["dynview"], fns["torch.compile"]], (), n=STEPS)
        speedups.append(firsts["torch.compile"] / firsts["dynview"])
        ratios.append(t_dv / t_tc)
        print(f"{name:16} {firsts['dynview'] * 1e3:17.1f} ms {firsts['torch.compile'] * 1e3:11.1f} ms "
              f"{t_eager * 1e6:13.0f} us {t_dv * 1e6:6.0f} us {t_tc * 1e6:11.0f} us "
              f"{graphs['dynview']:>9}/{graphs['torch.compile']}")
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"optimizer_step_first_call_speedup_vs_torch_compile: {geo(speedups):.2f}")
    print(f"optimizer_step_per_call_ratio_vs_torch_compile: {geo(ratios):.2f}")


if __name__ == "__main__":
    main()
