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


class ImportInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        from torch.nn.functional import gelu
        return gelu(self.lin(x))


module_case(ImportInForward, (2, 4))
