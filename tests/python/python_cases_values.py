"""Plain-Python cases for test_python_cases.py on values that come in from outside or are made from
other traced values, and Python protocols real model code uses: typed-field descriptors (a class
whose own __get__/__set__ keep a checked value in the instance's __dict__), namedtuples and
typing.NamedTuples passed in (unpacked, indexed, iterated, their methods called), torch.tensor([...])
of one-element tensors and of NumPy scalars, torch.numel, unary operators (-v, ~v, abs(v)) defined by
a Python class, slices holding a tensor, keyword arguments named by Python keywords, class attributes
of modules, assert on a tensor, modules built in forward (an activation lookup table),
@contextmanager generators given the block's exception, generator.send, and torch.compile inside
the compiled code. Appended to python_cases.CASES like python_cases_more's."""
import collections
import contextlib
import dataclasses
import io
import math
import operator
import typing

import numpy as np
import torch
import torch.nn as nn

from python_cases import DIFFERS, NOT_YET, case, module_case
from python_cases_library import _trainable  # a weight that requires grad


# ---- descriptors of Python classes: __set__ and __get__ inlined ----
class Clamped:
    """A validated field in the style of config libraries: stored in obj.__dict__ under its name."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return obj.__dict__[self.name]

    def __set__(self, obj, value):
        obj.__dict__[self.name] = min(max(value, self.low), self.high)


class Scaled:
    """A field kept under a private name and read back scaled (setattr/getattr on the instance)."""

    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, obj, objtype=None):
        return self if obj is None else getattr(obj, self.private) * 2

    def __set__(self, obj, value):
        setattr(obj, self.private, value + 1)


class DropoutConfig:
    rate = Clamped(0.0, 0.9)
    temperature = Clamped(0.5, 4.0)

    def __init__(self, rate, temperature=1.0):
        self.rate = rate
        self.temperature = temperature


class Gain:
    weight = Scaled()

    def __init__(self, weight):
        self.weight = weight


class Stored:
    """No `obj is None` case: read through the class, it raises (guards must not read it so)."""

    def __set_name__(self, owner, name):
        self.key = "_" + name

    def __get__(self, obj, objtype=None):
        return obj.__dict__[self.key]

    def __set__(self, obj, value):
        obj.__dict__[self.key] = value


class Calibration:
    bias = Stored()

    def __init__(self, bias):
        self.bias = bias


@case((3,), extra=lambda seed: (Calibration(0.5),))
def descriptor_without_class_access_read_and_set(x, cal):
    cal.bias = cal.bias + 1.0
    return x + cal.bias


@case((3, 4))
def descriptor_fields_of_config_made_inside(x):
    cfg = DropoutConfig(1.7, temperature=0.1)  # both clamped by __set__
    return torch.softmax(x / cfg.temperature, dim=-1) * (1 - cfg.rate)


@case((3,), extra=lambda seed: (DropoutConfig(0.25),))
def descriptor_field_set_on_config_passed_in(x, cfg):
    x = x * 2
    cfg.temperature = 9.0  # clamped to 4.0, written into the caller's object
    return x / cfg.temperature + cfg.rate


@case((3,), extra=lambda seed: (Gain(torch.full((3,), float(seed))),))
def descriptor_writing_private_attr_then_read(x, g):
    g.weight = x  # stored as g._weight = x + 1
    return g.weight + g._weight


@case((3,))
def descriptor_field_of_object_made_and_returned(x):
    g = Gain(x.sum())
    g.weight = g.weight * 3
    return g._weight, x + g.weight


# ---- namedtuples passed in: tuples of their class ----
LSTMState = collections.namedtuple("LSTMState", ["h", "c"])


class Boxes(typing.NamedTuple):
    xyxy: torch.Tensor
    scores: torch.Tensor
    min_score: float = 0.0

    @property
    def widths(self):
        return self.xyxy[:, 2] - self.xyxy[:, 0]

    def kept(self):
        return self.scores > self.min_score


class Span(collections.namedtuple("Span", "start end")):
    __slots__ = ()

    def length(self):
        return self.end - self.start


class Record(collections.namedtuple("Record", "key value")):  # no __slots__: instances have a __dict__
    def doubled(self):
        return self._replace(value=self.value * 2)


class LSTMCellStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(4, 4)

    def forward(self, x, state):
        h, c = state  # the state tuple of the previous step, unpacked
        h, c = self.cell(x, (h, c))
        return h, LSTMState(h, c)


module_case(LSTMCellStep, (2, 4),
            extra=lambda seed: (LSTMState(torch.randn(2, 4, generator=torch.Generator().manual_seed(seed)), torch.zeros(2, 4)),))


@case((3,), extra=lambda seed: (LSTMState(torch.full((3,), 1.0 + seed), torch.ones(3)),))
def namedtuple_passed_in_indexed_and_iterated(x, state):
    total = sum(t * x for t in state)
    return total + state[-1] * len(state), state.h


@case(extra=lambda seed: (Boxes(torch.tensor([[0.0, 0.0, 2.0, 1.0], [1.0, 1.0, 4.0, 3.0]]) + seed,
                                torch.tensor([0.3, 0.7]), 0.5),))
def typing_namedtuple_passed_in_property_and_method(boxes):
    xyxy, scores, _ = boxes
    return boxes.widths * boxes.kept(), xyxy.sum(), scores.max(), boxes._replace(min_score=1.0).min_score


@case((3,), extra=lambda seed: ([Span(0, 2), Span(1, 3)],))
def namedtuple_subclass_method_in_list(x, spans):
    return sum(x[s.start:s.end].sum() * s.length() for s in spans)


@case((3,), extra=lambda seed: (Record("w", torch.full((3,), float(seed))),))
def namedtuple_subclass_with_dict_unpacked(x, rec):
    key, value = rec.doubled()
    return x * value, key.upper(), isinstance(rec, tuple)


@case((2, 3), extra=lambda seed: (LSTMState(torch.ones(2, 3) * seed, torch.ones(2, 3)),))
def namedtuple_asdict_fields_and_return(x, state):
    parts = state._asdict()
    out = {name: v + x for name, v in parts.items()}
    return LSTMState(**out), state._fields, state


# ---- namedtuple classes made in the forward (collections.namedtuple called in the trace) ----
# The compiled code makes the class once, as torch.compile does (eager makes one per call), so these
# return what a caller reads of the tuples -- their items, fields, class name and module -- and not
# the tuples themselves, whose class is a different object on each eager call.
@case((3,))
def namedtuple_class_made_in_the_forward(x):
    Stats = collections.namedtuple("Stats", ["mean", "std", "count"])
    s = Stats(x.mean(), x.std(), x.numel())
    s2 = s._replace(count=s.count * 2)
    return tuple(s2), s2._asdict(), s._fields, type(s).__name__, type(s).__module__, isinstance(s, tuple)


@case((2, 3))
def namedtuple_made_with_defaults_and_renamed_fields(x):
    Out = collections.namedtuple("Out", "logits loss extra", defaults=(None, 0))
    Row = collections.namedtuple("Row", ["ok", "def", "ok"], rename=True)
    o = Out(x.softmax(-1))
    r = Row(1, 2, 3)
    return o.logits, o.loss, o.extra, Row._fields, tuple(r), o[0] * 2, Out._field_defaults


@case((3,))
def namedtuple_made_from_field_names_computed_in_the_forward(x):
    names = [f"h{i}" for i in range(3)]
    Hidden = collections.namedtuple(f"Hidden{len(names)}", names)
    h = Hidden._make(x * i for i in range(3))
    total = sum(h)
    return total, h.h2 - h.h0, Hidden.__name__, len(Hidden._fields)


@case((3,))
def namedtuple_made_in_the_forward_lives_across_a_break(x):
    Pair = collections.namedtuple("Pair", "a b")
    p = Pair(x + 1, x * 2)
    torch._dynamo.graph_break()
    return p.a + p.b, tuple(p), type(p).__name__


# ---- torch.tensor of one-element tensors and of NumPy scalars ----
@case((4, 3))
def tensor_of_reduced_statistics(x):
    stats = torch.tensor([x.min(), x.max(), x.mean(), 0.5])
    return (x - stats[0]) / (stats[1] - stats[0]) + stats[2] * stats[3]


@case((3,))
def tensor_of_count_and_constant_with_dtype(x):
    positive = (x > 0).sum()
    return torch.tensor([positive, x.numel()], dtype=torch.float32) / 2


@case((3,))
def tensor_of_numpy_scalars(x):
    table = np.array([0.5, 1.5, 2.5, 3.5])
    return x * torch.tensor([table[0], table[2], table.mean()])


# ---- torch.numel: the tensor's numel() ----
@case((2, 5))
def torch_numel_normalises(x):
    x = x.abs()
    return x.sum() / torch.numel(x), torch.numel(x[0])


# ---- unary operators of a Python class ----
class Quaternion:
    def __init__(self, q):
        self.q = q

    def __neg__(self):
        return Quaternion(-self.q)

    def __pos__(self):
        return self

    def __invert__(self):  # the conjugate
        return Quaternion(self.q * torch.tensor([1.0, -1.0, -1.0, -1.0]))

    def __abs__(self):
        return self.q.norm(dim=-1)


@case((2, 4))
def unary_operators_of_python_class(x):
    q = Quaternion(x)
    return (-q).q, (+q).q, (~q).q, abs(q) * math.pi


@case((2, 4), extra=lambda seed: (Quaternion(torch.full((4,), 1.0 + seed)),))
def unary_operators_of_object_passed_in(x, q):
    return x + (-q).q, abs(~q)


# ---- a slice object holding a tensor bound, made before a break ----
@case((6,), extra=lambda seed: (torch.tensor([2 + seed]),))
def slice_object_with_tensor_start(x, offsets):
    window = slice(offsets[0], None)  # the tensor is read as an index: a break, as in TorchDynamo
    return x[window] * 2


# ---- keyword arguments whose names are Python keywords ----
@case((4,))
def keyword_named_from_passed_by_dict(x):
    y = x * 2
    return y + x.clone().random_(**{"from": 3, "to": 4})  # always 3


# ---- tensor state the example does not have ----
@case((3,))
def version_counter_around_in_place(x):
    before = x._version
    x.add_(1)
    return x._version - before


NOT_YET["version_counter_around_in_place"] = (
    "Tensor._version breaks (the value would be the example's, not the tensor's); TorchDynamo traces it: 1 graph")


# ---- a tensor held by the module's class ----
class ClassConstantOffset(nn.Module):
    offset = torch.tensor([0.5, -1.0, 2.0])  # shared by every instance
    scales = (1.0, 2.0)

    def forward(self, x):
        return (x + self.offset) * self.scales[1]


module_case(ClassConstantOffset, (2, 3))


# ---- assert over a tensor: torch._assert_async in the graph ----
@case((4,))
def assert_on_tensor_condition(x):
    y = x.abs() + 1
    assert (y > 0).all(), "magnitudes must be positive"
    assert y.numel() == 4
    assert y.min() >= 1
    return y.log()


# ---- a tensor in an empty list (registries of tensors seen so far) ----
@case((3,))
def tensor_in_empty_registry(x):
    seen = []
    y = x * 2
    if y in seen:
        return y
    seen.append(y)
    return y + len(seen)


# ---- modules built in forward whose own __init__ is Python ----
class ScaledGELU(nn.Module):  # in the style of transformers' activations, built by a lookup table
    def __init__(self, scale=1.0, approximate=False):
        super().__init__()
        self.scale = scale
        self.act = self._tanh_gelu if approximate else nn.functional.gelu

    def _tanh_gelu(self, x):
        return nn.functional.gelu(x, approximate="tanh")

    def forward(self, x):
        return self.act(x) * self.scale


class _Lookup(dict):
    def __getitem__(self, key):
        cls, kwargs = super().__getitem__(key)
        return cls(**kwargs)


ACTIVATIONS = _Lookup({"gelu": (ScaledGELU, {}), "gelu_tanh_x2": (ScaledGELU, {"scale": 2.0, "approximate": True})})


class PooledHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(4, 4)

    def forward(self, hidden):
        pooled = self.dense(hidden[:, 0])
        return ACTIVATIONS["gelu"](pooled) + ACTIVATIONS["gelu_tanh_x2"](pooled)


module_case(PooledHead, (2, 3, 4))


class Jitter(nn.Module):  # its __init__ makes a tensor: each call's module has its own
    def __init__(self):
        super().__init__()
        self.offset = torch.arange(3.0)

    def forward(self, x):
        return x + self.offset


@case((3,))
def module_with_state_built_in_forward(x):
    return Jitter()(x + 1) * 2


class RotaryTable(nn.Module):
    """Rotary position tables computed in __init__ and kept as a non-persistent buffer."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        return torch.cat([freqs.cos(), freqs.sin()], dim=-1)


