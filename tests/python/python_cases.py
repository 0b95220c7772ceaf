"""Plain Python inside compiled functions, written the way model libraries write it (issue 14's
constructs): imports inside functions, compile-time checks, containers and objects. Run by
test_python_cases.py against eager (results, exceptions and mutated arguments) and against
torch._dynamo.explain (graphs and breaks)."""
import io

import torch
import torch.nn as nn

CASES = []
# case name -> why dynview's graph/break counts still differ from TorchDynamo's (the case files add to it)
NOT_YET: dict[str, str] = {}
# case name -> (dynview's (graphs, breaks), TorchDynamo's (graphs, breaks), why): where dynview differs
# from TorchDynamo on purpose -- it captures what TorchDynamo gives up on, or breaks where TorchDynamo
# gives a result eager does not. Both counts are asserted, so a change on either side is noticed.
DIFFERS: dict[str, tuple[tuple[int, int], tuple[int, int], str]] = {}


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


# ---- hasattr / getattr with a default ----
def _is_jax_jitting(x):
    # transformers.utils.import_utils.is_jax_jitting: duck typing on the tensor
    if not hasattr(x, "jax"):
        return False
    try:
        import jax
        return isinstance(x.jax(), getattr(jax, "core").Tracer)
    except Exception:
        return False


@case((3,))
def hasattr_on_tensor_duck_typing(x):
    if _is_jax_jitting(x):
        print("jax path", file=_SINK)
    return x + 1


@case((3,))
def hasattr_tensor_attributes(x):
    return x * 2, hasattr(x, "grad"), hasattr(x, "shape"), hasattr(x, "relu"), hasattr(x, "no_such_thing")


class _Cfg:
    scale = 3.0

    def __init__(self):
        self.bias = 1.0


_CFG = _Cfg()


@case((3,))
def getattr_with_default(x):
    return x * getattr(_CFG, "scale", 1.0) + getattr(_CFG, "bias", 0.0) + getattr(_CFG, "missing", 5.0)


class OptionalGroups(nn.Module):
    # attention helpers test module attributes that only some architectures define
    def __init__(self, groups=None):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        if groups is not None:
            self.num_key_value_groups = groups

    def forward(self, x):
        y = self.proj(x)
        if hasattr(self, "num_key_value_groups") and self.num_key_value_groups > 1:
            y = y.repeat(1, self.num_key_value_groups)
        return y * getattr(self, "scaling", 0.5)


module_case(lambda: OptionalGroups(), (2, 4))
module_case(lambda: OptionalGroups(2), (2, 4))


# ---- tensors made in the trace with an explicit device, then mixed with inputs ----
@case((2, 3))
def cat_onto_empty_with_device(x):
    # transformers' DynamicLayer: an empty cache tensor made on the input's device, then cat
    keys = torch.tensor([], dtype=x.dtype, device=x.device)
    keys = torch.cat([keys, x.flatten()], dim=-1)
    return keys * 2


@case((3,))
def factory_with_device_then_add(x):
    return x + torch.ones(3, device="cpu") + torch.zeros_like(x, device=x.device)


# ---- user mapping classes: `in` and [] through their Python __contains__ / __getitem__ ----
from collections.abc import MutableMapping  # noqa: E402


class _Registry(MutableMapping):
    # transformers.utils.generic.GeneralInterface, as that library writes it
    _global_mapping = {"relu": torch.relu, "tanh": torch.tanh}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __setitem__(self, key, value):
        self._local_mapping.update({key: value})

    def __delitem__(self, key):
        del self._local_mapping[key]

    def __iter__(self):
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self):
        return len(self._global_mapping.keys() | self._local_mapping.keys())


_ACTS = _Registry()


@case((3,))
def user_mapping_contains_and_getitem(x):
    name = "tanh"
    if name not in _ACTS:
        raise KeyError(name)
    return _ACTS[name](x)


