"""Hugging Face transformers models (tiny configs, random weights, offline): dynview against
torch.compile, same process and run, backend "eager" for both (the graphs cost what eager costs,
so the figures are the engines' own).

Run with model names to time only those. For each architecture: the first call (capture + compile, from a reset engine) and the per-call
time on cache hits (medians of interleaved blocks, eager timed beside them), plus graphs/breaks.
Last lines: hf_first_call_speedup_vs_torch_compile = geomean(torch.compile first call / dynview's)
(goal >= 5) and hf_per_call_ratio_vs_torch_compile = geomean(dynview per call / torch.compile's)
(goal <= 1.0).
"""
import logging
import math
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import torch  # noqa: E402

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import dynview  # noqa: E402
import transformers  # noqa: E402
from hit_overhead import per_call  # noqa: E402
from test_hf_models import MODELS  # noqa: E402

N = int(os.environ.get("DV_BENCH_N", "50"))


def first_call(fn, args):
    t0 = time.perf_counter()
    fn(**args)
    return time.perf_counter() - t0


def main():
    torch.set_num_threads(1)
    # Both engines' one-time set-up (imports, first compile) is paid before any model is timed.
    warm = torch.nn.Linear(4, 4)
    dynview.compile(warm, backend="eager")(torch.randn(2, 4))
    torch.compile(warm, backend="eager")(torch.randn(2, 4))
    first_ratios, call_ratios = [], []
    only = set(sys.argv[1:])
    for name in sorted(MODELS):
        if only and name not in only:
            continue
        kind, build, inputs = MODELS[name]
        torch.manual_seed(0)
        m = build(transformers).eval()
        args = inputs(0)
        with torch.no_grad():
            dynview.reset()
            torch._dynamo.reset()
            dv = dynview.compile(m, backend="eager")
            tc = torch.compile(m, backend="eager")
            t_dv = first_call(dv, args)
            t_tc = first_call(tc, args)
            e = dynview.explain(m)(**args)
            dynview.reset()
            dv = dynview.compile(m, backend="eager")
            dv(**args)
            eager, c_dv, c_tc = per_call([lambda: m(**args), lambda: dv(**args), lambda: tc(**args)], (), n=N)
        first_ratios.append(t_tc / t_dv)
        call_ratios.append(c_dv / c_tc)
        print(f"{name} ({kind}): graphs/breaks dynview {e.graph_count}/{e.graph_break_count} | first call dynview "
              f"{t_dv * 1e3:.0f} ms, torch.compile {t_tc * 1e3:.0f} ms ({t_tc / t_dv:.1f}x) | per call eager "
              f"{eager * 1e6:.0f} us, dynview {c_dv * 1e6:.0f} us, torch.compile {c_tc * 1e6:.0f} us "
              f"(ratio {c_dv / c_tc:.2f})", flush=True)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"hf_first_call_speedup_vs_torch_compile: {geo(first_ratios):.2f}")
    print(f"hf_per_call_ratio_vs_torch_compile: {geo(call_ratios):.2f}")


if __name__ == "__main__":
    main()