@case((5, 4))
def rotary_table_built_in_forward(x):
    table = RotaryTable(x.shape[-1])(torch.arange(x.shape[0]))
    return x * table


class Affine(nn.Module):
    def __init__(self, scale, shift=None):
        super().__init__()
        self.scale = scale
        self.shift = shift if shift is not None else torch.zeros(())

    def forward(self, x):
        return x * self.scale + self.shift


class CenteredAffine(Affine):
    def __init__(self, scale):
        super().__init__(scale, shift=-scale)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(super().forward(x))


@case((4, 3))
def modules_built_from_tensors_in_forward(x):
    norm = Affine(1.0 / (x.std() + 1e-5), -x.mean() / (x.std() + 1e-5))
    return norm(x), CenteredAffine(x.abs().max())(x)


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


@case((3,))
def attribute_set_in_forward_of_a_module_built_in_forward(x):
    m = CallCounter()
    a = m(x)
    b = m(x)
    return a + b, m.calls




# ---- @contextmanager generators: the with-block's exception thrown into the generator ----
@contextlib.contextmanager
def ignoring_overflow():
    try:
        yield
    except OverflowError:  # swallowed: the with statement goes on after the block
        pass


@contextlib.contextmanager
def tracked(log, tag):
    log.append("enter " + tag)
    try:
        yield len(log)
    finally:
        log.append("exit " + tag)  # runs on the way out of an exception too


