"""Cases for copying and identity, written as libraries write them: copy.deepcopy / copy.copy of
option dicts, dataclass configs and objects (transformers' PretrainedConfig.get_text_config deep-copies
its config), memo dicts keyed by id(), registries keyed by classes, classes with their own
__getattribute__ (transformers' configs alias attribute names through one), setattr/delattr/del of
attributes. Appended to python_cases.CASES; each runs against eager and torch._dynamo.explain."""
import copy
import dataclasses

import torch
import torch.nn as nn

from python_cases import case, module_case

_DEFAULTS = {"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "scale": 2, "names": ("a", "b")}


@case((3,))
def deepcopy_defaults_then_override(x):
    opts = copy.deepcopy(_DEFAULTS)
    opts["optim"]["lr"] = 0.5
    opts["optim"]["betas"].append(0.999)
    return x * opts["optim"]["lr"] * opts["scale"], opts, _DEFAULTS


@case((3,))
def shallow_copy_shares_nested(x):
    base = {"layers": [1, 2], "act": "gelu"}
    mine = copy.copy(base)
    mine["act"] = "relu"
    mine["layers"].append(3)  # shared with base, as in eager
    row = [x, x + 1]
    row2 = copy.copy(row)
    row2.append(x + 2)
    return len(row), len(row2), base, mine


@dataclasses.dataclass
class HeadConfig:
    hidden: int = 4
    heads: int = 2
    dropout: float = 0.0
    tags: list = dataclasses.field(default_factory=lambda: ["base"])


def _head_config(seed):
    return [HeadConfig(hidden=5, tags=["base", "shared"])]


@case((3,), extra=_head_config)
def deepcopy_dataclass_config_argument(x, cfg):
    decoder = copy.deepcopy(cfg)
    decoder.hidden = cfg.hidden * 2
    decoder.tags.append("decoder")
    return x * decoder.hidden + cfg.hidden, decoder.tags, cfg.tags


class Span:
    def __init__(self, start, end, meta=None):
        self.start = start
        self.end = end
        self.meta = meta if meta is not None else {}


@case((4,))
def deepcopy_object_made_in_trace(x):
    a = Span(0, 2, {"kind": ["word"]})
    b = copy.deepcopy(a)
    b.end = 3
    b.meta["kind"].append("char")
    return x[a.start:b.end], a.meta, b.meta, b is a


@case((3,))
def deepcopy_keeps_shared_references(x):
    shared = [1, 2]
    pair = {"left": shared, "right": shared}
    twin = copy.deepcopy(pair)
    twin["left"].append(3)
    return x + len(twin["right"]), twin["left"] is twin["right"], pair


@case((3,))
def deepcopy_of_tensor_breaks(x):
    y = x * 2
    z = copy.deepcopy(y)
    return z + 1


@case((3,))
def memo_dict_keyed_by_id(x):
    a = [1]
    b = a
    c = [1]
    seen = {}
    for obj in (a, b, c):
        seen.setdefault(id(obj), obj)
    return x * len(seen), id(a) == id(b), id(a) == id(c), id(a) in seen


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 3, bias=False)
        self.head = nn.Linear(3, 3, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        tied = id(self.head.weight) == id(self.embed.weight)
        y = self.embed(x)
        return self.head(y) if tied else y


module_case(Tied, (2, 3))


def _as_int(v):
    return int(v)


def _as_float(v):
    return float(v) * 2.0


_CONVERTERS = {int: _as_int, float: _as_float, bool: _as_int}


@case((3,))
def registry_keyed_by_class(x):
    total = x
    for v in (1, 2.5, True):
        convert = _CONVERTERS.get(type(v))
        if convert is not None:
            total = total + convert(v)
    return total, str in _CONVERTERS, float in _CONVERTERS


class AliasedConfig:
    attribute_map = {"num_layers": "n_layer", "hidden_size": "n_embd"}

    def __init__(self, n_layer=2, n_embd=8):
        self.n_layer = n_layer
        self.n_embd = n_embd

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


@case((3,))
def getattribute_aliases_names(x):
    cfg = AliasedConfig(n_layer=3)
    return x * cfg.num_layers + cfg.hidden_size, hasattr(cfg, "missing"), getattr(cfg, "num_layers")


@case((3,))
def setattr_delattr_and_del(x):
    s = Span(1, 2)
    for name, value in (("scale", 2), ("shift", 1)):
        setattr(s, name, value)
    s.extra = x
    del s.extra
    delattr(s, "meta")
    return x * s.scale + s.shift, hasattr(s, "extra"), hasattr(s, "meta"), sorted(vars(s))


@case((3,))
def del_missing_attribute_raises(x):
    s = Span(1, 2)
    try:
        del s.nothing
    except AttributeError:
        return x + 1
    return x - 1


@case((3,))
def config_with_aliases_deep_copied(x):
    base = AliasedConfig(n_layer=2, n_embd=4)
    dec = copy.deepcopy(base)
    dec.n_layer = 5
    return x * dec.num_layers + base.num_layers, dec.hidden_size


# ---- functools.partial over values of the trace (tensors, methods, functions made here) ----
import functools  # noqa: E402
import torch.nn.functional as F  # noqa: E402


@case((3,))
def partial_binds_a_tensor(x):
    add_x = functools.partial(torch.add, other=x)
    return add_x(x * 2), add_x(torch.ones(3), other=x + 1)


@case((2, 4))
def partial_of_local_function_and_nesting(x):
    def scaled_act(t, scale, shift=0.0):
        return F.gelu(t) * scale + shift

    act = functools.partial(scaled_act, scale=x.mean())
    act2 = functools.partial(act, shift=1.0)
    return act2(x), act2.func is scaled_act, len(act2.args), sorted(act2.keywords)


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 8)
        self.gate_bias = nn.Parameter(torch.zeros(4))

    def _gated(self, t, bias):
        a, b = t.chunk(2, dim=-1)
        return a * torch.sigmoid(b + bias)

    def forward(self, x):
        gated = functools.partial(self._gated, bias=self.gate_bias)
        return [gated(self.proj(h)) for h in (x, x * 2)]