# ---- sets of constants ----
@case((3,))
def set_comprehension_membership(x):
    # ModelOutput.__setattr__'s idiom: a set comprehension over field names, then `in`
    fields = ("last_hidden_state", "hidden_states", "attentions")
    names = {f for f in fields if not f.startswith("_")}
    return x * 2 if "attentions" in names else x


@case((3,))
def set_operators_and_methods(x):
    a = {1, 2, 3}
    b = {3, 4}
    a.add(7)
    a.discard(1)
    u, i, d = a | b, a & b, a - b
    return x * len(u) + len(i) + sum(sorted(d))


@case((3,))
def set_returned(x):
    s = {"a", "b"}
    s.update(["c"])
    return x + 1, s


# ---- properties of Python objects (model configs) ----
class _Config:
    def __init__(self):
        self._output_attentions = False
        self.hidden = 4
        self.layer_types = ["full", "sliding", "full"]

    @property
    def output_attentions(self):
        return self._output_attentions

    @property
    def is_sliding(self):
        return [t == "sliding" for t in self.layer_types]

    @property
    def is_linear(self):
        return [False for _ in self.layer_types]


_CONFIG = _Config()


@case((3,))
def config_property_branch(x):
    if _CONFIG.output_attentions:
        return x - 1
    return x * _CONFIG.hidden


@case((3,))
def two_list_properties_zipped(x):
    # masking_utils.find_first_full_attention_index over a cache's properties
    is_full = [not s and not lin for s, lin in zip(_CONFIG.is_sliding, _CONFIG.is_linear)]
    idx = is_full.index(True) if True in is_full else 0
    return x + idx


# ---- instances of Python classes made in the trace ----
import dataclasses  # noqa: E402


class _Point:
    scale = 2.0

    def __init__(self, x, y=None):
        self.x = x
        self.y = x * 2 if y is None else y

    def norm(self):
        return (self.x ** 2 + self.y ** 2).sqrt()

    @property
    def total(self):
        return self.x + self.y

    @classmethod
    def origin_like(cls, t):
        return cls(t * 0, t * 0)

    @staticmethod
    def twice(t):
        return t * 2


@case((3,))
def instance_methods_and_property(x):
    p = _Point(x)
    p.x = p.x + 1
    return p.norm() + p.total * _Point.scale + _Point.twice(p.y)


@case((3,))
def instance_classmethod_and_class(x):
    o = _Point.origin_like(x)
    return o.total + 1, type(o).__name__, isinstance(o, _Point), o.__class__ is _Point


@case((3,))
def instance_returned(x):
    p = _Point(x + 1)
    p.extra = [p.x, 3]
    return p


@dataclasses.dataclass
class _Output:
    last_hidden_state: torch.Tensor
    hidden_states: tuple = None
    note: str = "out"

    def __post_init__(self):
        self.size = self.last_hidden_state.shape[-1]


@case((2, 3))
def dataclass_output(x):
    out = _Output(last_hidden_state=x.relu(), hidden_states=(x, x * 2))
    return out.last_hidden_state * out.size, out.note, out.hidden_states[1]


@case((2, 3))
def dataclass_escapes(x):
    return _Output(x.sigmoid())


class _KV:
    # a key/value cache made in the forward: lists of tensors grown per layer
    def __init__(self):
        self.keys = []
        self.values = []

    def update(self, k, v):
        self.keys.append(k)
        self.values.append(v)
        return torch.cat(self.keys, dim=0), torch.cat(self.values, dim=0)


@case((2, 4))
def kv_cache_object(x):
    cache = _KV()
    for _ in range(2):
        k, v = cache.update(x, x * 2)
    return k.sum() + v.sum(), len(cache.keys)


class _Node:
    def __init__(self, value):
        self.value = value
        self.me = self


@case((3,))
def instance_refers_to_itself(x):
    n = _Node(x * 3)
    return n.me.me.value, n.me is n


# ---- regressions: each was a wrong result or an error where eager works ----
import typing  # noqa: E402