@case((3,))
def contextmanager_swallows_exception_of_block(x):
    y = x + 1
    with ignoring_overflow():
        y = y * 2
        raise OverflowError("clipped")
    return y - 1


@case((3,), extra=lambda seed: ([],))
def contextmanager_finally_then_exception_caught_outside(x, log):
    y = x + 1
    try:
        with tracked(log, "outer") as depth:
            y = y * depth
            raise KeyError("missing")
    except KeyError:
        y = y - 1
    return y + 1


@case((3,))
def generator_send_accumulates(x):
    def running_sum():
        total = 0
        while True:
            value = yield total
            total = total + value
    acc = running_sum()
    next(acc)
    acc.send(x)
    return acc.send(x * 2)


# ---- torch.compile inside the compiled code: what it compiles, captured with the rest ----
def _double_unless(x, scale=None):
    if scale is None:
        scale = 2
    return x * scale


_compiled_double = torch.compile(_double_unless, backend="eager")


@case((3,))
def torch_compile_called_inside(x):
    return torch.compile(_double_unless, backend="eager")(x) + 1


@case((3,))
def torch_compiled_function_from_outside(x):
    return _compiled_double(x + 1, scale=3) - 1


_compiled_linear = torch.compile(nn.Linear(3, 3), backend="eager")


@case((2, 3))
def torch_compiled_module_from_outside(x):
    return _compiled_linear(x).relu()


# ---- Tensor.data: a tensor sharing the storage, outside autograd (EMA updates, weight clipping) ----
def _ema_state(seed):
    g = torch.Generator().manual_seed(seed)
    params = [nn.Parameter(torch.randn(3, 3, generator=g)), nn.Parameter(torch.randn(3, generator=g))]
    shadow = [p.detach().clone() + 0.5 for p in params]
    return params, shadow


@case((4, 3), extra=_ema_state)
def ema_update_through_data(x, params, shadow):
    decay = 0.9
    for s, p in zip(shadow, params):
        s.data.mul_(decay).add_(p.data, alpha=1 - decay)
    return x @ shadow[0] + shadow[1]


@case((4, 3), extra=_ema_state)
def parameter_data_read_is_outside_autograd(x, params, shadow):
    w = params[0].data
    y = x @ w
    z = x @ params[0]
    return y, y.requires_grad, z.requires_grad, w.requires_grad


@case((4, 3), extra=_ema_state)
def copy_into_parameter_data(x, params, shadow):
    params[0].data.copy_(shadow[0] * 2)
    return x @ params[0]


