"""More plain-Python cases for test_python_cases.py (issue 14): sets, match statements, str methods,
functools, itertools, collections, operator, math, builtins, torch functions that return Python
values, module hooks, exceptions, user classes and dict views, each as model libraries and
PyTorch's dynamo tests write them. Appended to python_cases.CASES; NOT_YET lists the cases whose
graph/break counts still differ from torch._dynamo.explain (the eager comparison holds for all)."""
import collections
import dataclasses
import enum
import functools
import itertools
import math
import operator
import os
import typing

import torch
import torch.nn as nn
import torch.nn.functional as F

from python_cases import NOT_YET, case, module_case  # noqa: F401  (NOT_YET: read from here by the tests)


# ---- sets and frozensets ----
@case((3,))
def set_frozenset_operators(x):
    a = {1, 2, 3}
    f = frozenset([2, 3, 4])
    sym = a ^ f
    return x * len(sym) + (a <= {1, 2, 3, 9}) + (f >= {2}) + a.isdisjoint({7}), sorted(sym)


@case((3,))
def frozenset_constant_membership(x):
    act = "gelu"
    if act in frozenset({"gelu", "gelu_new", "quick_gelu"}):
        return F.gelu(x)
    return F.relu(x)


@case((3,))
def set_union_intersection_methods(x):
    a = {"q", "k", "v"}
    u = a.union({"o"}, ["q", "z"])
    i = a.intersection(("k", "v", "w"))
    d = a.difference({"v"})
    s = a.symmetric_difference({"v", "o"})
    return x * len(u) + len(i), sorted(d), sorted(s), a.issubset(u), u.issuperset(a)


@case((3,))
def set_remove_pop_copy_clear(x):
    s = {3, 5, 8}
    s.remove(5)
    c = s.copy()
    s.clear()
    c.add(1)
    return x + len(s) + sum(c), sorted(c)


@case((3,))
def set_inplace_operators(x):
    s = {1, 2, 3}
    s |= {4}
    s &= {2, 3, 4, 5}
    s -= {3}
    s ^= {9}
    return x * sum(s), sorted(s)


@case((2, 3))
def set_comprehension_of_tuples(x):
    pairs = {(min(i, j), max(i, j)) for i in range(3) for j in range(3) if i != j}
    return x * len(pairs), sorted(pairs)


@case((4,))
def set_dedupes_list_of_sizes(x):
    sizes = [2, 2, 4, 1, 4]
    uniq = sorted(set(sizes))
    return x.repeat(len(set(sizes))), uniq, len(frozenset(sizes))


@case((3,))
def set_of_dict_keys_difference(x):
    expected = {"weight", "bias"}
    state = {"weight": x, "bias": x + 1, "extra": 0}
    unexpected = set(state) - expected
    missing = expected - state.keys()
    return state["weight"] * 2, sorted(unexpected), missing


# ---- match statements ----
@case((3,))
def match_string_literal(x):
    act = "silu"
    match act:
        case "relu":
            return F.relu(x)
        case "silu" | "swish":
            return F.silu(x)
        case _:
            return x


@case((2, 3))
def match_shape_sequence(x):
    match x.shape:
        case (n,):
            return x * n
        case (b, n):
            return x.sum(-1) * b + n
        case _:
            return x


@case((3,))
def match_sequence_star(x):
    dims = [4, 8, 16]
    match dims:
        case [first, *rest]:
            return x * first + sum(rest), rest
        case []:
            return x, []


@case((3,))
def match_mapping_with_rest(x):
    cfg = {"act": "tanh", "scale": 2.0, "bias": 1}
    match cfg:
        case {"act": "tanh", "scale": s, **rest}:
            return torch.tanh(x) * s, rest
        case {"act": a}:
            return x, {"act": a}


@dataclasses.dataclass
class Span:
    lo: int
    hi: int


@case((6,))
def match_class_keyword_and_positional(x):
    sp = Span(1, 4)
    match sp:
        case Span(lo=0, hi=h):
            return x[:h]
        case Span(lo, hi) if hi > lo:
            return x[lo:hi] * 2
        case _:
            return x


@case((3,))
def match_builtin_class_patterns(x):
    out = x
    for v in (3, 2.5, "s", None, (1, 2)):
        match v:
            case int(n):
                out = out + n
            case float():
                out = out * v
            case str() as s:
                out = out - len(s)
            case None:
                out = out + 100
            case (a, b):
                out = out + a * b
    return out


