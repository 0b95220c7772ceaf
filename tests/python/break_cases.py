"""Functions and modules with graph breaks, written the way people write them: print/logging,
.item()/.tolist()/.numpy(), data-dependent branches, unsupported calls; at the start, middle and end;
several per frame; inside helpers; inside `with torch.no_grad()`; inside loops and try blocks; with
lists, dicts, tuples, objects, closures and *args/**kwargs alive across the break. Used by
test_graph_breaks.py against eager and torch._dynamo.explain."""
import io
import logging
import functools
import itertools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CASES = []
SINK = io.StringIO()  # print(..., file=SINK): the break without the noise
log = logging.getLogger("break_cases")
log.addHandler(logging.NullHandler())
log.propagate = False


def case(*shapes):
    def deco(fn):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            return [torch.randn(*s, generator=g) for s in shapes]
        CASES.append((fn.__name__, fn, make))
        return fn
    return deco


def module_case(*shapes):
    def deco(build):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            return [torch.randn(*s, generator=g) for s in shapes]
        torch.manual_seed(0)
        CASES.append((build.__name__, build(), make))
        return build
    return deco


def show(*a):
    print(*a, file=SINK)


# ---- one break: where it is -------------------------------------------------------------------
@case((4,))
def print_middle(x):
    y = x * 2
    print("y", y.shape, file=SINK)
    return y + 1

@case((4,))
def print_start(x):
    print("start", file=SINK)
    return torch.relu(x) * 3

@case((4,))
def print_end(x):
    y = torch.sin(x) + 1
    print(y.sum().item() > 100, file=SINK)
    return y

@case((3, 4))
def item_middle(x):
    s = x.sum().item()
    return x * s

@case((3, 4))
def item_in_expression(x):
    return x / (x.abs().max().item() + 1.0)

@case((5,))
def tolist_then_use(x):
    y = x.relu()
    vals = y.tolist()
    return y * len(vals)

@case((2, 3))
def numpy_roundtrip(x):
    a = (x + 1).numpy()
    return torch.from_numpy(a * 2) + x

@case((4,))
def if_on_tensor(x):
    if x.sum() > 0:
        return x + 1
    return x - 1

@case((4,))
def if_on_tensor_else(x):
    y = x * 2
    if (y > 0).any():
        y = y + 1
    else:
        y = y - 1
    return y.cos()

@case((4,))
def while_cond_after(x):
    y = x.exp()
    if y.max() > 1.5:
        y = y / y.max()
    return y

@case((6,))
def logging_call(x):
    y = x.tanh()
    log.info("value %s", y.shape)
    return y * 2

@case((4,))
def show_helper_at_top(x):
    y = x + 1
    show(y.shape)
    return y


# ---- several breaks in one frame ---------------------------------------------------------------
@case((4,))
def two_prints(x):
    a = x + 1
    print("a", file=SINK)
    b = a * 2
    print("b", file=SINK)
    return b - 1

@case((4,))
def three_breaks(x):
    a = x.sin()
    print(1, file=SINK)
    b = a.cos()
    n = b.sum().item()
    c = b * n
    print(2, file=SINK)
    return c + 1

@case((3, 3))
def four_breaks(x):
    y = x @ x
    print("a", file=SINK)
    y = y.relu()
    print("b", file=SINK)
    y = y + 1
    print("c", file=SINK)
    y = y.sum(0)
    print("d", file=SINK)
    return y * 2

@case((4,))
def item_then_branch(x):
    m = x.mean().item()
    if m > 0:
        return x - m
    return x + m

@case((4,))
def branch_then_print(x):
    y = x * 3
    if y.sum() > 0:
        y = y + 1
    print(y.shape, file=SINK)
    return y


# ---- live values across the break -----------------------------------------------------------------
@case((4,), (4,))
def live_list(x, y):
    outs = [x + 1, y * 2]
    print(len(outs), file=SINK)
    outs.append(x - y)
    return outs

@case((4,), (4,))
def live_dict(x, y):
    d = {"a": x + 1, "b": y.relu()}
    print(sorted(d), file=SINK)
    return d["a"] * d["b"]

@case((4,))
def live_tuple(x):
    t = (x.sin(), x.cos(), 3)
    print("t", file=SINK)
    return t[0] + t[1] * t[2]

@case((4,))
def live_aliased_list(x):
    a = [x + 1]
    b = a
    print(len(a), file=SINK)
    b.append(x * 2)
    return len(a), a[0] + a[1]