class ClippedCritic(nn.Module):
    """A WGAN critic that clips its weights before scoring (the original paper's recipe)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
        self.clip = 0.1

    def forward(self, x):
        for p in self.parameters():
            p.data.clamp_(-self.clip, self.clip)
        return self.net(x).mean()


module_case(ClippedCritic, (6, 3))


# ---- a sequence indexed by a key it does not take: eager's TypeError, raised in the trace ----
@case((3,))
def tuple_output_read_by_key_falls_back_to_position(x):
    out = (x + 1, x * 2)
    try:
        hidden = out["last_hidden_state"]
    except TypeError:
        hidden = out[0]
    return hidden.sin()


@case((3,))
def list_indexed_by_none_is_caught_with_its_message(x):
    layers = [x + 1]
    try:
        y = layers[None]
    except TypeError as e:
        y = layers[0] * len(str(e))
    return y


# ---- grad mode set by a direct torch._C._set_grad_enabled call (a context manager class's __enter__) ----
class FrozenSection:
    """Turns autograd off for a block the way some training utilities do it, through torch._C."""

    def __enter__(self):
        self.prev = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prev)
        return False


@case((3,), extra=_trainable)
def grad_mode_of_a_section_that_calls_torch_c_directly(x, w):
    with FrozenSection():
        frozen = x * w
        if torch.is_grad_enabled():
            frozen = frozen - 100
    live = x * w
    return frozen, frozen.requires_grad, live.requires_grad, torch.is_grad_enabled()


# ---- locals() and globals() of the compiled frame ----
_OFFSET = 0.25


@case((3,))
def options_taken_from_locals(x, scale=2.0, shift=1.0):
    opts = dict(locals())
    opts.pop("x")
    return x * opts["scale"] + opts["shift"], sorted(opts)


@case((3,))
def constant_read_through_globals(x):
    return x + globals()["_OFFSET"]


# ---- Python attributes set on a tensor from outside ----
def _tagged(seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(3, generator=g)
    t.loss_scale = 4.0
    return (t,)


@case(extra=_tagged)
def python_attributes_of_a_tensor_passed_in(t):
    scale = getattr(t, "loss_scale", 1.0)
    name = getattr(t, "tag_name", "none")
    return t * scale, hasattr(t, "loss_scale"), hasattr(t, "tag_name"), name


# ---- a class defined in the compiled function whose method reads a variable assigned after it ----
@case((3,))
def method_of_a_local_class_reads_the_variable_as_it_is_later(x):
    offset = 0
    class Shift:
        def apply(self, t):
            return t + offset
    offset = 1
    return Shift().apply(x)


# ---- Python attributes set on tensors in the trace: read back, and set on the real tensors ----
@case((4,))
def marker_set_on_an_activation_and_read_back(x):
    # activation offloading's style: a flag on an intermediate that later code asks for
    h = x * 2
    h.offload = True
    y = h + 1 if getattr(h, "offload", False) else h - 1
    return y, h, hasattr(h, "offload")


@case((3,))
def tag_set_on_an_input_tensor(x):
    x.seen_by = "encoder"
    return x + 1, x.seen_by


# ---- small protocol answers library code relies on ----
@case((3, 2))
def named_result_rebuilt_by_its_class(x):
    # what torch.utils._pytree's unflatten does to an operator's named result: its class called with
    # the new fields
    r = torch.max(x, dim=1)
    again = type(r)((r.values * 2, r.indices))
    return again.values, again.indices, type(again).__name__


@case((3, 2))
def named_result_mapped_by_pytree(x):
    # torch.utils._pytree over an operator's named result: the flatten/unflatten functions
    # torch.return_types registers are Python, inlined as the rest of pytree is
    import torch.utils._pytree as pytree
    r = pytree.tree_map(lambda t: t * 2, torch.max(x, dim=1))
    return r.values, r.indices, type(r).__name__


_POINTWISE = frozenset([torch.relu, torch.sigmoid, torch.tanh])


@case((4,), extra=lambda s: [torch.sigmoid])
def dispatch_by_membership_in_a_frozenset(x, fn):
    if fn in _POINTWISE:
        return fn(x)
    return x * 2


@case((4,), extra=lambda s: [torch.neg])
def dispatch_by_absence_from_a_frozenset(x, fn):
    if fn not in _POINTWISE:
        return fn(x) * 3
    return fn(x)


@case((2, 3))
def rebuild_a_sequence_by_its_own_class(x):
    rows = (x[0], x[1])
    cols = [x[:, 0], x[:, 1]]
    return rows.__class__(r + 1 for r in rows), cols.__class__(reversed(cols))


@case((2, 3, 4))
def layout_checked_by_dim_order(x):
    y = x.transpose(1, 2)
    return y.contiguous() if y.dim_order() != (0, 1, 2) else y, x.dim_order()


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        # names as a checkpoint would key them, under a prefix
        names = [n for n, _ in self.named_parameters(prefix="encoder")]
        return self.norm(self.proj(x)), names


module_case(_Encoder, (2, 3))


# ---- the operator module's functions, as the statements they spell ----


@case((3,), extra=lambda seed: ([1.0, 2.0], {"n": 3}))
def operator_functions_on_lists_and_dicts(x, xs, d):
    # a dispatch table of operators, as small interpreters and config code keep one (operator.setitem
    # on containers: test_object_protocols.py, TorchDynamo breaks there)
    y = operator.getitem(xs, 0) + operator.getitem(d, "n")  # before: DV0013 on a list
    return operator.add(x, y), operator.contains(d, "n"), operator.is_(y, xs[0]), operator.neg(x), operator.not_(xs)


@case((4,))
def reduces_sizes_with_operator_mul(x):
    import functools
    n = functools.reduce(operator.mul, x.shape + (2,), 1)
    return x.repeat(2) * n, operator.lt(n, 10), operator.truediv(x, 2)


@case((3,))
def enumerates_a_list_it_appends_to(x):
    # the loop reaches what its body appends (enumerate over the list's own iterator)
    work = [x]
    seen = []
    for i, item in enumerate(work):
        if i < 2:
            work.append(item * 2)
        seen.append(item.sum())
    return seen, len(work)


@case((3,))
def zips_strictly_unequal_lengths(x):
    total = x
    try:
        for a, b in zip([1.0, 2.0], [3.0], strict=True):  # ValueError once the pairs are taken
            total = total + a * b
    except ValueError as e:
        return total, str(e)
    return total, ""


@case((3,))
def zips_strictly_a_longer_third_argument(x):
    total = x
    try:
        for a, b, c in zip([1.0, 2.0], [3.0, 4.0], [5.0, 6.0, 7.0], strict=True):  # "arguments 1-2"
            total = total + a * b * c
    except ValueError as e:
        return total, str(e)
    return total, ""


@case((2, 3), (2, 3))
def zips_tensors_strictly_of_equal_lengths(x, y):
    return [a * b for a, b in zip(x, y, strict=True)], list(zip(x.shape, y.shape, strict=True))


@case((3,))
def zips_strictly_equal_lengths(x):
    return [x * a + b for a, b in zip([1.0, 2.0], (3.0, 4.0), strict=True)]


@case((3,))
def merges_a_dict_with_an_ordered_dict(x):
    # OrderedDict's reflected | runs first: the result is an OrderedDict, the left operand's keys first
    merged = {"a": x} | collections.OrderedDict(b=x + 1)
    dd = {"c": 1} | collections.defaultdict(int, d=2)
    return type(merged).__name__, list(merged), merged["b"], type(dd).__name__, dd["missing"] + dd["d"]


def _shift(x, offset=torch.ones(3)):
    return x + offset


@case((3,))
def calls_a_function_with_a_tensor_default(x):
    return _shift(x) * 2  # before: DV0013, the default tensor could not be traced


# ---- str(), repr() and hash() of objects whose class defines them in Python ----
@dataclasses.dataclass(frozen=True)
class RunKey:
    """A frozen dataclass used as a cache key: its generated __hash__ hashes the field tuple."""
    name: str
    rank: int


class Tag:
    def __init__(self, label):
        self.label = label

    def __repr__(self):
        return f"Tag({self.label!r})"


@case((3,))
def hashes_and_names_objects_by_their_own_methods(x):
    key = RunKey("layer", 2)
    same = hash(key) == hash(RunKey("layer", 2))
    return x + same, str(Tag("a")), repr(Tag("b")), f"{Tag('c')}"


@case((3,), (3,))
def removes_a_tensor_from_a_list_by_identity(x, y):
    done = x + 1
    pending = [done, y, x]
    pending.remove(done)  # found as itself, before any value comparison (which would be ambiguous)
    return pending


@case((3,))
def fills_an_ordered_dict_from_keys_with_a_value(x):
    d = collections.OrderedDict.fromkeys(("q", "k", "v"), value=x)
    return d["k"] * 2, list(d)


@case((2, 3))
def asks_is_floating_point_by_keyword(x):
    y = x.long()
    return x * torch.is_floating_point(input=x), torch.is_floating_point(input=y)


# ---- classes with __slots__ (no instance __dict__) made in the trace ----

class RunningMoments:
    """Welford's running mean and variance, kept in slots as numerically careful code keeps it."""
    __slots__ = ("count", "mean", "m2")

    def __init__(self, like):
        self.count = 0
        self.mean = torch.zeros_like(like)
        self.m2 = torch.zeros_like(like)

    def push(self, x):
        self.count += 1
        delta = x - self.mean
        self.mean = self.mean + delta / self.count
        self.m2 = self.m2 + delta * (x - self.mean)

    @property
    def variance(self):
        return self.m2 / max(self.count - 1, 1)