@case((3,))
def match_value_pattern_enum_guard(x):
    mode = _Mode.MEAN
    match mode:
        case _Mode.SUM:
            return x.sum()
        case _Mode.MEAN if x.dim() == 1:
            return x.mean()
        case _:
            return x


class _Mode(enum.Enum):
    SUM = "sum"
    MEAN = "mean"


# ---- str methods, f-strings and str.format on constants ----
@case((3,))
def fstring_format_specs(x):
    scale, idx, name = 0.125, 7, "attn"
    tag = f"{name!r}:{idx:03d}:{scale:.2f}:{idx:>4}:{scale:e}"
    return x * scale, tag, f"{name.upper()}-{idx + 1}"


@case((3,))
def str_format_named_and_indexed(x):
    key = "{prefix}.{idx}.{0}".format("weight", prefix="layers", idx=2)
    pct = "%s_%03d_%.1f" % ("blk", 5, 0.25)
    return x + len(key), key, pct


@case((3,))
def str_strip_partition_find(x):
    s = "  Model.Encoder.Layer  "
    t = s.strip().lower()
    head, _, tail = t.rpartition(".")
    pos = t.find("encoder")
    return x * pos, head, tail, t.count("e"), t.title(), "7".zfill(3), t.rstrip("r")


@case((3,))
def str_join_map_split(x):
    dims = [2, 3, 4]
    spec = "x".join(map(str, dims))
    back = [int(p) for p in spec.split("x", 1)[1].split("x")]
    return x * sum(back), spec, "a,b,,c".split(","), "k=v=w".rsplit("=", 1)


@case((3,))
def str_predicates_and_replace(x):
    name = "layer_norm.weight"
    flags = (name.isidentifier(), "12".isnumeric(), "Ab".isupper(), "ab".islower(), name.isalpha())
    return x + sum(flags), name.replace("_", "").removesuffix(".weight"), name.removeprefix("layer_")


@case((3,))
def str_compare_and_concat(x):
    a, b = "alpha", "beta"
    key = a + "_" + b * 2
    return x * (a < b) + len(key), key, key[::-1][:3], max(a, b), sorted([b, a, "Gamma"], key=str.lower)


# ---- functools ----
def _affine(t, scale=1.0, shift=0.0):
    return t * scale + shift


_SOFTMAX_LAST = functools.partial(F.softmax, dim=-1)


@case((2, 3))
def partial_of_torch_function(x):
    p = functools.partial(torch.sum, dim=0)
    return p(x), _SOFTMAX_LAST(x)


@case((3,))
def partial_user_function_args_and_kwargs(x):
    p = functools.partial(_affine, scale=2.0)
    q = functools.partial(_affine, x, 3.0)
    return p(x, shift=1.0), q(shift=-1.0), q(), p.keywords["scale"]


@case((3,))
def partial_nested_and_overridden(x):
    p = functools.partial(functools.partial(_affine, scale=2.0), shift=1.0)
    return p(x), p(x, scale=5.0)


@case((3,), (3,), (3,))
def reduce_tensors(a, b, c):
    total = functools.reduce(operator.add, [a, b, c])
    prod = functools.reduce(lambda u, v: u * v, [a, b], torch.ones(3))
    n = functools.reduce(operator.mul, [2, 3, 4], 1)
    return total, prod, n


@functools.lru_cache(maxsize=None)
def _head_dim(hidden, heads):
    return hidden // heads


@functools.cache
def _window_sizes(n):
    return tuple(2 ** i for i in range(n))


@case((2, 8))
def lru_cache_wrapped_helper(x):
    d = _head_dim(8, 2)
    return x.view(2, -1, d) * len(_window_sizes(3))


def _deprecate_kwarg(old, new):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        return wrapper
    return deco


@_deprecate_kwarg("past_key_value", "past_key_values")
def _layer(h, past_key_values=None, scale=1.0):
    return h * scale if past_key_values is None else h * scale + past_key_values


@case((3,))
def wraps_decorator_kwargs_pop(x):
    return _layer(x, past_key_value=x * 2, scale=3.0) + _layer(x), _layer.__name__