@case((4,))
def live_constants(x):
    scale = 2.5
    name = "layer"
    n = 3
    y = x * scale
    print(name, file=SINK)
    return y * n, name

@case((4,))
def live_unused_tensor(x):
    tmp = x * 100
    y = x + 1
    print("y", file=SINK)
    tmp = y * 2
    return tmp

@case((4,))
def print_receives_graph_value(x):
    y = (x * 2).sum()
    print(y, file=SINK)
    return x + y

@case((4,))
def break_value_used_after(x):
    y = x.abs()
    r = str(y.shape)
    return y + len(r)

@case((4,), (4,))
def args_kwargs_alive(x, y):
    def inner(*args, **kwargs):
        return args, kwargs
    a, k = inner(x, y, scale=2)
    print(len(a), file=SINK)
    return a[0] * k["scale"] + a[1]

@case((4,))
def unpack_after_break(x):
    a, b = x.chunk(2)
    print("chunks", file=SINK)
    return torch.cat([b, a])

@case((4,))
def nested_call_args(x):
    y = x + 1
    return torch.add(y, print("inside", file=SINK) or 1.0)

@case((4,))
def break_inside_expression(x):
    return (x + 1) * (float(x.sum().item() > 0) + 1)

@case((4,))
def f_string_of_tensor_value(x):
    y = x.mean()
    msg = f"mean={y.item():.3f}"
    return x - y, msg.startswith("mean")

SCALE = 3.0

@case((4,))
def global_read_after(x):
    y = x * 2
    print("g", file=SINK)
    return y * SCALE


# ---- breaks in helpers (inlined calls break the caller at the call) ------------------------------
def helper_print(t):
    t = t * 2
    print("helper", file=SINK)
    return t + 1

def helper_item(t):
    return t * t.sum().item()

def helper_deep2(t):
    return helper_print(t) - 1

def helper_deep3(t):
    return helper_deep2(t.exp()) * 2

@case((4,))
def calls_helper_print(x):
    y = x.sin()
    z = helper_print(y)
    return z.cos()

@case((4,))
def calls_helper_item(x):
    return helper_item(x + 1) - 1

@case((4,))
def calls_helper_two_deep(x):
    return helper_deep2(x) + 1

@case((4,))
def calls_helper_three_deep(x):
    y = x / 2
    return helper_deep3(y) + y

@case((4,))
def helper_twice(x):
    a = helper_print(x)
    b = helper_print(a)
    return a + b

def branchy(t):
    if t.sum() > 0:
        return t * 2
    return -t

@case((4,))
def calls_branchy(x):
    return branchy(x - 0.1) + 1


# ---- blocks -------------------------------------------------------------------------------------
@case((4,))
def break_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("in block", file=SINK)
        y = y + 1
    return y * x

@case((4,))
def break_after_no_grad(x):
    with torch.no_grad():
        y = x * 2
    print("after", file=SINK)
    return y + x

@case((4,))
def break_in_enable_grad(x):
    x = x.requires_grad_(False)
    with torch.enable_grad():
        y = x + 1
        print("enable", file=SINK)
        z = y * 2
    return z

@case((4,))
def break_in_for_loop(x):
    for i in range(3):
        x = x + i
        print(i, file=SINK)
    return x

@case((4,))
def break_in_while_loop(x):
    i = 0
    while i < 2:
        x = x * 2
        print(i, file=SINK)
        i += 1
    return x

@case((4,))
def break_after_loop(x):
    for i in range(3):
        x = x + i
    print("done", file=SINK)
    return x * 2

@case((4,))
def break_in_try_finally(x):
    try:
        y = x + 1
        print("try", file=SINK)
    finally:
        y = y * 2
    return y

@case((4,))
def break_in_try_except(x):
    try:
        y = x.relu()
        print("try", file=SINK)
    except ValueError:
        y = x
    return y + 1

@case((4,))
def break_after_try(x):
    try:
        y = x + 1
    except ValueError:
        y = x
    print("after try", file=SINK)
    return y * 2


# ---- closures, cells and globals --------------------------------------------------------------------
def make_scaled(k):
    def scaled(x):
        y = x * k
        print("scaled", file=SINK)
        return y + k
    return scaled

scaled2 = make_scaled(2.0)

@case((4,))
def closure_break(x):
    return scaled2(x)