@case((4, 3))
def keeps_running_moments_in_slots(rows):
    stats = RunningMoments(rows[0])
    for r in rows:
        stats.push(r)
    return stats.mean, stats.variance, stats.count


@dataclasses.dataclass(slots=True)
class SamplerConfig:
    temperature: float = 1.0
    top_k: int = 0
    bias: typing.Optional[torch.Tensor] = None


@dataclasses.dataclass(frozen=True, slots=True)
class Scored:
    logits: torch.Tensor
    label: str


@case((2, 5))
def reads_and_writes_a_slots_dataclass(logits):
    cfg = SamplerConfig(top_k=2)
    cfg.temperature = 0.5
    cfg.bias = logits.mean()
    out = Scored((logits - cfg.bias) / cfg.temperature, "scaled")
    return out.logits.topk(cfg.top_k).values, out.label, type(out) is Scored, cfg.top_k


class _Pair:
    __slots__ = ("left", "right")


@case((3,))
def asks_for_unset_and_unknown_slots(x):
    p = _Pair()
    p.left = x * 2
    missing = getattr(p, "right", None) is None and not hasattr(p, "right")
    try:
        p.extra = 1  # no __dict__: AttributeError
        refused = False
    except AttributeError:
        refused = True
    p.right = p.left + 1
    del p.left
    return p.right, missing, refused, hasattr(p, "left")


# ---- torch.nn containers built in the forward of stateless modules ----

class ActivationStack(nn.Module):
    """Builds its activation chain in forward from a name, as small research code does."""

    def __init__(self, kind="gelu"):
        super().__init__()
        self.kind = kind
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        act = nn.GELU() if self.kind == "gelu" else nn.ReLU()
        head = nn.Sequential(act, nn.Dropout(p=0.0), nn.Sequential(nn.Tanh(), nn.Identity()))
        gates = nn.ModuleList([nn.Sigmoid(), nn.Softsign()])
        norms = nn.ModuleDict({"soft": nn.Softmax(dim=-1)})
        h = head(self.proj(x))
        for g in gates:
            h = h * g(h)
        return norms["soft"](h) + len(head)


module_case(ActivationStack, (3, 6))


# ---- del of attributes of objects passed in ----

class StepTracker:
    """Remembers the last output; `del` invalidates it, as code that caches on an object does."""

    def __init__(self):
        self.last = None
        self.steps = 0