@case((3,))
def augmented_assign_onto_int(x):
    # T5 / DeBERTa-v2: an accumulator that starts as a Python number
    s = 0
    s += x * 2
    t = 0.5
    t += x
    return s, t


@case((3,), (3,), (3,))
def sum_with_start(a, b, c):
    return sum([b, c], start=a), sum([b, c], a), sum((b, c))


@case((3,))
def jit_annotate(x):
    y = torch.jit.annotate(typing.Any, x + 1)
    return torch.jit.annotate(typing.List[torch.Tensor], [y, x])


@case((3,))
def map_taken_twice(x):
    m = map(lambda t: t + 1, [x, x * 2])
    return list(m), list(m)


@case((3,))
def extend_with_lazy_map(x):
    y = [x]
    y.extend(map(lambda t: t * len(y), [x, x]))
    return y


@case((3,))
def nonlocal_counter_in_closure(x):
    count = 0

    def inc():
        nonlocal count
        count += 1

    inc()
    inc()
    return x + count


@case((4,))
def filter_then_next_and_iter(x):
    it = filter(lambda n: n % 2 == 0, range(7))
    first = next(it)
    same = iter(it) is it
    return x * first + sum(it), same


@case((3,))
def zip_consumes_iterators(x):
    a, b = iter([1, 2, 3]), iter([10])
    pairs = list(zip(a, b))
    return x * len(pairs), list(a)


@case((3,))
def zip_is_lazy_and_zip_of_nothing_is_empty(x):
    rows = []
    a = iter([x, x + 1, x + 2])
    pairs = zip(a, [1, 2])
    first, k = next(pairs)  # zip takes from `a` only as it is taken
    rest = next(a)
    return first * k + rest, list(zip()), list(zip(*rows)), [p for p in pairs]


class _WrappedForward(nn.Module):
    # transformers' GradientCheckpointingLayer: each subclass's forward wrapped in __init_subclass__,
    # the wrapper asking whether it is the class's forward (`is` of a function and a closure's cell)
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        forward = cls.forward

        def forward_wrapper(self, *args, **kwargs):
            outermost = type(self).forward is forward_wrapper
            return forward(self, *args, **kwargs) * (2 if outermost else 3), outermost, forward is forward_wrapper

        cls.forward = forward_wrapper


class IsOfTheClassesOwnForward(_WrappedForward):
    def forward(self, x):
        return x.sin()


module_case(IsOfTheClassesOwnForward, (3,))


@case((3,))
def is_of_functions_reached_two_ways(x):
    import torch.nn.functional as F
    fns = {"relu": F.relu}
    same = fns["relu"] is F.relu
    return x * (2 if same else 3), same, torch.sigmoid is fns["relu"]


# ---- itertools over tensors and constants ----
import itertools  # noqa: E402


@case((2,), (2,), (2,))
def itertools_product_and_combinations(a, b, c):
    out = [x * y for x, y in itertools.product([a, b], [c, 2])]
    out += [x - y for x, y in itertools.combinations([a, b, c], 2)]
    out += [x + y for x, y in itertools.permutations([a, b], 2)]
    return out


@case((2,), (2,), (2,))
def itertools_chain_islice_pairwise(a, b, c):
    flat = list(itertools.chain([a, b], (c,)))
    nested = list(itertools.chain.from_iterable([[a], [b, c]]))
    head = list(itertools.islice(flat, 2))
    diffs = [y - x for x, y in itertools.pairwise(flat)]
    return flat, nested, head, diffs


@case((2,), (2,))
def itertools_zip_longest(a, b):
    pairs = list(itertools.zip_longest([a, b, a], [b], fillvalue=0))
    return [x + y for x, y in pairs], list(itertools.zip_longest([1, 2], [a]))


# ---- sorted with a key ----
@case((2,), (3,), (1,))
def sorted_tensors_by_size(a, b, c):
    ts = sorted([a, b, c], key=lambda t: t.numel())
    names = sorted(["b", "a", "c"], reverse=True)
    return [t.sum() for t in ts], names


