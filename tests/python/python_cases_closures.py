"""Cases for closures made in the frame that are alive at a graph break (issue 14): inner functions
reading the frame's variables, lambdas over locals and loop variables, closures made by inlined
helpers, decorators made in the frame, nested closures, `nonlocal` writes before and after the
split, a closure over `self` in a forward, class bodies. TorchDynamo splits such frames (the
transformed code rebuilds the closure over the frame's cells and passes the cells to the resume
function); so must dynview. Appended to python_cases.CASES; each runs against eager and
torch._dynamo.explain."""
import functools
import io

import torch
import torch.nn as nn

from python_cases import case, module_case

_LOG = io.StringIO()  # where the breaking prints go (print is a graph break in both engines)


@case((3,), extra=lambda seed: [2])
def inner_reads_argument_and_local(x, n):
    def inner(y):
        return y * n + x
    y = inner(x)
    print("hi", file=_LOG)
    return inner(y)


@case((4,))
def lambda_over_graph_tensor(x):
    bias = x.sum()
    shift = lambda t: t - bias  # noqa: E731
    h = shift(x.relu())
    print("shifted", file=_LOG)
    return shift(h) * 2


@case((3,))
def lambdas_over_loop_variable(x):
    fns = []
    for i in range(3):
        fns.append(lambda t: t + i)  # every lambda sees the last i, as in eager
    y = x * 2
    print("built", len(fns), file=_LOG)
    return [f(y) for f in fns]


def _apply(fn, t):
    return fn(t)


def _noisy(t):
    print("noisy", file=_LOG)
    return t + 1


@case((3,))
def closure_on_stack_at_break(x):
    k = x.mean()

    def scale(t):
        return t * k
    return _apply(scale, _noisy(x))


@case((3,))
def nested_closures(x):
    n = 3

    def outer(y):
        def innermost(z):
            return z * n + y
        return innermost(y + 1)
    a = outer(x)
    print("outer", file=_LOG)
    return outer(a)


def _make_adder(b):
    def add(t):
        return t + b
    return add


@case((3,))
def closure_made_by_inlined_helper(x):
    add = _make_adder(x.sum())
    y = add(x)
    print("made", file=_LOG)
    return add(y)


@case((3,))
def decorator_made_in_frame(x):
    calls = []

    def logged(fn):
        def wrapper(*args):
            calls.append(len(args))
            return fn(*args)
        return wrapper

    @logged
    def double(t):
        return t * 2
    y = double(x)
    print("logged", file=_LOG)
    return double(y), calls


@case((3,))
def wraps_decorator_made_in_frame(x):
    seen = []

    def traced(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            seen.append(fn.__name__)
            return fn(*args, **kwargs)
        return wrapper

    @traced
    def project(t, scale=2.0):
        """Scales t."""
        return t * scale
    y = project(x)
    print("traced", file=_LOG)
    return project(y, scale=0.5), seen, project.__name__, project.__doc__


@case((3,))
def cell_rebound_after_split(x):
    scale = 2

    def mul(t):
        return t * scale
    y = mul(x)
    print("rebinding", file=_LOG)
    scale = 5
    return mul(y)


@case((3,))
def nonlocal_counter_across_split(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count
    y = bump(x)
    print("bumped", file=_LOG)
    y = bump(y)
    return y, count


@case((3,))
def resumed_code_writes_cell_inner_reads(x):
    offset = 1.0

    def read(t):
        return t + offset
    a = read(x)
    print("before", file=_LOG)
    offset = offset * 3
    b = read(a)
    return a, b, offset


@case((3,))
def break_inside_closure_call(x):
    w = x.abs() + 1

    def step(t):
        print("step", file=_LOG)
        return t * w
    return step(x) + 1


@case((3,))
def recursive_inner_function(x):
    def power(t, k):
        return t if k <= 1 else t * power(t, k - 1)
    y = power(x, 2)
    print("power", file=_LOG)
    return power(y, 3)


@case((3,))
def closures_in_a_dict(x):
    eps = 1e-3
    hooks = {"pre": lambda t: t + eps, "post": lambda t: t * 2 - eps}
    y = hooks["pre"](x)
    print("hooks", file=_LOG)
    return hooks["post"](y)


@case((3,))
def partial_of_closure(x):
    m = x.max()

    def clamp_to(t, lo):
        return torch.clamp(t, min=lo) * m
    lower = functools.partial(clamp_to, lo=-0.5)
    y = lower(x * 3)
    print("clamped", file=_LOG)
    return lower(y - 1)


@case((3,))
def closure_unbound_at_break(x):
    def late(t):
        return t * later  # assigned after the split

    y = x + 1
    print("unbound yet", file=_LOG)
    later = 4
    return late(y)


def _factory():
    base = 0.5

    def scaled_by_free_variable(x):
        def inner(t):
            return t * base + 1
        y = inner(x)
        print("free", file=_LOG)
        return inner(y)
    return scaled_by_free_variable


case((3,))(_factory())


@case((3,))
def class_body_in_frame(x):
    k = 3

    class Cfg:
        scale = k
    return x * Cfg.scale


@case((3,))
def class_body_after_graph(x):
    y = x.sin()

    class Cfg:
        scale = 2
    return y * Cfg.scale


class ClosureOverSelf(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 0.5

    def forward(self, x):
        def act(t):
            return torch.relu(self.lin(t)) * self.scale
        h = act(x)
        print("forward", file=_LOG)
        return act(h) + h


module_case(ClosureOverSelf, (2, 4))


# ---- a helper of this module calling functions made in another (python_cases_library's
# closure_made_there_called_here): what they read are their own module's globals, not this one's ----
_OFFSET = 100.0


def apply_to_each(fn, xs):
    return [fn(x) for x in xs] + [_OFFSET]
