"""Plain Python inside compiled functions, written the way model libraries write it (issue 14's
constructs): imports inside functions, compile-time checks, containers and objects. Run by
test_python_cases.py against eager (results, exceptions and mutated arguments) and against
torch._dynamo.explain (graphs and breaks)."""
import io

import torch
import torch.nn as nn

CASES = []


def _maker(shapes, extra):
    def make(seed):  # fresh objects for every call, so mutations can be compared with eager's
        g = torch.Generator().manual_seed(seed)
        args = [torch.randn(*s, generator=g) for s in shapes]
        return args + (list(extra(seed)) if extra is not None else [])
    return make


def case(*shapes, extra=None):
    """Registers fn; its arguments: tensors of `shapes`, then the objects extra(seed) makes."""
    def deco(fn):
        CASES.append((fn.__name__, fn, _maker(shapes, extra)))
        return fn
    return deco


def module_case(build, *shapes, extra=None):
    torch.manual_seed(0)
    m = build()
    CASES.append((type(m).__name__, m, _maker(shapes, extra)))


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


# ---- dicts: made in the trace, passed in, and the frame's own **kwargs ----
def _opts(seed):
    return [{"scale": 2.0, "shift": 1, "mode": "add"}]


@case((3,))
def dict_pop_setdefault_in_trace(x):
    d = {"a": x, "b": x * 2}
    a = d.pop("a")
    c = d.pop("missing", None)
    d.setdefault("c", x + 3)
    d.setdefault("b", x)
    return a, c, d


@case((3,))
def dict_update_and_get(x):
    d = dict(a=1)
    d.update({"b": x, "c": 2})
    d.update(e=x * 3)
    d.update([("f", 4)])
    return d.get("b") * d.get("c") + d.get("e") + d.get("zzz", 0) + d["f"]


@case((3,))
def dict_del_clear_copy(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    del d["b"]
    e = d.copy()
    d.clear()
    e["z"] = x * 5
    return len(d), e


@case((3,))
def dict_popitem_and_membership(x):
    d = {"first": x, "second": x * 2}
    k, v = d.popitem()
    return ("first" in d, "second" not in d, k, v + d["first"])


@case((3,), extra=_opts)
def dict_argument_mutated(x, opts):
    scale = opts.pop("scale")
    opts["seen"] = True
    opts.setdefault("shift", 10)
    return x * scale + opts["shift"]


@case((3,), extra=_opts)
def dict_argument_del_and_update(x, opts):
    del opts["mode"]
    opts.update(extra=3)
    return x + opts["extra"]


def _with_kwargs(x, **kwargs):
    return x * kwargs.pop("scale", 1.0) + kwargs.get("bias", 0)


@case((3,))
def kwargs_pop_in_callee(x):
    return _with_kwargs(x, scale=3.0, bias=1)


@case((2, 3))
def dict_comprehension_then_pop(x):
    d = {f"k{i}": x[i] for i in range(2)}
    first = d.pop("k0")
    return first + d["k1"]


class ImportInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        from torch.nn.functional import gelu
        return gelu(self.lin(x))


module_case(ImportInForward, (2, 4))