@case((3,))
def sorted_dict_items_by_key(x):
    d = {"w2": x * 2, "w1": x, "w3": x * 3}
    return [v for _, v in sorted(d.items(), key=lambda kv: kv[0])]


@case((3,))
def sorted_stable_reverse(x):
    pairs = [(1, "a"), (0, "b"), (1, "c"), (0, "d")]
    return x, sorted(pairs, key=lambda p: p[0], reverse=True)


# ---- statements and builtins on constants, the way model code uses them ----
import math  # noqa: E402
import operator  # noqa: E402
import os  # noqa: E402

_LAYERS = 3


@case((3,))
def fstring_and_format_keys(x):
    d = {f"layer_{i}": x * i for i in range(_LAYERS)}
    key = "layer_{}".format(_LAYERS - 1)
    return d[key] + d["layer_%d" % 1]


@case((3,))
def walrus_and_conditional_expression(x):
    if (n := len(x.shape)) > 0:
        x = x * n
    return x if n == 1 else -x


@case((4,))
def str_methods_on_constants(x):
    name = "model.layers.0.attn"
    parts = name.split(".")
    idx = int(parts[2]) if parts[2].isdigit() else -1
    ok = name.startswith("model.") and name.endswith("attn") and "-".join(parts[:2]) == "model-layers"
    return x + idx + ok, name.upper().replace(".", "/")


@case((3,))
def math_functions(x):
    scale = math.sqrt(64) / math.log(math.e) + math.floor(2.7) + math.ceil(0.2) + math.inf * 0 if False else math.sqrt(64)
    return x * scale + math.pi + math.cos(0.0) + math.pow(2, 3)


@case((3,), (3,))
def list_methods_and_slices(a, b):
    xs = [a, b, a * 2, b * 2]
    last = xs.pop()
    xs[1:1] = [last]
    del xs[0]
    sizes = [3, 1, 4, 1]
    sizes.remove(1)
    n = sizes.count(1) + sizes.index(4)
    ys = [0] * 3
    ys[1] = 5
    return xs, last * n, ys, sizes


def _sizes(seed):
    return [[3, 1, 4, 1, 5]]


@case((3,), extra=_sizes)
def input_list_remove_reverse_clear(x, sizes):
    sizes.remove(1)
    sizes.reverse()
    first = sizes[0]
    kept = sizes.copy()
    sizes.clear()
    return x * first, kept


@case((3,))
def min_max_any_all_constants(x):
    sizes = [4, 2, 9]
    flags = [True, False]
    return x * max(sizes) - min(sizes, default=0) + any(flags) + all(flags) + max(3, 5, 1)


@case((3,))
def operator_module_helpers(x):
    get1 = operator.itemgetter(1)
    get02 = operator.itemgetter(0, 2)
    shape_of = operator.attrgetter("shape")
    triple = (x, x * 2, x * 3)
    a, c = get02(triple)
    return get1(triple) + a + c + operator.mul(x, 3) + operator.neg(x), shape_of(x)


@case((3,))
def environ_get_default(x):
    mode = os.environ.get("DYNVIEW_TEST_UNSET_VARIABLE", "add")
    return x + 1 if mode == "add" else x - 1


_TOTAL = 0


@case((3,))
def global_statement_and_del(x):
    y = x * 2
    z = y + 1
    del y
    return z


@case((2, 3))
def unpacking_star_and_swap(x):
    a, *rest = x.shape + (5, 6)
    b, c = rest[0], rest[-1]
    b, c = c, b
    return x * a + b - c


@case((3,))
def bool_int_float_str_of_constants(x):
    n = int("3") + int(2.9) + float("0.5") + bool(0) + len(str(12345))
    return x * n, repr("a"), str(None)


class ImportInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        from torch.nn.functional import gelu
        return gelu(self.lin(x))


module_case(ImportInForward, (2, 4))


# ---- exceptions raised and caught inside the compiled code ----
_DEFAULTS = {"scale": 2.0, "shift": 1.0}