def _can_return_tuple(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        return_dict = kwargs.pop("return_dict", True)
        out = fn(self, *args, **kwargs)
        return out if return_dict else tuple(out.values())
    return wrapper


class TupleOrDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @_can_return_tuple
    def inner(self, x, scale=1.0):
        return {"h": self.lin(x) * scale}

    def forward(self, x):
        return self.inner(x, scale=2.0, return_dict=False)[0] + self.inner(x)["h"]


module_case(TupleOrDict, (2, 4))


# ---- itertools ----
@case((9,))
def itertools_accumulate_offsets(x):
    sizes = [2, 3, 4]
    offsets = [0] + list(itertools.accumulate(sizes))
    chunks = [x[s:e] for s, e in zip(offsets, offsets[1:])]
    prods = list(itertools.accumulate(sizes, operator.mul, initial=1))
    return [c.sum() for c in chunks], prods


@case((3,), (3,))
def itertools_accumulate_tensors(a, b):
    return list(itertools.accumulate([a, b, a * 2]))


@case((3,), (3,))
def itertools_count_zip_and_repeat(a, b):
    out = [t * i for i, t in zip(itertools.count(1), [a, b])]
    reps = list(itertools.repeat(a, 2))
    sums = [t + s for t, s in zip([a, b], itertools.repeat(10))]
    return out, reps, sums, list(itertools.islice(itertools.count(5, 2), 3))


@case((3,))
def itertools_filterfalse_takewhile(x):
    names = ["q_proj", "k_proj", "norm", "v_proj"]
    kept = list(itertools.filterfalse(lambda n: n == "norm", names))
    head = list(itertools.takewhile(lambda n: n.endswith("proj"), names))
    tail = list(itertools.dropwhile(lambda n: n != "norm", names))
    return x * len(kept), kept, head, tail


@case((8,))
def itertools_islice_step(x):
    parts = list(x.split(1))
    return list(itertools.islice(parts, 1, 7, 2)), list(itertools.islice(range(10), 3))


@case((2,), (2,))
def itertools_combinations_with_replacement_and_product_repeat(a, b):
    grid = list(itertools.product([0, 1], repeat=2))
    h = a * len(grid)
    out = [x * y for x, y in itertools.combinations_with_replacement([h, b], 2)]
    return out, grid


@case((2,), (2,), (2,))
def itertools_chain_generators(a, b, c):
    gen = (t * 2 for t in [a, b])
    out = list(itertools.chain(gen, [c], itertools.chain.from_iterable([[a], (b,)])))
    return out


@case((3,))
def itertools_starmap_and_pairwise_constants(x):
    scales = list(itertools.starmap(operator.mul, [(1, 2), (3, 4)]))
    gaps = [b - a for a, b in itertools.pairwise([1, 4, 9])]
    return x * sum(scales) + sum(gaps), scales, gaps


@case((3,))
def itertools_groupby_sorted(x):
    names = ["a.w", "a.b", "b.w"]
    groups = {k: list(g) for k, g in itertools.groupby(sorted(names), key=lambda n: n.split(".")[0])}
    return x * len(groups["a"]), groups


# ---- collections ----
_Pair = collections.namedtuple("_Pair", ["key", "value", "weight"], defaults=[1.0])


class _Shape(typing.NamedTuple):
    rows: int
    cols: int = 1

    def numel(self):
        return self.rows * self.cols


@case((3,))
def namedtuple_defaults_and_methods(x):
    p = _Pair("k", x)
    q = p._replace(weight=3.0)
    return p.value * q.weight, p._fields, q._asdict()["key"], len(q), q[2]


@case((3,))
def namedtuple_returned_and_unpacked(x):
    key, value, w = _Pair("a", x + 1, 2.0)
    return _Pair(key, value * w)


@case((2, 3))
def typing_namedtuple_method_and_default(x):
    s = _Shape(*x.shape)
    t = _Shape(5)
    return x.reshape(s.numel()) * t.cols, s, t.numel(), isinstance(s, tuple)


@case((3,), (3,))
def deque_append_pop_rotate(a, b):
    d = collections.deque([a], maxlen=3)
    d.append(b)
    d.appendleft(a * 2)
    d.append(b * 2)  # drops from the left: maxlen 3
    first = d.popleft()
    d.extend([a + b])
    last = d.pop()
    return first, last, list(d), len(d), d.maxlen


@case((3,))
def deque_as_queue_of_constants(x):
    q = collections.deque(range(4))
    q.rotate(1)
    out = x
    while q:
        out = out + q.popleft()
    return out


@case((3,))
def ordereddict_move_to_end_and_popitem(x):
    d = collections.OrderedDict(a=x, b=x * 2, c=x * 3)
    d.move_to_end("a")
    k, v = d.popitem(last=False)
    d.move_to_end("c", last=False)
    return k, v, list(d.keys()), d


@case((3,))
def defaultdict_list_and_int(x):
    groups = collections.defaultdict(list)
    counts = collections.defaultdict(int)
    for name, t in [("a", x), ("b", x * 2), ("a", x + 1)]:
        groups[name].append(t)
        counts[name] += 1
    return dict(groups), dict(counts), len(groups)


_LAYER_KINDS = collections.Counter(["attn", "mlp", "attn", "norm", "attn"])


@case((3,))
def counter_most_common(x):
    (top, n), = _LAYER_KINDS.most_common(1)
    return x * n, top, _LAYER_KINDS["mlp"], _LAYER_KINDS["missing"], sorted(_LAYER_KINDS.elements())[:2]


# ---- operator ----
@case((2, 3))
def operator_methodcaller_and_dotted_attrgetter(x):
    summer = operator.methodcaller("sum", dim=0)
    get_dtype = operator.attrgetter("dtype.is_floating_point")
    return summer(x), get_dtype(x), operator.attrgetter("shape", "ndim")(x)


@case((3,))
def operator_itemgetter_on_dicts(x):
    rows = [{"name": "b", "w": x}, {"name": "a", "w": x * 2}]
    rows = sorted(rows, key=operator.itemgetter("name"))
    return [operator.itemgetter("w")(r) for r in rows], operator.getitem([1, 2], 1)


@case((3,))
def operator_functions_on_tensors(x):
    return (operator.add(x, 1), operator.truediv(x, 2), operator.pow(x, 2), operator.iadd(x * 1, 1),
            operator.contains([1, 2], 2), operator.not_(False), operator.index(3))


# ---- math ----
@case((3,))
def math_integer_helpers(x):
    n = math.gcd(12, 18) + math.lcm(4, 6) + math.comb(5, 2) + math.factorial(4) + math.isqrt(17)
    return x * n + math.prod([1, 2, 3]) + math.log2(8) + math.trunc(-2.5)


@case((3,))
def math_predicates_and_float_helpers(x):
    checks = (math.isclose(0.1 + 0.2, 0.3), math.isfinite(1.0), math.isinf(math.inf), math.isnan(math.nan))
    return x * sum(checks) + math.copysign(2.0, -1.0) + math.fabs(-3.0) + math.hypot(3, 4), checks


@case((5, 2))
def math_on_shapes(x):
    half = math.ceil(x.shape[0] / 2)
    return x[:half] * math.sqrt(x.shape[-1]), math.floor(math.log(x.numel()))


# ---- os.environ ----
@case((3,))
def environ_membership_and_get_none(x):
    flag = os.environ.get("DYNVIEW_TEST_UNSET_FLAG")
    on = "DYNVIEW_TEST_UNSET_FLAG" in os.environ
    return x * 2 if flag is None and not on else x


# ---- sorted / min / max / any / all / sum / enumerate ----
@case((3,))
def max_of_dict_by_value(x):
    scores = {"a": 3, "b": 7, "c": 5}
    best = max(scores, key=scores.get)
    worst = min(scores.items(), key=lambda kv: kv[1])
    return x * scores[best], best, worst


@case((2,), (3,), (1,))
def max_min_tensors_by_key(a, b, c):
    big = max([a, b, c], key=len)
    small = min(a, b, c, key=len)
    return big * 2, small + 1


@case((3,))
def any_all_generators_over_constants(x):
    names = ["q_proj", "k_proj", "v_proj"]
    if all(n.endswith("_proj") for n in names) and not any(n.startswith("o") for n in names):
        return x + 1
    return x


@case((2, 3), (2, 3))
def sum_generator_with_start(a, b):
    total = sum((t * 2 for t in [a, b]), start=torch.zeros(2, 3))
    n = sum([0.5, 1.5], 10)
    return total, n, sum(range(4))


@case((3,), (3,))
def enumerate_start_and_reversed(a, b):
    out = [t * i for i, t in enumerate([a, b], start=1)]
    back = [t for t in reversed([a, b])]
    return out, back, list(reversed(range(3)))


@case((3,))
def sorted_strings_by_len_then_name(x):
    names = ["mlp", "attn", "ln", "proj"]
    return x * len(names[0]), sorted(names, key=lambda n: (len(n), n)), sorted(names, key=len, reverse=True)


# ---- list methods ----
@case((3,), (3,))
def list_insert_extend_sort(a, b):
    xs = [3, 1, 2]
    xs.insert(0, 9)
    xs.extend((4, 5))
    xs.sort()
    ts = [a]
    ts.insert(0, b)
    ts += [a * 2]
    return xs, ts, xs.index(4, 2)


@case((3,))
def list_repeat_concat_and_slices(x):
    layers = ["full"] * 2 + ["sliding"]
    evens = list(range(10))[::2]
    del evens[1:3]
    grid = [[0] * 2 for _ in range(2)]
    grid[1][0] = 5
    return x * len(layers), layers, evens, grid, layers[-2:]


@case((2,), (2,), (2,), (2,))
def list_zip_star_transpose(a, b, c, d):
    rows = [(a, b), (c, d)]
    cols = list(zip(*rows))
    return [sum(col) for col in cols], len(cols)


@case((3,), (3,))
def list_slice_assignment_replace(a, b):
    xs = [a, a, a, a]
    xs[1:3] = [b]
    xs[::2] = [b * 2, b * 3]
    return xs


# ---- walrus, global, nonlocal, del ----
@case((3,))
def walrus_in_comprehension(x):
    sizes = [1, 4, 2, 8]
    big = [y for s in sizes if (y := s * 2) > 3]
    return x * sum(big), big, y


_MODE = "train"


def _set_mode(m):
    global _MODE
    _MODE = m


@case((3,))
def global_assignment_in_callee(x):
    _set_mode("eval")
    y = x * 2 if _MODE == "eval" else x
    _set_mode("train")
    return y


@case((3,))
def nonlocal_tensor_accumulator(x):
    acc = x

    def add(t):
        nonlocal acc
        acc = acc + t

    add(x)
    add(x * 2)
    return acc


@case((3,))
def closure_over_loop_variable_default(x):
    fns = [lambda t, k=k: t * k for k in range(3)]
    return [f(x) for f in fns]


@case((3,))
def del_attribute_and_slice(x):
    p = Span(1, 2)
    p.extra = x
    del p.extra
    xs = [x, x + 1, x + 2, x + 3]
    del xs[::2]
    return xs, hasattr(p, "extra")


# ---- torch functions that return Python values ----
@case((3,))
def tensor_predicates_are_constants(x):
    flags = (x.is_floating_point(), torch.is_floating_point(x), x.is_complex(), torch.is_complex(x),
             torch.is_tensor(x), torch.is_tensor(3), x.is_contiguous(), x.dtype.is_floating_point)
    return x * sum(flags), flags


@case((3,))
def tensor_type_and_default_dtype(x):
    kind = x.type()
    if kind == "torch.FloatTensor" and torch.get_default_dtype() == torch.float32:
        return x.double(), kind
    return x, kind


@case((2, 3))
def tensor_size_dim_numel(x):
    return x * (x.dim() + x.ndim + x.numel() + x.size(-1) + x.element_size()), list(x.size()), x.device.type


@case((3,))
def finfo_iinfo_constants(x):
    neg = torch.finfo(x.dtype).min
    eps = torch.finfo(x.dtype).eps
    return x.masked_fill(x > 0, neg) + eps, torch.iinfo(torch.int32).max


@case((3,))
def tensor_literal_with_device_and_dtype(x):
    w = torch.tensor([1.0, 2.0, 3.0], device=x.device, dtype=x.dtype)
    b = torch.tensor(0.5, device="cpu")
    i = torch.as_tensor([0, 2], device=x.device)
    return x * w + b, x[i], x.new_tensor([3.0, 2.0, 1.0]) + x


# ---- nn.Module hooks and modules made inside forward ----
class SoftmaxInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return nn.Softmax(dim=-1)(h) + nn.Identity()(h) + nn.ReLU()(h)


module_case(SoftmaxInForward, (2, 4))


def _with_pre_hook():
    m = nn.Linear(4, 3)
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    return m


def _with_forward_hook():
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    m[0].register_forward_hook(lambda mod, args, out: out + 1)
    return m


class HookedPre(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _with_pre_hook()

    def forward(self, x):
        return self.inner(x)


class HookedPost(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _with_forward_hook()

    def forward(self, x):
        return self.body(x)


module_case(HookedPre, (2, 4))
module_case(HookedPost, (2, 4))


class ModuleContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            x = blk(x) * self.scale + i
        outs = {k: h(x) for k, h in self.heads.items()}
        return outs, len(self.blocks), self.training


module_case(ModuleContainers, (2, 4))


# ---- exceptions raised and caught in the trace ----
@case((3,))
def raise_and_continue_in_loop(x):
    out = x
    for name in ["a", "bad", "b"]:
        try:
            if name == "bad":
                raise ValueError(name)
            out = out + 1
        except ValueError:
            continue
    return out


@case((3,))
def except_base_class_message(x):
    try:
        raise KeyError("missing_key")
    except LookupError as e:
        key = e.args[0]
    return x * len(key), key


@case((3,))
def try_finally_restores_state(x):
    state = {"depth": 0}
    try:
        state["depth"] += 1
        y = x * state["depth"]
    finally:
        state["depth"] -= 1
    return y, state


@case((3,))
def assert_statement_passes(x):
    assert x.dim() == 1, "expects a vector"
    assert len([1, 2]) == 2
    return x + 1


def _validate(n):
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return n


@case((3,))
def exception_from_callee_caught_with_exception(x):
    try:
        n = _validate(-2)
    except Exception as e:
        n = len(str(e))
    return x + n


# ---- user classes and dataclasses ----
@dataclasses.dataclass
class _Opts:
    scales: list = dataclasses.field(default_factory=list)
    name: str = "opts"


@case((3,))
def dataclass_default_factory_and_replace(x):
    o = _Opts()
    o.scales.append(2.0)
    p = dataclasses.replace(o, name="other")
    names = [f.name for f in dataclasses.fields(p)]
    return x * sum(p.scales), p.name, names


@dataclasses.dataclass(frozen=True)
class _Frozen:
    dim: int
    heads: int = 2

    @property
    def head_dim(self):
        return self.dim // self.heads


@case((2, 4))
def frozen_dataclass_made_in_trace(x):
    f = _Frozen(4)
    return x.view(2, f.heads, f.head_dim), f.dim


class _Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, t):
        return t * self.s


class _Shifted(_Scaler):
    def __call__(self, t):
        return super().__call__(t) + 1


@case((3,))
def callable_object_and_super_method(x):
    return _Scaler(2.0)(x), _Shifted(3.0)(x)


class _Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return _Vec(self.t + other.t)

    def __mul__(self, k):
        return _Vec(self.t * k)

    def __eq__(self, other):
        return isinstance(other, _Vec) and self.t is other.t


@case((3,))
def operator_overloading_on_user_class(x):
    v = _Vec(x) + _Vec(x * 2) * 3
    return v.t, v == v


class _AttrFallback:
    def __init__(self):
        self.known = 2

    def __getattr__(self, name):
        if name.startswith("opt_"):
            return 0
        raise AttributeError(name)


@case((3,))
def getattr_fallback_dunder(x):
    o = _AttrFallback()
    return x * o.known + o.opt_bias, hasattr(o, "other")


class _Layers:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield i * 2


@case((3,))
def iter_method_is_generator(x):
    return x + sum(_Layers(3)), list(_Layers(2))


class _Act(str, enum.Enum):
    RELU = "relu"
    GELU = "gelu"


@case((3,))
def str_enum_comparisons(x):
    a = _Act("gelu")
    if a == "gelu" and a is _Act.GELU:
        return F.gelu(x), a.value, a.name
    return x, a.value, a.name


# ---- dict views and dict idioms ----
@case((3,))
def dict_keys_set_operations(x):
    d = {"a": x, "b": x * 2, "c": 3}
    common = d.keys() & {"a", "c", "z"}
    rest = d.keys() - {"a"}
    return x * len(common), sorted(rest), ("b", d["b"]) in d.items()


@case((3,))
def dict_merge_operators_and_unpacking(x):
    base = {"scale": 1, "bias": x + 1}
    over = {"scale": 2}
    merged = {**base, **over, "extra": 0}
    alt = base | over
    base |= {"z": 9}
    return merged, alt, base


@case((3,))
def dict_fromkeys_zip_reversed(x):
    names = ["q", "k", "v"]
    d = dict(zip(names, [x, x * 2, x * 3]))
    flags = dict.fromkeys(names, False)
    return [k for k in reversed(d)], flags, sum(d.values())


@case((3,))
def dict_values_after_pop_in_loop(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    for k in list(d.keys()):
        if k != "b":
            d.pop(k)
    return list(d.values()), list(d.items())


def _history(seed):
    return [[1, 2]]


@case((3,), extra=_history)
def list_iadd_seen_through_alias_and_by_caller(x, history):
    # regression: `xs += ys` on a list made a new list (an alias, and the caller's list, missed it)
    xs = [x]
    alias = xs
    xs += [x * 2]
    history += [len(alias)]
    return alias, len(history)


# ---- custom torch.autograd.Function subclasses (Fn.apply: one graph node; test_autograd_function.py
# checks their gradients with requires_grad inputs) ----
class RoundSTE(torch.autograd.Function):
    """Straight-through estimator: round in forward, identity gradient."""
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class TanhGelu(torch.autograd.Function):
    """A custom GELU (tanh approximation), as bloom and Megatron write it."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        t = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
        return g * (0.5 * x * ((1 - t * t) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + t))


class ClampWithMask(torch.autograd.Function):
    """A clamp that returns its mask too: the mask is marked non-differentiable; the gradient passes
    where the input was not clamped."""
    @staticmethod
    def forward(ctx, x, lo, hi):
        mask = (x >= lo) & (x <= hi)
        ctx.save_for_backward(mask)
        ctx.mark_non_differentiable(mask)
        return x.clamp(lo, hi), mask

    @staticmethod
    def backward(ctx, g, g_mask):
        (mask,) = ctx.saved_tensors
        return g * mask, None, None


class ScaleGrad(torch.autograd.Function):
    """Gradient reversal / scaling with a non-tensor argument kept on ctx; ctx.needs_input_grad read
    in backward."""
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        gx = -ctx.alpha * g if ctx.needs_input_grad[0] else None
        return gx, None


class MulAdd(torch.autograd.Function):
    """New-style: forward without ctx, setup_context saves what backward needs; two tensor inputs
    and a number."""
    @staticmethod
    def forward(x, w, b):
        return x * w + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, _ = inputs
        ctx.save_for_backward(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0), None


@case((2, 3))
def autograd_fn_straight_through(x):
    return RoundSTE.apply(x * 4) / 4 + 1


@case((2, 3))
def autograd_fn_custom_gelu_save_for_backward(x):
    return TanhGelu.apply(x).sum(-1)


@case((2, 3))
def autograd_fn_clamp_mark_non_differentiable(x):
    y, mask = ClampWithMask.apply(x, -0.5, 0.5)
    return y * 2, mask.sum()


@case((2, 3))
def autograd_fn_non_tensor_argument(x):
    return ScaleGrad.apply(x + 1, 0.25) * 3


@case((2, 3), (3,))
def autograd_fn_setup_context_two_inputs(x, w):
    return MulAdd.apply(x, w, 1.5).relu()


class GeluMLP(nn.Module):
    """An MLP whose activation is a custom autograd.Function (bloom's BloomGelu)."""
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(TanhGelu.apply(self.fc1(x))) + ScaleGrad.apply(x, 0.5)


module_case(GeluMLP, (2, 4))


# ---- list.index / count / tuple's over objects compared by identity (modules, instances made in
# the trace, None beside tensors): identity first, as PyObject_RichCompareBool; an object without
# its own __eq__ equals nothing else ----
class StagedBlocks(nn.Module):
    """Each block scaled by its position in a separate list of the same modules (a schedule)."""
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.schedule = list(reversed(self.blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x) * (self.schedule.index(block) + 1)
        return x, self.schedule.count(self.blocks[0])


module_case(StagedBlocks, (2, 4))


class _Axis:
    def __init__(self, size):
        self.size = size


@case((2, 3, 4))
def index_of_objects_made_here(x):
    axes = [_Axis(2), _Axis(3), _Axis(4)]
    order = [axes[2], axes[0], axes[1]]
    perm = [axes.index(a) for a in order]
    return x.permute(*perm), axes.count(order[0]), tuple(axes).index(axes[1])


@case((3,), (3,))
def index_and_count_of_a_tensor_beside_none(x, y):
    slots = [None, x, None, y]
    return x * slots.index(x) + y, slots.count(None), (x, None).count(x), slots.index(None, 1)


@case((3,))
def index_of_a_missing_constant_raises_with_its_repr(x):
    try:
        return [1, 2].index(3)
    except ValueError as e:
        return x + 1, str(e)