@case((3,), extra=lambda seed: (StepTracker(),))
def deletes_and_sets_again_attributes_of_an_object_passed_in(x, tracker):
    tracker.steps += 1
    del tracker.last
    gone = not hasattr(tracker, "last")
    try:
        del tracker.never_set
        raised = False
    except AttributeError:
        raised = True
    tracker.last = x * tracker.steps
    return tracker.last + 1, gone, raised



# ---- builtin comparisons and set operators over traced values ----

@case((4,))
def builds_position_ids_from_a_range(x):
    h = x * 2
    pos = torch.tensor(range(h.size(0)))  # as older model code builds position ids
    odd = torch.tensor(range(1, 2 * h.size(0), 2), dtype=x.dtype)
    return h + pos, odd * h


@case((3,))
def compares_tuples_holding_the_same_tensor(x):
    y = x + 1
    key = (y, 2)  # a cache key of a tensor and a step, as memoising code builds one
    same = key == (y, 2)  # y is y: equal without a tensor __eq__ (tuple compares by identity first)
    other = key == (y, 3)
    return y, same, other, [y, "a"] != [y, "b"], (y, 1) == (y,)


@case((3,))
def takes_set_operators_of_items_views(x):
    defaults = {"lr": 1e-3, "eps": 1e-8, "betas": (0.9, 0.999)}
    given = {"lr": 1e-3, "eps": 1e-6, "betas": (0.9, 0.999)}
    changed = dict(given.items() - defaults.items())
    shared = given.items() & defaults.items()
    return x * changed["eps"], sorted(k for k, _ in shared), len(given.keys() | {"momentum"})


# ---- a class's own namespace and tables keyed by frozensets ----

class _BaseHead:
    scale = 1.0

    def extra(self, h):
        return h


class _TunedHead(_BaseHead):
    scale = 0.5

    def extra(self, h):
        return h * 2


_KERNELS = {frozenset(): 1.0, frozenset({"fp16"}): 0.5, frozenset({"fp16", "fused"}): 0.25}


@case((3,))
def asks_a_classes_own_namespace_and_a_frozenset_keyed_table(x):
    h = x + 1
    overrides = "extra" in _TunedHead.__dict__ and "extra" not in type(_BaseHead()).__dict__
    own_scale = _TunedHead.__dict__["scale"] if "scale" in _TunedHead.__dict__ else 1.0
    return h * own_scale * _KERNELS[frozenset({"fused", "fp16"})], overrides


# ---- sets holding tensors, modules and functions (members compared by identity, as Python does) ----
@case((3,), (3,))
def deduplicates_tensors_through_a_seen_set(x, y):
    # a walk that skips what it has seen (tied weights, shared buffers): set() given tensors
    seen = set()
    total = torch.zeros(3)
    for t in (x, y, x, y * 1):
        if t in seen:
            continue
        seen.add(t)
        total = total + t
    return total, len(seen), x in seen, (x + 0) in seen


@case((4,))
def counts_a_set_literal_of_tensors(x):
    y = x.relu()
    s = {x, y, x}
    both = s | {y.neg()}
    both.discard(x)
    return y * len(s), len(both), y in both, x in both, bool(s - {x, y})


_act_relu, _act_tanh, _act_sigmoid = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
_SKIPPED = {_act_sigmoid}  # a global set of modules a loop leaves out


@case((2, 3))
def skips_the_modules_in_a_global_set(x):
    for m in (_act_relu, _act_sigmoid, _act_tanh):
        if m in _SKIPPED:
            continue
        x = m(x) + 1
    return x, _act_relu in _SKIPPED, len(_SKIPPED)


@case((2, 3))
def applies_a_set_of_modules_in_its_own_order(x):
    # iterating a set of modules: Python's order (by their hashes), which the trace asks a real set for
    chosen = set()
    for m in (_act_tanh, _act_relu, _act_tanh, _act_sigmoid):
        chosen.add(m)
    chosen.remove(_act_sigmoid)
    for m in chosen:
        x = m(x) * 2 - 1
    return x, len(chosen), chosen.issubset({_act_relu, _act_tanh, _act_sigmoid}), chosen.isdisjoint([_act_sigmoid])


@case((3,), extra=lambda seed: [[torch.ones(2) * seed, torch.arange(2.0)]])
def unique_parameters_of_a_list_with_repeats(x, ps):
    listed = ps + [ps[0]]  # the first one twice, as tied weights are
    unique = set(listed)
    norm = sum(p.pow(2).sum() for p in listed if p in unique)
    return x * norm, len(unique), len({p for p in listed}), unique == set(ps)


@case((3,))
def grows_a_set_of_constants_in_place_with_a_tensor(x):
    # s |= {t} changes the set itself: an alias taken before sees the tensor too
    names = {"a", "b"}
    alias = names
    names |= {x}
    names -= {"a"}
    return x * len(alias), x in alias, "b" in alias, alias is names


@case((3,))
def text_of_functions_as_keys(x):
    # what logging and dispatch tables do with the callables they are given
    table = {repr(torch.add): 1.0, str(torch.Tensor.mul): 2.0, repr(torch.Tensor.__getitem__): 3.0}
    return x * table[repr(torch.add)] + table[str(torch.Tensor.mul)], len(table)


# ---- dicts from outside written by key before anything reads them whole: the entries they had are
# not read, so not guarded (a state dict whose other values change each call is one compile) ----
def _state(seed):
    return ({"step": seed, "last": None, "scale": 1.0 + seed},)


@case((3,), extra=_state)
def writes_entries_of_a_state_dict(x, state):
    state["last"] = x * 2
    state["step"] = 7
    return x + 1


@case((3,), extra=_state)
def writes_a_new_key_then_reads_it_back(x, state):
    state["hidden"] = torch.tanh(x)
    state["hidden"] = state["hidden"] * 2  # written twice, read in between
    return state["hidden"] + 1