def _lookup(d, key, default=None):
    try:
        return d[key]
    except KeyError:
        return default


@case((3,))
def try_except_key_error_in_helper(x):
    return x * _lookup(_DEFAULTS, "scale") + _lookup(_DEFAULTS, "bias", 0.5)


@case((3,))
def try_except_key_error_inline(x):
    opts = {"a": 1}
    try:
        b = opts["b"]
    except KeyError:
        b = 3
    return x + b


@case((3,))
def try_except_else_finally(x):
    y = x
    try:
        y = y * 2
    except ValueError:
        y = y - 100
    else:
        y = y + 1
    finally:
        y = y + 10
    return y


class ConfigError(ValueError):
    pass


def _check_mode(mode):
    if mode not in ("sum", "mean"):
        raise ConfigError(f"unknown mode {mode!r}")
    return mode


@case((2, 3))
def raise_user_exception_caught(x):
    try:
        mode = _check_mode("max")
    except ConfigError as e:
        mode = "sum" if "max" in str(e) else "mean"
    return x.sum() if mode == "sum" else x.mean()


@case((2, 3))
def except_tuple_of_classes(x):
    try:
        n = int("not a number")
    except (TypeError, ValueError):
        n = 4
    return x * n


@case((4,))
def index_error_caught(x):
    dims = [1, 2]
    try:
        d = dims[5]
    except IndexError:
        d = -1
    return x * d


@case((3,))
def stop_iteration_from_next(x):
    it = iter([])
    try:
        first = next(it)
    except StopIteration:
        first = 7
    return x + first


@case((3,))
def attribute_error_caught(x):
    cfg = _Cfg()
    try:
        eps = cfg.eps
    except AttributeError:
        eps = 1e-5
    return x + eps


class _Cfg:
    hidden = 4


@case((3,))
def nested_try_reraise(x):
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ValueError("wrapped")
    except ValueError as e:
        msg = str(e)
    return x * len(msg)