def make_tensor_closure(t):
    def f(x):
        y = x + t
        print("closure", file=SINK)
        return y * t
    return f

closure_tensor = make_tensor_closure(torch.linspace(0, 1, 4))

@case((4,))
def closure_tensor_break(x):
    return closure_tensor(x)

@case((4,))
def lambda_after_break(x):
    y = x + 1
    print("lambda", file=SINK)
    f = lambda t: t * 2  # noqa: E731
    return f(y)


# ---- modules --------------------------------------------------------------------------------------
class PrintingMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        print("hidden", h.shape, file=SINK)
        return self.fc2(h)

@module_case((2, 8))
def printing_mlp():
    return PrintingMLP()

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        y = self.lin(x)
        if y.mean() > 10:  # data-dependent: a break in the block's own frame
            y = y * 0
        return self.norm(x + y)

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(8) for _ in range(2)])
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)

@module_case((2, 8))
def nested_module_branch():
    return Stack()

class ItemGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        y = self.proj(x)
        gate = torch.sigmoid(y).mean().item()
        return y * gate

@module_case((3, 6))
def item_gate():
    return ItemGate()

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = PrintingMLP()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.inner(x)
        return self.out(torch.tanh(h))

@module_case((2, 8))
def module_calls_breaking_module():
    return Encoder()

class KwargsModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, **kwargs):
        y = self.lin(x)
        print(sorted(kwargs), file=SINK)
        return y * kwargs.get("scale", 1.0)

@module_case((2, 4))
def kwargs_module():
    return KwargsModule()


# ---- generators and comprehensions in the caller ---------------------------------------------------
def gen(xs):
    for t in xs:
        yield t * 2

@case((4,), (4,))
def generator_then_break(x, y):
    parts = list(gen([x, y]))
    print(len(parts), file=SINK)
    return parts[0] + parts[1]

@case((4,))
def comprehension_then_break(x):
    ys = [x * i for i in range(3)]
    print(len(ys), file=SINK)
    return sum(ys)


# ---- misc real idioms ----------------------------------------------------------------------------------
@case((4, 4))
def assert_with_item(x):
    y = x.softmax(-1)
    total = y.sum().item()
    assert math.isclose(total, 4.0, rel_tol=1e-4)
    return y

@case((4,))
def isfinite_check(x):
    y = x * 2
    if not torch.isfinite(y).all():
        raise ValueError("non-finite")
    return y

@case((3, 4))
def shape_print_and_reshape(x):
    b, n = x.shape
    print(f"batch {b}", file=SINK)
    return x.reshape(n, b)

@case((4,))
def max_item_clamp(x):
    hi = x.max().item()
    lo = x.min().item()
    return x.clamp(lo / 2, hi / 2)

@case((4,))
def return_from_break_call(x):
    y = x + 1
    return print("ret", file=SINK), y


# ---- more shapes of the same breaks ------------------------------------------------------------------
@case((2, 4))
def print_in_nested_expression(x):
    return torch.cat([x, x * (print("cat", file=SINK) or 2)], dim=0)

@case((4,))
def item_used_as_python_number(x):
    n = int(x.abs().sum().item()) % 3 + 1
    return x.repeat(n)[:4] * n

@case((4,))
def tolist_iterated(x):
    total = 0.0
    for v in x.tolist():
        total += v
    return x - total

@case((4,))
def branch_on_tensor_bool(x):
    flag = (x > 0).all()
    if flag:
        return x.log()
    return x.exp()

@case((4,))
def branch_not_on_tensor(x):
    y = x * 2
    if not (y < 100).any():
        return y
    return y + 1

@case((4,), (4,))
def branch_and_print_both_paths(x, y):
    if (x - y).sum() > 0:
        print("x wins", file=SINK)
        return x
    print("y wins", file=SINK)
    return y

@case((4,))
def early_return_after_item(x):
    if x.max().item() > 100:
        return x
    y = x.sigmoid()
    return y * 2

@case((3, 4))
def print_with_kwargs_call(x):
    y = F.softmax(x, dim=-1)
    print("softmax", y.shape, sep="|", end="\n", file=SINK)
    return y.sum(-1)

@case((4,))
def star_args_call_breaks(x):
    parts = ["a", "b"]
    print(*parts, file=SINK)
    return x * len(parts)

@case((4,))
def dict_comprehension_then_break(x):
    d = {k: x * i for i, k in enumerate(["a", "b", "c"])}
    print(list(d), file=SINK)
    return d["a"] + d["c"]