def _fixed_state(seed):  # read whole below: its values are guarded (the same for every seed)
    return ({"step": 3, "last": None, "scale": 1.5},)


@case((3,), extra=_fixed_state)
def written_then_iterated_in_eager_order(x, state):
    # the written old key keeps its place, the new one comes last
    state["new"] = 5
    state["step"] = x.sum()
    return x * len(state), list(state), [k for k, v in state.items() if v is None]


@case((3,), extra=_fixed_state)
def written_then_an_entry_deleted_and_popped(x, state):
    state["tmp"] = x * 3
    del state["step"]
    return state.pop("tmp") + state["scale"], sorted(state)


@case((3,), extra=_state)
def written_then_a_graph_break_then_read(x, state):
    state["last"] = x.cos()
    print("", end="", file=io.StringIO())  # a graph break: the dict crosses it
    state["after"] = state["last"] + 1
    return state["after"] * 2


_FEATURES = {"block0": None, "block1": None}


class FeatureCollector(nn.Module):
    """A module that keeps the activations of its blocks in a dict by name (feature extraction,
    logging, distillation)."""

    def __init__(self):
        super().__init__()
        self.block0 = nn.Linear(3, 3)
        self.block1 = nn.Linear(3, 2)
        self.feats = {"block0": None, "block1": None}

    def forward(self, x):
        h = torch.relu(self.block0(x))
        self.feats["block0"] = h
        _FEATURES["block0"] = h.detach()
        out = self.block1(h)
        self.feats["block1"] = out
        return out


module_case(FeatureCollector, (2, 3))


def _nested_state(seed):
    return ({"layers": {0: None, 1: None}, "count": seed},)


@case((3,), extra=_nested_state)
def writes_into_a_nested_dict_and_returns_the_outer(x, state):
    state["layers"][1] = x * 2  # the inner dict, read by key, written by key
    alias = state
    alias["seen"] = True
    return state, state["layers"][1].sum()


_HANDLERS = {}


@case((3,))
def registers_a_handler_by_class_key(x):
    # a registry keyed by classes, written from compiled code (the entries it has are not read)
    _HANDLERS[torch.Tensor] = "tensor"
    _HANDLERS[nn.Linear] = "linear"
    return x + 1, _HANDLERS[torch.Tensor]


# ---- a negative number to the power of a tensor: FX writes operator.pow(-1, t) as `-1 ** t`, which
# Python reads as -(1 ** t); torch.compile 2.13's eager backend gives -1 everywhere. Cosmos' VAE
# builds its Haar wavelet filters so ----
@case((2,))
def alternating_signs_from_a_power_of_minus_one(w):
    signs = (-1) ** torch.arange(4)
    halves = (-0.5) ** torch.arange(1, 4, dtype=torch.float32)
    return w.repeat(2) * signs, halves, (-2) ** w.abs()


class HaarFilters(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("wavelets", torch.tensor([0.7071067811865476, 0.7071067811865476]), persistent=False)
        self.register_buffer("_arange", torch.arange(2), persistent=False)

    def forward(self, x):
        hl = self.wavelets.flip(0).reshape(1, 1, -1).repeat(x.shape[1], 1, 1)
        hh = (self.wavelets * ((-1) ** self._arange)).reshape(1, 1, -1).repeat(x.shape[1], 1, 1)
        return nn.functional.conv1d(x, hl, groups=x.shape[1], stride=2), nn.functional.conv1d(x, hh, groups=x.shape[1], stride=2)


module_case(HaarFilters, (2, 3, 8))


# ---- items of lists, tuples and dicts passed in that only move (values not read yet): unpacked,
# taken by key, iterated, passed on with *args/**kwargs, returned, kept in a closure. The seeds
# change only items the code never reads, so a repeat call hits the one cache entry ----
@case((3,), extra=lambda seed: ((3, 2.0, "unused" * seed),))
def unpacked_item_rebound_before_use(x, t):
    a, b, note = t
    b = b * 2
    return x * a + b


@case((4,), extra=lambda seed: ((2, 0.5, seed),))
def unpacked_items_read_by_a_closure(x, triple):
    n, m, unused = triple
    take = lambda v: v[:n] * m  # noqa: E731
    return take(x)


@case((3,), extra=lambda seed: ({"bias": True, "scale": 0, "name": "ab"},))
def dict_items_read_in_a_loop(x, opts):
    for key, value in opts.items():
        if value:
            x = x + len(key)
    return x


def _scaled(x, scale=1.0, **rest):
    return x * scale


@case((3,), extra=lambda seed: ({"scale": 2.0, "unused": "x" * seed, "step": seed},))
def kwargs_dict_passed_on(x, opts):
    return _scaled(x, **opts)


@case((2, 4), extra=lambda seed: ({"eps": 1e-5, "momentum": seed},))
def eps_taken_with_get_then_returned_unread(x, cfg):
    eps = cfg.get("eps", 1e-6)
    momentum = cfg.get("momentum")
    return torch.nn.functional.layer_norm(x, (4,), eps=eps), momentum


@case((3,), extra=lambda seed: (("relu", seed, None),))
def tuple_items_returned_unread(x, t):
    name, k, none = t
    return x + 1, name, k, none


@case((3,), extra=lambda seed: ([1, 2, 3],))
def sum_of_an_iterated_list(x, values):
    total = 0
    for v in values:
        total = total + v
    return x * total


@case((3,), extra=lambda seed: ({"k": 2, "other": "o" * seed},))
def dict_copied_then_changed(x, d):
    d2 = d.copy()
    d2["k"] = 10
    return x * d["k"], d2


@case((3,), extra=lambda seed: ((1, (2, "v" * seed), torch.ones(1)),))
def nested_unpacking(x, t):
    a, (b, tag), w = t
    return x * a + b + w, tag


def _first(x, *args):
    return x * args[0]


@case((3,), extra=lambda seed: ((2, "unused" * seed, None),))
def star_args_passed_on(x, args):
    return _first(x, *args)


@case((3,), extra=lambda seed: ((None, 3, torch.ones(3)),))
def none_item_tested_then_used(x, triple):
    mask, scale, w = triple
    if mask is not None:
        x = x * mask
    return x * scale + w


@case((3,), extra=lambda seed: ([1, 4],))
def unpacked_then_the_list_grows(x, lst):
    a, b = lst
    lst.append(a)
    return x + b, len(lst)


@case((3,), extra=lambda seed: ((1, 2, torch.ones(1)),))
def unpacking_a_tuple_of_another_length_is_caught(x, t):
    try:
        a, b = t
    except ValueError:
        a, b = 0, 0
    return x + a + b


@case((3,), extra=lambda seed: ({"heads": 2, "dim": 3},))
def kwargs_unpacked_in_a_formatted_name(x, cfg):
    name = "attn_{heads}x{dim}".format(**cfg)
    return x * cfg["heads"], name


# ---- attributes of an OrderedDict made in the trace: nn.Module.state_dict's `destination._metadata` ----
@case((3,))
def ordered_dict_made_here_carries_a_metadata_attribute(x):
    out = collections.OrderedDict()
    out._metadata = collections.OrderedDict()
    out._metadata["encoder"] = {"version": 1}
    out["weight"] = x * 2
    if hasattr(out, "_metadata"):  # (state_dict's check)
        out["bias"] = x + 1
    return out, out._metadata["encoder"]["version"]


_STATE_NET = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))