# ---- user classes built inside the compiled code ----
class Output(dict):
    """A dict subclass that also exposes its keys as attributes (like HF's ModelOutput)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@case((2, 3))
def dict_subclass_output(x):
    out = Output()
    out["logits"] = x * 2
    out.hidden = x + 1
    out.skipped = None
    return out, out.logits, out.to_tuple(), len(out), "hidden" in out, "skipped" in out


from collections import OrderedDict  # noqa: E402
from dataclasses import dataclass, fields  # noqa: E402
from typing import Optional  # noqa: E402


class OutputBase(OrderedDict):
    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclass
class LayerOutput(OutputBase):
    last_hidden_state: Optional[torch.Tensor] = None
    attentions: Optional[tuple] = None
    aux_loss: Optional[torch.Tensor] = None


@case((2, 4))
def dataclass_ordereddict_output(x):
    out = LayerOutput(last_hidden_state=x.relu(), attentions=(x.softmax(-1),))
    first = out[0]
    by_name = out["last_hidden_state"]
    return out, first + by_name, list(out.keys()), out.aux_loss is None


@case((2, 4))
def dataclass_output_positional(x):
    out = LayerOutput(x * 3)
    return out.to_tuple(), len(out)


class Counter:
    __slots__ = ()


@dataclass
class Box:
    lo: float
    hi: float = 1.0

    def __post_init__(self):
        if self.lo > self.hi:
            self.lo, self.hi = self.hi, self.lo

    @property
    def width(self):
        return self.hi - self.lo


@case((3,))
def plain_dataclass_post_init(x):
    b = Box(2.0, 0.5)
    return x.clamp(b.lo, b.hi) * b.width


class Registry:
    def __init__(self):
        object.__setattr__(self, "_items", {})

    def __setattr__(self, name, value):
        self._items[name] = value

    def __getitem__(self, name):
        return self._items[name]


@case((3,))
def custom_setattr_routes_to_dict(x):
    r = Registry()
    r.scale = 3
    r.bias = x + 1
    return x * r["scale"] + r["bias"]


from collections.abc import Sequence  # noqa: E402


class LayerView(Sequence):
    def __init__(self, n):
        self._n = n

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i >= self._n:
            raise IndexError(i)
        return i + 1


@case((3,))
def abc_sequence_iterated(x):
    view = LayerView(3)
    total = 0
    for v in view:
        total += v
    return x * total, len(view), list(view), 2 in view


class Cache:
    def __init__(self, layers=None):
        self.layers = layers if layers is not None else []

    def update(self, k, idx):
        while len(self.layers) <= idx:
            self.layers.append(None)
        if self.layers[idx] is None:
            self.layers[idx] = k
        else:
            self.layers[idx] = torch.cat([self.layers[idx], k], dim=-1)
        return self.layers[idx]


class DynamicCache(Cache):
    def __init__(self, n):
        super().__init__(layers=[None] * n)


@case((2, 3))
def cache_object_built_and_returned(x):
    cache = DynamicCache(2)
    a = cache.update(x, 0)
    b = cache.update(x * 2, 0)
    return b.sum() + a.sum(), cache


@case((3,))
def super_init_chain_with_kwargs(x):
    c = DynamicCache(n=1)
    c.update(x, 0)
    return c.layers[0] * len(c.layers)


# ---- inspect and type introspection on constants ----
import inspect  # noqa: E402


def _chunk_fn(a, b):
    return a + b


@case((3,))
def inspect_signature_parameters(x):
    n = len(inspect.signature(_chunk_fn).parameters)
    return x * n, "b" in inspect.signature(_chunk_fn).parameters


@case((3,))
def str_of_type(x):
    rep = str(type(x))
    return x + (1 if rep.startswith("<class 'torch.") else 0)


class ChunkedFF(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def chunk(self, h):
        return self.lin(h)

    def forward(self, x):
        n_args = len(inspect.signature(self.chunk).parameters)
        if n_args != 1:
            raise ValueError(f"chunk expects {n_args} arguments")
        return self.chunk(x)


module_case(ChunkedFF, (2, 4))


# ---- context managers made inside the compiled code ----
class Recorder:
    def __init__(self, log):
        self.log = log
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.depth -= 1
        self.log.append("exit" if exc_type is None else "exit:" + exc_type.__name__)
        return False


@case((3,))
def user_context_manager(x):
    log = []
    with Recorder(log) as r:
        y = x * 2 + r.depth
    return y, log, r.depth


class Suppress:
    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return exc_type is not None and issubclass(exc_type, self.kinds)


@case((3,))
def context_manager_suppresses_exception(x):
    y = x + 1
    with Suppress(KeyError):
        y = y * 2
        raise KeyError("dropped")
    return y


@case((3,))
def exception_through_context_manager_caught_outside(x):
    log = []
    try:
        with Recorder(log):
            y = x - 1
            raise ValueError("out")
    except ValueError:
        y = x + 100
    return y, log


import contextlib  # noqa: E402


@case((3,))
def nullcontext_block(x):
    with contextlib.nullcontext(x) as same:
        return same * 3


@case((3,))
def grad_mode_block_left_by_exception(x):
    try:
        with torch.no_grad():
            y = x * 2
            raise RuntimeError("leave")
    except RuntimeError:
        pass
    return y + 1, torch.is_grad_enabled()


# ---- more objects: classmethod constructors, properties with setters, __missing__ ----
class Settings:
    def __init__(self, width, depth=2):
        self.width = width
        self._depth = depth

    @classmethod
    def from_dict(cls, d):
        return cls(d["width"], depth=d.get("depth", 1))

    @staticmethod
    def scale_for(width):
        return width ** 0.5

    @property
    def depth(self):
        return self._depth

    @depth.setter
    def depth(self, v):
        self._depth = max(1, v)


@case((3,))
def classmethod_constructor_and_property_setter(x):
    s = Settings.from_dict({"width": 16})
    s.depth = 0
    return x * s.scale_for(s.width) + s.depth, type(s).__name__, isinstance(s, Settings)


class Defaults(dict):
    def __missing__(self, key):
        return 0


@case((3,))
def dict_subclass_missing(x):
    d = Defaults(a=2)
    return x * d["a"] + d["b"], len(d)


class Node:
    def __init__(self, value, children=()):
        self.value = value
        self.children = list(children)

    def total(self):
        return self.value + sum(c.total() for c in self.children)


@case((2, 2))
def nested_objects_returned(x):
    tree = Node(x, [Node(x * 2), Node(x + 1, [Node(x - 3)])])
    return tree.total(), tree


class Meter:
    count = 0

    def __init__(self):
        self.values = []

    def __len__(self):
        return len(self.values)

    def add(self, v):
        self.values.append(v)
        return self


@case((3,))
def object_len_and_truth(x):
    m = Meter()
    empty = not m
    m.add(x).add(x * 2)
    return sum(m.values), len(m), empty, bool(m)


@case((2, 3))
def getattr_default_on_object(x):
    s = Settings(4)
    eps = getattr(s, "eps", 1e-6)
    return x + eps + getattr(s, "width"), hasattr(s, "depth"), hasattr(s, "nope")


# ---- torch.compiler.disable, allow_in_graph, graph_break ----
def _log_value(t):
    return float(t.sum())


@torch.compiler.disable
def log_stats(t):
    return _log_value(t)  # runs eagerly, and nothing it calls is captured


@case((3,))
def calls_disabled_function(x):
    y = x * 2
    s = log_stats(y)
    return y + 1, s


@case((3,))
def explicit_graph_break(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def fused_gelu(a):
    return a * torch.sigmoid(1.702 * a)


torch.compiler.allow_in_graph(fused_gelu)


@case((2, 3))
def allow_in_graph_function(x):
    return fused_gelu(x) + fused_gelu(x * 2)


# ---- dict views are live; x.shape stays a torch.Size ----
@case((3,))
def dict_views_see_later_changes(x):
    d = {"a": 1}
    keys, values, items = d.keys(), d.values(), d.items()
    d["b"] = 2
    del d["a"]
    return x * len(keys), list(keys), list(values), list(items), "b" in keys, 2 in values


@case((3,))
def dict_view_iterated_after_update(x):
    opts = {"scale": 2}
    names = opts.keys()
    opts.update({"shift": 1})
    total = x
    for k in names:
        total = total + opts[k]
    return total, sorted(names)


@case((2, 3))
def shape_is_torch_size(x):
    s = x.shape
    return isinstance(s, torch.Size), s[1:], x.new_zeros(s)


# more cases (sets, match, functools, itertools, collections, ...) live in their own file
import python_cases_more  # noqa: E402,F401  (appends to CASES)
import python_cases_idioms  # noqa: E402,F401  (the constructs above, as model code writes them)
import python_cases_library  # noqa: E402,F401  (appends to CASES)
import python_cases_copy  # noqa: E402,F401  (copying and identity)
import python_cases_modules  # noqa: E402,F401  (module hooks)
import python_cases_generators  # noqa: E402,F401  (generators, taken lazily)
import python_cases_closures  # noqa: E402,F401  (closures alive at a graph break)
import python_cases_numpy  # noqa: E402,F401  (NumPy through torch._numpy)
import python_cases_modes  # noqa: E402,F401  (torch function modes)
import python_cases_functorch  # noqa: E402,F401  (torch.func: grad, functional_call)
import python_cases_checkpoint  # noqa: E402,F401  (torch.utils.checkpoint)
import python_cases_iterators  # noqa: E402,F401  (iterator objects, boxes, autograd.Function given lists)
import python_cases_values  # noqa: E402,F401  (descriptors, namedtuples passed in, torch.tensor of scalars)
import python_cases_blocks  # noqa: E402,F401  (graph breaks inside nested with blocks)
import python_cases_subclasses  # noqa: E402,F401  (list subclasses)
import python_cases_einops  # noqa: E402,F401  (einops: patterns, recipes, its torch layers)