@case((4,))
def nested_containers_live(x):
    state = {"h": [x + 1, (x * 2, "tag")], "n": 2}
    print("state", file=SINK)
    return state["h"][0] + state["h"][1][0] * state["n"]

@case((4,))
def reassigned_argument_live(x):
    x = x * 3
    print("x", file=SINK)
    x = x + 1
    return x

@case((4,), (4,))
def unused_argument_dead(x, y):
    z = x + y
    print("z", file=SINK)
    return z * 2

@case((4,))
def none_and_bool_live(x):
    mask = None
    training = False
    y = x.relu()
    print("flags", file=SINK)
    if mask is None and not training:
        return y
    return y * 0

@case((4,))
def break_result_stored(x):
    y = x.abs()
    s = str(y.sum().item())
    return y, len(s) > 0

@case((4,))
def two_items(x):
    a = x.min().item()
    b = x.max().item()
    return (x - a) / (b - a + 1e-6)

@case((4,))
def print_then_no_grad(x):
    print("start", file=SINK)
    with torch.no_grad():
        y = x * 2
    return y + 1

@case((4,))
def no_grad_item(x):
    with torch.no_grad():
        s = (x * 2).sum().item()
    return x * s

@case((4,))
def set_grad_enabled_break(x):
    with torch.set_grad_enabled(False):
        y = x + 1
        print("set_grad", file=SINK)
        y = y * 3
    return y

def helper_with_kwargs(t, *, scale=1.0, shift=0.0):
    print("kw", file=SINK)
    return t * scale + shift

@case((4,))
def calls_helper_with_kwargs(x):
    y = x.exp()
    return helper_with_kwargs(y, scale=2.0, shift=1.0).log()

def helper_returns_pair(t):
    u = t + 1
    print("pair", file=SINK)
    return u, u * 2

@case((4,))
def unpack_helper_result(x):
    a, b = helper_returns_pair(x.sin())
    return a * b

class Helper:
    def __init__(self, k):
        self.k = k

    def apply(self, t):
        t = t * self.k
        print("method", file=SINK)
        return t - self.k

helper_obj = Helper(3.0)

@case((4,))
def calls_method_that_breaks(x):
    return helper_obj.apply(x + 1) * 2

class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        n = h.norm().item()
        return x + self.b(h) / (n + 1)

@module_case((2, 4))
def residual_item():
    return Residual()

class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = PrintingMLP()
        self.right = nn.Linear(8, 4)

    def forward(self, x):
        return self.left(x) + self.right(x)

@module_case((2, 8))
def two_branch_module_one_breaks():
    return Tower()

class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x, use_gate=True):
        y = self.lin(x)
        if use_gate and y.mean() > 0:
            y = y * torch.sigmoid(y)
        return y

@module_case((3, 5))
def gated_module():
    return Gated()


# ---- class bodies, comprehensions after a break ----
@case((4,))
def class_body_in_frame(x):
    y = x * 2
    class Scale:  # TorchDynamo breaks at the __build_class__ call and resumes after it
        k = 3
    return y * Scale.k

@case((4,))
def empty_class_body_in_frame(x):
    class Marker:  # an empty body: TorchDynamo traces it (one graph, no break)
        pass
    return x + 1, Marker.__name__

@case((4,))
def comprehension_after_break(x):
    z = x.sin() + 1
    if z.sum() > 0:
        z = z * 2
    w = [z.cos() + k for k in range(2)]
    return w[0] + w[1]


@case((4,))
def list_iterator_alive_across_a_print(x):
    scales = [0.5, 2.0, 3.0]
    it = iter(scales)
    y = x * next(it)
    print("first scale applied", file=SINK)
    return y * next(it)


@case((4,))
def tuple_iterator_of_tensors_alive_across_a_log(x):
    parts = iter((x.sin(), x.cos(), x.tanh()))
    first = next(parts)
    log.warning("took %d", 1)
    return first + next(parts)


@case((4,))
def iterator_taken_on_both_sides_of_two_breaks(x):
    parts = iter([x.sin(), x.cos(), x.exp(), x.tanh()])
    print("start", file=SINK)
    first = next(parts)
    print("first taken", file=SINK)
    rest = list(parts)
    return first * 2 + rest[0], len(rest), next(parts, None) is None


