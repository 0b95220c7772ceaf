"""Plain Python inside compiled functions, written the way model libraries write it (issue 14's
constructs): imports inside functions, compile-time checks, containers and objects. Registered
like engine_cases.py and run by test_engine_cases.py against eager and torch._dynamo.explain."""
import io

import torch
import torch.nn as nn

from engine_cases import case, module_case

# ---- imports inside functions (of modules already imported) ----
@case((3,))
def import_inside(x):
    import math
    return x * math.pi


@case((3,))
def import_from_inside(x):
    from torch.nn import functional as F
    return F.relu(x) + 1


@case((2, 3))
def import_dotted_inside(x):
    import torch.nn.functional
    return torch.nn.functional.softmax(x, dim=-1)


@case((3,))
def import_from_submodule_attr(x):
    from math import sqrt, tau
    return x * sqrt(2.0) + tau


@case((4,))
def import_guarded_by_try(x):
    try:
        import torch.fx
        have_fx = True
    except ImportError:
        have_fx = False
    return x + 1 if have_fx else x - 1


# ---- compile-time checks: model code takes its compile-friendly path ----
# Both paths compute the same value, as in model libraries; the eager path has a graph break, so the
# graph and break counts (against torch._dynamo.explain) show which path the capture took.
_SINK = io.StringIO()


@case((3,))
def is_compiling_branch(x):
    if torch.compiler.is_compiling():
        return x + 1
    print("eager path", file=_SINK)
    return x + 1


@case((3,))
def dynamo_is_compiling_branch(x):
    if not torch._dynamo.is_compiling():
        print("eager path", file=_SINK)
    return x * 2


@case((3,))
def jit_is_scripting_branch(x):
    if torch.jit.is_scripting() or torch.jit.is_tracing():
        print("scripting path", file=_SINK)
    return x + 1


def _hf_style_is_compiling():
    # transformers.utils.is_torchdynamo_compiling, as that library writes it
    try:
        import torch
        return torch.compiler.is_compiling()
    except Exception:
        try:
            import torch._dynamo as dynamo
            return dynamo.is_compiling()
        except Exception:
            return False


@case((2, 2))
def library_is_compiling_helper(x):
    if not _hf_style_is_compiling():
        print("eager path", file=_SINK)
    return x.sum(0)


class ImportInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        from torch.nn.functional import gelu
        return gelu(self.lin(x))


module_case(ImportInForward, (2, 4))