module_case(GatedBlock, (3, 4))


# ---- descriptors on objects made in the trace; torch.distributions (both inline Python __get__) ----
class CachedStats:
    def __init__(self, t):
        self.t = t

    @functools.cached_property
    def norm(self):
        return self.t.norm()


@case((3,))
def cached_property_on_object(x):
    s = CachedStats(x)
    first = s.norm
    return first * 2 + s.norm, "norm" in vars(s)


@case((2, 3))
def normal_log_prob_and_entropy(x):
    d = torch.distributions.Normal(x.mean(dim=-1, keepdim=True), x.std(dim=-1, keepdim=True) + 1)
    return d.log_prob(x), d.entropy(), d.mean


@case((2, 4))
def categorical_policy_head(x):
    dist = torch.distributions.Categorical(logits=x)
    actions = torch.tensor([1, 3])
    return dist.log_prob(actions), dist.entropy().mean(), dist.probs


@case((2, 3))
def bernoulli_from_sigmoid(x):
    d = torch.distributions.Bernoulli(probs=torch.sigmoid(x))
    return d.log_prob(torch.ones(2, 3)), d.mean, d.variance


# ---- functions made in the trace (no closure) live across a graph break: rebuilt by the split ----
import io  # noqa: E402

_LOG = io.StringIO()


@case((3,))
def local_helper_breaks_inside(x):
    def inner(t, k=2):
        t = t + 1
        print("inner", file=_LOG)
        return t * k
    return inner(x) - 1


@case((4,))
def lambda_kept_across_break(x):
    scale = lambda t, *, by=2.0: t * by  # noqa: E731
    y = scale(x)
    print("between", file=_LOG)
    return scale(y, by=0.5) + 1, scale.__name__