@case((4,))
def loop_over_an_iterator_after_a_break(x):
    it = iter((1.0, 2.0, 3.0))
    y = x * next(it)
    log.warning("scaled")
    for k in it:
        y = y + k
    return y, next(it, "exhausted")


# ---- many locals: 3.13's two-local instructions (LOAD_FAST_LOAD_FAST, ...) hold 4-bit indexes, and
# a resume function reorders the locals (what it takes first): a forward with many keyword arguments
# the way model libraries write them
@case((2, 4), (2, 4))
def many_keyword_arguments_forward(x, mask, scale=None, bias=None, head_mask=None, labels=None,
                                   use_cache=False, output_attentions=False, output_hidden_states=False,
                                   return_dict=True, position_ids=None, past=None, inputs_embeds=None,
                                   token_type_ids=None, encoder_states=None, encoder_mask=None, extra=None):
    hidden = x * mask
    if scale is not None:
        hidden = hidden * scale
    show("hidden", hidden.shape)
    out = hidden + mask
    states = (out, hidden) if output_hidden_states else (out,)
    return dict(out=out, states=states, bias=bias, head_mask=head_mask, labels=labels, use_cache=use_cache,
                attentions=output_attentions, return_dict=return_dict, position_ids=position_ids, past=past,
                inputs_embeds=inputs_embeds, token_type_ids=token_type_ids, encoder_states=encoder_states,
                encoder_mask=encoder_mask, extra=extra)


@case((4,))
def many_locals_live_across_a_break(x):
    cos, sin = x.cos(), x.sin()
    base = cos * sin
    a, b, c, d = base + 1, base + 2, base + 3, base + 4
    e, f, g, h = a * b, b * c, c * d, d * a
    i, j, k, m = e - f, f - g, g - h, h - e
    n, o, p, q = i.sum(), j.sum(), k.sum(), m.sum()
    log.info("half way: %s", n)
    p, q = q, p
    return a * b + p + q + n + o + c + d + e + f + g + h + i + j + k + m + x


# ---- lazy iterators and generators alive across a break: map, filter, zip and itertools.count/repeat
# are rebuilt in the resume function's call (map(fn, *rebuilt sources) ...), so a function with side
# effects runs once per item, when eager runs it; enumerate, itertools.chain/islice and generators
# are generators in TorchDynamo 2.13, which it cannot rebuild once started: the frame runs eagerly
@case((4,))
def map_of_a_lambda_alive_across_a_print(x):
    scaled = map(lambda t: t * 2, [x, x + 1, x + 2])
    first = next(scaled)
    print("first scaled", file=SINK)
    return first + next(scaled)


@case((4,))
def map_with_a_recording_function_across_a_print(x):
    seen = []

    def visit(t):
        seen.append(t.shape[0])
        return t.relu()

    outs = map(visit, [x.sin(), x.cos(), x.tanh()])
    first = next(outs)
    print("visited", len(seen), file=SINK)
    return first + sum(outs), len(seen)


@case((4,))
def map_of_a_builtin_over_numbers(x):
    weights = map(float, [1, 2, 3])
    y = x * next(weights)
    show("weighted once")
    return y * next(weights), list(weights)


@case((4,))
def map_used_up_before_a_print(x):
    acts = map(torch.sin, [x, x + 1])
    outs = list(acts)
    print("activations", len(outs), file=SINK)
    return outs[0] + outs[1], next(acts, None) is None


@case((4,))
def map_over_two_lists_of_tensors(x):
    sums = map(torch.add, [x, x + 1, x + 2], [x.sin(), x.cos(), x.exp()])
    first = next(sums)
    print("first sum", file=SINK)
    return first + sum(sums)


@case((4,))
def map_of_a_map_alive_across_a_print(x):
    acts = map(torch.relu, map(torch.neg, [x, x - 1, x + 1]))
    a = next(acts)
    print("first activation", file=SINK)
    return a + next(acts)