@case((2, 3))
def state_dict_read_in_the_forward(x):
    # an EMA-style read of a module's own state: a new OrderedDict of its tensors and their metadata
    sd = _STATE_NET.state_dict()
    shifted = {k: v + 1 for k, v in sd.items() if k.endswith("weight")}
    return _STATE_NET(x), shifted, sorted(sd._metadata), sd


@case((3,))
def attribute_set_on_a_plain_dict_raises_as_eager(x):
    # a dict or defaultdict has no __dict__: AttributeError, caught here (its text is eager's)
    cache, stats, errors = {}, collections.defaultdict(int), []
    for obj in (cache, stats):
        try:
            obj.hits = 1
        except AttributeError as e:
            errors.append(str(e))
    return x + len(errors), errors


DIFFERS["attribute_set_on_a_plain_dict_raises_as_eager"] = (
    (1, 0), (0, 0),
    "TorchDynamo stops at setattr() on a dict (\"setattr() on unsupported type\"), inside a try block, and runs the "
    "frame eagerly (0 graphs); dynview raises eager's AttributeError in the trace (1 graph, the same texts)")


# ---- typing.TypedDict classes called in the trace: a plain dict (vLLM's and transformers' multimodal inputs) ----
class ImagePixelInputs(typing.TypedDict):
    type: typing.Literal["pixel_values"]
    data: torch.Tensor


@case((2, 3))
def typed_dict_of_image_inputs(x):
    inputs = ImagePixelInputs(type="pixel_values", data=x * 2)
    if inputs["type"] == "pixel_values":
        pooled = inputs["data"].mean(-1)
    inputs["data"] = pooled
    return inputs, pooled + 1, type(inputs).__name__


# ---- dicts and sets keyed by objects that compare by identity (graph nodes, operator packets, ----
# partials): a walk over a DAG of nodes, as torch.fx passes and autograd's engine write it
class DagNode:
    def __init__(self, name, scale, parents=()):
        self.name, self.scale, self.parents = name, scale, parents


_IN = DagNode("in", 1.0)
_MID = DagNode("mid", 2.0, (_IN,))
_SKIP = DagNode("skip", 0.5, (_IN,))
_OUT = DagNode("out", 3.0, (_MID, _SKIP))
_DAG = [_IN, _MID, _SKIP, _OUT]


@case((3,))
def dag_walk_with_a_visited_set(x):
    seen, order = set(), []

    def visit(node):
        if node in seen:
            return
        seen.add(node)
        for p in node.parents:
            visit(p)
        order.append(node)

    visit(_OUT)
    env = {}
    for node in order:
        env[node] = x * node.scale if not node.parents else sum(env[p] for p in node.parents) * node.scale
    return env[_OUT], [n.name for n in order], len(seen)


@case((3,))
def users_of_each_node_in_a_defaultdict(x):
    users = collections.defaultdict(list)
    for node in _DAG:
        for p in node.parents:
            users[p].append(node)
    return [x * len(users[n]) for n in _DAG], [[u.name for u in us] for us in users.values()]


@case((3,), (3,), (3,))
def values_zipped_to_nodes_and_reordered(x, y, z):
    env = collections.OrderedDict(zip(_DAG[:3], (x, y, z)))
    env.move_to_end(_IN)
    counts = dict.fromkeys(env, 0)
    counts[_MID] += 2
    return [v * counts[k] for k, v in env.items()], [k.name for k in env]


@case((3,))
def memo_by_id_of_nodes(x):  # copy.deepcopy's memo: keyed by id()
    memo = {}
    for node in _DAG:
        memo[id(node)] = x * node.scale
    return memo[id(_SKIP)] - memo[id(_IN)], id(_OUT) in memo


_OP_COST = {torch.ops.aten.add: 1.0, torch.ops.aten.mul: 2.0, torch.ops.aten.sin: 4.0}


@case((3,))
def operator_costs_copied_updated_and_sorted(x):
    costs = {**_OP_COST}
    costs.update({torch.ops.aten.cos: 8.0})
    del costs[torch.ops.aten.add]
    ranked = sorted(costs.items(), key=lambda kv: -kv[1])
    return x * ranked[0][1], [str(op) for op, _ in ranked], torch.ops.aten.sin in costs