class MapOverProjections(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        projected = map(lambda proj: proj(x), (self.q, self.k, self.v))
        q = next(projected)
        print("q projected", file=SINK)
        k = next(projected)
        return q * k + next(projected)

@module_case((2, 4))
def map_over_projections_alive_across_a_print():
    return MapOverProjections()


@case((4,))
def filter_of_optional_tensors_alive_across_a_print(x):
    present = filter(lambda t: t is not None, [x.sin(), None, x.cos(), None])
    a = next(present)
    print("kept one", file=SINK)
    return a + next(present), list(present)


@case((4,))
def filter_none_over_numbers_across_a_print(x):
    nonzero = filter(None, [0, 1.5, 0.0, 2.0])
    y = x * next(nonzero)
    show("scaled")
    return y * next(nonzero)


@case((4,))
def zip_of_two_lists_consumed_on_both_sides_of_a_log(x):
    hidden = [x.sin(), x.cos(), x.exp()]
    gates = [x + 1, x + 2, x + 3]
    pairs = zip(hidden, gates)
    h, g = next(pairs)
    log.warning("took the first pair")
    y = h * g
    for h, g in pairs:
        y = y + h * g
    return y


@case((4,))
def zip_made_before_a_print_and_taken_after(x):
    pairs = zip([x.sin(), x.cos()], [x, x * 2])
    print("zipped", file=SINK)
    return sum(a * b for a, b in pairs)


@case((4,))
def step_counter_alive_across_a_print(x):
    step = itertools.count(1)
    y = x * next(step)
    print("step one", file=SINK)
    return y * next(step)


@case((4,))
def repeated_tensor_alive_across_a_print(x):
    bias = itertools.repeat(x.sin())
    y = x + next(bias)
    print("biased", file=SINK)
    return y + next(bias)


@case((4,))
def enumerate_alive_across_a_print(x):
    parts = [x.sin(), x.cos(), x.exp()]
    numbered = enumerate(parts)
    i, a = next(numbered)
    print("part", i, file=SINK)
    j, b = next(numbered)
    return a * j + b


class LoggedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            print("layer", i, file=SINK)
            x = layer(x)
        return x

@module_case((2, 4))
def enumerate_layers_printing_in_the_loop():
    return LoggedLayers()


@case((4,))
def chain_of_lists_alive_across_a_print(x):
    parts = itertools.chain([x.sin()], [x.cos(), x.exp()])
    a = next(parts)
    print("first part", file=SINK)
    return a + next(parts) + next(parts)


@case((4,))
def islice_alive_across_a_print(x):
    rest = itertools.islice([x.sin(), x.cos(), x.exp(), x.tanh()], 1, None)
    a = next(rest)
    print("skipped one", file=SINK)
    return a + next(rest)


@case((4,))
def generator_expression_alive_across_a_print(x):
    doubled = (t * 2 for t in [x, x + 1, x + 2])
    a = next(doubled)
    print("first doubled", file=SINK)
    return a + next(doubled)


def doubled_parts(parts):
    for t in parts:
        yield t * 2

@case((4,))
def generator_alive_across_a_print(x):
    gen = doubled_parts([x, x + 1])
    a = next(gen)
    print("first doubled", file=SINK)
    return a + next(gen)


def total_logged(parts):
    parts = list(parts)
    print("summing", len(parts), file=SINK)
    return sum(parts)

@case((4,))
def generator_expression_passed_to_a_helper_that_prints(x):
    return total_logged(t.relu() for t in [x, x * 2]) + 1


@case((4,))
def zip_of_a_list_and_a_generator_across_a_print(x):
    pairs = zip([x, x + 1], doubled_parts([x.sin(), x.cos()]))
    a, b = next(pairs)
    print("first pair", file=SINK)
    c, d = next(pairs)
    return a * b + c * d


# ---- a keyword renamed by a wrapper (transformers' deprecate_kwarg), then a break in the call ----
def _renamed_keyword(old, new):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if old in kwargs and new not in kwargs:
                kwargs[new] = kwargs.pop(old)  # the frame's own **kwargs changed before the break
            return fn(*args, **kwargs)
        return wrapper
    return deco


@_renamed_keyword("past", "cache")
def _decode_step(t, cache=None, scale=1.0):
    show("step", t.shape)
    return t * scale + cache


@case((4,))
def keyword_renamed_by_a_wrapper_then_a_break(x):
    return _decode_step(x, past=x * 2), _decode_step(x, past=x, scale=0.5)


@case((2, 3))
def arguments_popped_from_kwargs_across_a_break(x):
    def forward(hidden, **kwargs):
        mask = kwargs.pop("mask")
        bias = kwargs.pop("bias", None)
        show("popped", sorted(kwargs))
        out = hidden.masked_fill(mask, 0.0)
        return out + bias if bias is not None else out, kwargs

    return forward(x, mask=x > 0, bias=x.sum(0), extra=x.mean())
