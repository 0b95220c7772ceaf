"""Plain-Python cases for test_python_cases.py (issue 14), the way model code writes the constructs
of python_cases_more.py: list methods through the value protocol's tables, Hugging Face call forms,
dict subclasses, OrderedDicts and defaultdicts from outside the frame, for loops over map/filter,
0-d integer tensors as indices, tensor metadata with keywords, ** of dict subclasses and
collections.ChainMap. Appended to python_cases.CASES."""
import collections
import dataclasses
import functools
import io
import itertools
import operator
import os
import threading
import typing

import torch
import torch.nn as nn
import torch.nn.functional as F

from python_cases import case, module_case


# ---- issue 14: more of the constructs above, the way model code writes them ----
class ActivationsMadeInForward(nn.Module):
    # stateless torch.nn modules built inside forward, one with keyword arguments, one kept in a local
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = self.proj(x)
        act = nn.GELU(approximate="tanh")
        return nn.Dropout(p=0.0)(act(h)) + nn.LogSoftmax(dim=1)(h) + nn.Hardtanh(-0.5, 0.5)(h)


module_case(ActivationsMadeInForward, (2, 4))


class _Scaled:
    def __init__(self, t, k=1.0):
        self.t = t
        self.k = k

    def __add__(self, other):
        if isinstance(other, _Scaled):
            return _Scaled(self.t * self.k + other.t * other.k)
        return NotImplemented

    def __radd__(self, other):  # 0 + s, as sum() starts
        return _Scaled(self.t * self.k + other)

    def __eq__(self, other):
        return isinstance(other, _Scaled) and self.k == other.k


@case((3,))
def operator_radd_sum_and_ne_of_user_objects(x):
    parts = [_Scaled(x, 2.0), _Scaled(x + 1)]
    total = sum(parts)  # int's + gives NotImplemented: __radd__, then __add__
    acc = _Scaled(x)
    acc += parts[1]  # no __iadd__: __add__
    return total.t, acc.t, parts[0] != parts[1], parts[1] == _Scaled(x), parts[0] == 3


@case((3,))
def defaultdict_returned_with_lambda_factory(x):
    by_len = collections.defaultdict(list)
    for name in ["q", "kv", "o", "mlp"]:
        by_len[len(name)].append(name)
    scale = collections.defaultdict(lambda: 1.0, {"q": 0.5})
    return x * scale["q"] * scale["k"], by_len, scale, by_len.default_factory is list, isinstance(scale, dict)


@case((3,))
def ordereddict_as_lru_cache(x):
    cache = collections.OrderedDict()
    for k in ["a", "b", "c", "a", "d"]:
        if k in cache:
            cache.move_to_end(k)
        else:
            cache[k] = x * len(cache)
        if len(cache) > 2:
            cache.popitem(last=False)
    return list(cache.items()), cache, type(cache).__name__, cache.copy()


@case((3,))
def deque_sliding_window_of_tensors(x):
    window = collections.deque(maxlen=2)
    outs = []
    for i in range(4):
        window.append(x + i)
        outs.append(sum(window))
    window.extendleft([x * 10])  # at the left; a full deque drops from the right
    return outs, list(window), window[0], len(window)


@case((3,))
def deque_rotated_and_returned(x):
    names = collections.deque(["a", "b", "c"], maxlen=3)
    names.rotate(-1)
    names.append("d")
    return x * len(names), names, names.maxlen, names.index("c"), "a" in names


@case((3,), extra=lambda seed: [collections.deque([1, 2, 3], maxlen=4)])
def deque_passed_in_appended_and_popped(x, pending):
    # a work queue handed in: changed in place (written back after the graph), its items read
    pending.append(7)
    first = pending.popleft()
    pending.appendleft(first * 10)
    pending.extend([8, 9])  # full at 4: drops from the left
    return x * first + sum(pending), len(pending), pending[0]


_Span = collections.namedtuple("_Span", "start end")


@case((6,))
def namedtuple_make_asdict_and_slicing(x):
    spans = [_Span._make((0, 2)), _Span(start=2, end=6)]
    parts = [x[s.start:s.end] for s in spans]
    first = spans[0]
    return parts, first[:1], first._asdict(), spans[1], isinstance(first, tuple), _Span(*(1, 3)) == (1, 3)


@case((3,))
def namedtuple_of_tensors_replaced_and_returned(x):
    p = _Span(x, x + 1)
    q = p._replace(end=x * 3)
    return q, q.end - p.end, len(p), p._fields, q._asdict()["start"]


@case((4,))
def itertools_count_takewhile_accumulate_lambda(x):
    ids = dict(zip(["a", "b", "c"], itertools.count()))
    evens = list(itertools.takewhile(lambda n: n < 7, itertools.count(0, 2)))
    running = list(itertools.accumulate([x, x * 2, x * 3], lambda a, b: a * 0.5 + b))
    return ids, evens, running


@case((3,))
def itertools_groupby_without_key_and_dropwhile(x):
    firsts = [k for k, _ in itertools.groupby("aaabccd")]
    runs = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 3, 3, 3])]
    rest = list(itertools.dropwhile(lambda t: t is None, [None, x, None, x * 2]))
    return firsts, runs, rest


@functools.lru_cache(maxsize=8)
def _rotary_freqs(dim, base=10000.0):
    return [base ** (-2 * i / dim) for i in range(dim // 2)]


@case((4,))
def lru_cache_called_with_keywords(x):
    freqs = _rotary_freqs(4, base=100.0)
    return x * freqs[1] + _rotary_freqs(dim=2)[0]


@case((2, 3))
def operator_methodcaller_with_args_and_itemgetter_tuple(x):
    take = operator.methodcaller("narrow", 1, 0, 2)
    first_two = operator.itemgetter(0, 1)
    return take(x), first_two(x.shape), sorted([(2, "b"), (1, "a")], key=operator.itemgetter(0))


@case((3,))
def environ_get_with_default_and_not_in(x):
    level = int(os.environ.get("DYNVIEW_TEST_UNSET_LEVEL", "2"))
    return x * level if "DYNVIEW_TEST_UNSET_LEVEL" not in os.environ else x


@case((3,), (3,))
def list_del_step_slice_and_extended_assign(a, b):
    xs = [a, b, a + 1, b + 1, a + 2]
    del xs[::2]
    ys = list(range(6))
    ys[1::2] = [y * 10 for y in ys[1::2]]
    del ys[-2:]
    return xs, ys


def _sizes(seed):
    return [[1, 2, 3, 4]]


@case((3,), extra=_sizes)
def list_input_step_assign_written_back(x, sizes):
    sizes[::2] = [0, 0]
    del sizes[:1]
    return x * sum(sizes)


_LAST_BLOCK = None


def _remember_block(name, t):
    global _LAST_BLOCK
    _LAST_BLOCK = name
    return t


@case((3,))
def global_rebound_in_callee_and_read_back(x):
    y = _remember_block("attn", x * 2)
    return y + len(_LAST_BLOCK), _LAST_BLOCK


@case((3,))
def dict_keys_xor_union_and_set_minus_keys(x):
    cfg = {"hidden": 4, "heads": 2}
    defaults = {"hidden": 8, "dropout": 0.1}
    overridden = sorted(cfg.keys() & defaults.keys())
    extra = sorted(cfg.keys() ^ defaults.keys())
    every = cfg.keys() | ["layers"]
    return x * len(every), overridden, extra, sorted(every), {"dropout", "heads"} - cfg.keys()


@case((3,))
def str_join_generator_and_sets_of_dict_keys(x):
    opts = {"bias": True, "eps": 1e-5}
    desc = ", ".join(f"{k}={v}" for k, v in opts.items())
    keys = frozenset(opts)
    return x * len(keys), desc, "-".join(sorted(set(opts.keys()))), ("eps", 1e-5) in opts.items()


_TOKEN_COUNTS = collections.Counter({"the": 5, "a": 3, "model": 2})


@case((3,))
def counter_len_membership_iteration_and_missing(x):
    total = sum(_TOKEN_COUNTS.values())
    words = [w for w in _TOKEN_COUNTS if _TOKEN_COUNTS[w] > 2]
    return x * total + len(_TOKEN_COUNTS), words, "a" in _TOKEN_COUNTS, _TOKEN_COUNTS["zzz"], dict(_TOKEN_COUNTS.items())


class _Plain:
    pass


@case((3,))
def instances_without_eq_compare_by_identity(x):
    # regression: two instances of one class made in the trace compared equal (by their class)
    p, q = _Plain(), _Plain()
    return x + 1, p == q, p != q, p == p, p != 3, "%s" % type(p).__name__


# ---- list methods as the value protocol's method tables answer them ----
@case((3,))
def list_pop_by_index_and_from_an_empty_list(x):
    names = ["q", "k", "v", "o"]
    first = names.pop(0)
    last = names.pop(-1)
    pending = []
    try:
        pending.pop()
        empty = False
    except IndexError:
        empty = True
    return x * len(names), first, last, names, empty


@case((3,))
def missing_container_attribute_is_an_attribute_error(x):
    items = [1, 2]
    push = getattr(items, "push", None)  # a list has append, not push
    (push or items.append)(3)
    cfg = {"a": 1}
    return x * sum(items), push is None, hasattr(cfg, "get"), hasattr(cfg, "iteritems"), hasattr((1,), "count")


@case((3,))
def tuple_index_count_and_dict_methods_from_the_table(x):
    dims = (2, 4, 4, 8)
    opts = dict(bias=True)
    opts.setdefault("eps", 1e-5)
    opts.update(dropout=0.0)
    gone = opts.pop("bias")
    return x * dims.index(4) + dims.count(4), sorted(opts.items()), gone, opts.get("nope", 7)


# ---- Hugging Face call forms (issue 14): the constructs real model calls reach ----
class _StepCache:
    def __init__(self, keys):
        self.keys = keys


def _fresh_cache(seed):
    return [_StepCache(torch.full((3,), float(seed)))]  # a new object on every call, as each decode step's cache


@case((3,), extra=_fresh_cache)
def cache_passed_in_is_none_check_guards_its_type(x, cache):
    # regression: `cache is None` guarded the cache's identity, so every decode step (a new cache
    # object) recompiled; objects of different types are never identical: its type is guarded
    h = x * 2
    has_cache = cache is not None  # IS_OP (`if cache is not None:` compiles to a jump on None)
    return h + cache.keys if has_cache else h


class _AliasConfig:
    attribute_map = {"num_labels_alias": "num_labels"}

    def __init__(self):
        self.problem_type = None
        self.num_labels = 2

    def __setattr__(self, key, value):  # PretrainedConfig's: aliases mapped, then object's
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def _fresh_config(seed):
    return [_AliasConfig()]


@case((2, 3), extra=_fresh_config)
def outside_config_python_setattr_inlined(x, cfg):
    # regression: assigning an attribute of a config from outside whose class defines __setattr__
    # broke (`self.config.problem_type = ...` in every *ForSequenceClassification with labels)
    h = x * 2
    if cfg.problem_type is None:
        cfg.problem_type = "single_label_classification"
    cfg.num_labels_alias = 3
    return h * cfg.num_labels + cfg.num_labels_alias, cfg.problem_type  # the alias reads what was written


@case((4, 5))
def cross_entropy_loss_module_built_in_forward(x):
    # regression: CrossEntropyLoss() registers weight=None as a buffer: building it in forward
    # (`loss_fct = CrossEntropyLoss()`, every HF head given labels=) broke
    logits = x * 2
    loss_fct = nn.CrossEntropyLoss()
    return loss_fct(logits, torch.tensor([0, 1, 2, 3]))


@torch._dynamo.assume_constant_result
def _package_probe():
    import re
    return bool(re.match(r"tor", "torch"))  # not traceable (re's module cache): answered at trace time


@case((3,))
def assume_constant_result_runs_at_trace_time(x):
    # regression: transformers' install probes (is_torch_distributed_available, marked with
    # _dynamo_marked_constant) were inlined into importlib and broke in re (wav2vec2, hubert)
    h = x * 2
    if _package_probe():
        return h + 1
    return h - 1


class _SuffixConfig:
    def __setattr__(self, key, value):  # object's own, spelled out
        object.__setattr__(self, key + "_set", value)


@case((3,), extra=lambda seed: [_SuffixConfig()])
def outside_object_setattr_spelled_out_in_python_setattr(x, cfg):
    h = x * 2
    cfg.scale = 3
    return h * cfg.scale_set


# ---- dict subclasses from outside the frame: read, changed and written back after the graph ----
# (python_cases.LayerOutput is a dataclass over an OrderedDict subclass, as transformers' ModelOutput;
# python_cases.Output a dict subclass that mirrors its items as attributes)
from python_cases import LayerOutput, Output  # noqa: E402

_SINK = io.StringIO()


def _layer_output(seed):
    g = torch.Generator().manual_seed(seed)
    return (LayerOutput(last_hidden_state=torch.randn(2, 4, generator=g), attentions=(torch.randn(2, 2, generator=g),)),)


@case((2, 4), extra=_layer_output)
def model_output_field_rescaled_in_place(x, outputs):
    outputs.last_hidden_state = outputs.last_hidden_state.float() * 0.5 + x
    return outputs[0], outputs["last_hidden_state"].sum()


@case((2, 4), extra=_layer_output)
def model_output_gains_a_loss(x, outputs):
    outputs["aux_loss"] = (outputs.last_hidden_state - x).pow(2).mean()
    return outputs.aux_loss * 2, len(outputs), list(outputs.keys())


@case((2, 4), extra=_layer_output)
def model_output_read_whole(x, outputs):
    total = sum(v.sum() for v in outputs.values() if isinstance(v, torch.Tensor))
    hidden, attn = outputs.to_tuple()
    return total + x.sum(), hidden * attn[0].mean(), [k for k, v in outputs.items() if v is not None]


@case((2, 4), extra=_layer_output)
def model_output_fields_are_none_checked(x, outputs):
    if outputs.aux_loss is None:
        outputs.aux_loss = x.mean()
    loss = outputs.aux_loss + outputs.last_hidden_state.mean()
    return loss, "aux_loss" in outputs


def _two_outputs(seed):
    g = torch.Generator().manual_seed(seed)
    a = Output()
    a["logits"] = torch.randn(3, generator=g)
    b = Output()
    b["logits"] = torch.randn(3, generator=g)
    b.extra = None
    return ([a, b],)


@case((3,), extra=_two_outputs)
def dict_subclass_outputs_in_a_list(x, outs):
    for o in outs:
        o["logits"] = o["logits"] + x
        o.count = len(o)
    return outs[0].logits * outs[1].logits


class TensorCache(dict):
    """A cache keyed by name, as model code keeps one between calls."""

    def __missing__(self, key):
        return None


def _cache(seed):
    g = torch.Generator().manual_seed(seed)
    c = TensorCache()
    c["k"] = torch.randn(3, generator=g)
    c["v"] = torch.randn(3, generator=g)
    return (c,)


@case((3,), extra=_cache)
def dict_subclass_cache_pop_and_missing(x, cache):
    k = cache.pop("k")
    old = cache.get("missing_with_get", x)
    if cache["never_set"] is None:  # __missing__
        cache["k"] = k * 2 + x
    cache.setdefault("step", 0)
    del cache["v"]
    return k + old, sorted(cache.keys())


@case((3,), extra=_cache)
def dict_subclass_update_and_clear(x, cache):
    before = cache["k"] + cache["v"]
    cache.update(k=x, extra=x * 2)
    n = len(cache)
    snapshot = dict(cache)
    cache.clear()
    cache["total"] = before.sum()
    return before, n, list(snapshot)


class Doubling(dict):
    """A dict subclass whose __setitem__ changes what is stored (the write-back must not run it again)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


def _doubling(seed):
    d = Doubling()
    dict.__setitem__(d, "a", torch.full((3,), float(seed + 1)))
    return (d,)


@case((3,), extra=_doubling)
def dict_subclass_with_transforming_setitem(x, d):
    d["b"] = d["a"] + x
    return d["b"], d["a"]


@case((2, 4), extra=_layer_output)
def model_output_changed_on_both_sides_of_a_break(x, outputs):
    outputs["aux_loss"] = x.sum()
    print("aux", file=_SINK)
    outputs.last_hidden_state = outputs.last_hidden_state + outputs.aux_loss + x
    return outputs["last_hidden_state"] * 2


@case((2, 4), extra=lambda seed: (_layer_output(seed)[0],) * 2)
def model_output_passed_twice(x, a, b):
    a.last_hidden_state = a.last_hidden_state * 3
    return b.last_hidden_state + x, a is b


# ---- OrderedDict and defaultdict from outside the frame: read whole, changed, written back ----
def _named_states(seed):
    g = torch.Generator().manual_seed(seed)
    return (collections.OrderedDict((f"layer{i}", torch.randn(3, generator=g)) for i in range(3)),)


@case((3,), extra=_named_states)
def ordered_state_updated_in_place(x, states):
    for name, h in states.items():
        states[name] = h * 0.9 + x * 0.1
    states["mean"] = sum(states.values()) / len(states)
    return states["mean"], list(states)


@case((3,), extra=_named_states)
def ordered_state_reordered_and_popped(x, states):
    states.move_to_end("layer0")
    name, last = states.popitem(last=True)
    first = next(iter(states))
    return last + x, name, first, list(states.keys())


def _stats(seed):
    s = collections.defaultdict(list)
    s["loss"].append(torch.full((), float(seed)))
    return (s, collections.defaultdict(float, steps=0.0))


@case((3,), extra=_stats)
def training_stats_in_defaultdicts(x, history, totals):
    loss = (x ** 2).mean()
    history["loss"].append(loss.detach())
    history["grad_norm"].append(x.norm())
    totals["steps"] += 1
    totals["tokens"] += x.numel()
    return loss, len(history["loss"]), sorted(history), dict(totals)


# ---- a for loop over map/filter: the function runs between the loop's bodies, as in eager ----
@case((2,))
def for_loop_over_a_map_that_records(x):
    seen = []

    def project(v):
        seen.append(v)
        return v * 2

    out = []
    for y in map(project, [x, x + 1, x + 2]):
        out.append(y + len(seen))  # eager: 1, 2, 3 items seen so far
    return out


@case((2,))
def comprehension_over_a_filter_that_counts(x):
    calls = [0]

    def keep(v):
        calls[0] += 1
        return v.dim() == 1

    return [v * calls[0] for v in filter(keep, [x, x * 2, x * 3])]


# ---- a tensor indexed by 0-d integer tensors (a select, as the int it holds: x[torch.as_tensor(1)]) ----
@case((4, 3))
def tensor_indexed_by_zero_dim_int_tensors(x):
    i = torch.as_tensor(1)
    j = torch.tensor(-1)
    return x[i], x[i, 1:], x[:, j], x[j, i]


@case((5, 2), extra=lambda seed: [torch.tensor(seed % 5), torch.tensor([0, 2])])
def rows_picked_by_an_index_argument(x, row, rows):
    return x[row] * 2, x[rows], x[row, 0] + x[rows].sum()


# ---- tensor metadata with keywords, and layouts the meta kernels do not keep ----
@case((2, 3, 4, 5))
def size_and_stride_by_keyword(x):
    # x.size(dim=1) was read as x.size() (the keyword dropped): a tuple where eager gives an int
    return x.size(dim=1), x.stride(dim=0), x.new_zeros(x.size(dim=-1)) + x.size(dim=2)


@case((2, 3, 4, 4))
def channels_last_checks(x):
    y = x.to(memory_format=torch.channels_last)
    return y.is_contiguous(), y.is_contiguous(memory_format=torch.channels_last), y * 2


@case((2, 3, 6, 6))
def conv_keeps_channels_last(x):
    # a CPU convolution keeps a channels-last input's layout; its meta kernel does not (the example
    # is computed on fake tensors): code that checks the layout takes eager's branch
    x = x.contiguous(memory_format=torch.channels_last)
    y = F.conv2d(x, torch.ones(4, 3, 3, 3), padding=1)
    if not y.is_contiguous():
        y = y.contiguous()
    z = F.group_norm(y, 2)
    return y.stride(), z.stride(), z.is_contiguous(memory_format=torch.channels_last), z


@case((2, 3))
def device_index_of_a_tensor(x):
    # get_device() is the real device's index (-1 on the CPU), not a break
    k = x.get_device()
    return x + k, x.device.type, x.is_cuda, x.dtype.itemsize


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))


_TIED = _Tied()


@case((2, 3))
def dict_update_from_generators(x):
    # torch.nn.utils.stateless's idiom: a name -> tensor map filled from named_parameters() and
    # named_buffers() generators (dict.update of any iterable of pairs)
    named = {}
    named.update(_TIED.named_parameters(remove_duplicate=False))
    named.update(_TIED.named_buffers())
    named.update((k + "_t", v.t()) for k, v in list(named.items()) if v.dim() == 2)
    return x @ named["proj.weight_t"] * named["scale"] + named["proj.bias"], sorted(named)


# ---- ** and {**} of dict subclasses (gemma3's `Gemma3ModelOutputWithPast(**outputs, image_outputs=...)`):
# the entries as CPython's dict_merge reads them, the class's own __getitem__ inlined ----
@dataclasses.dataclass
class _OutputWithImage(LayerOutput):
    image_hidden_states: typing.Optional[torch.Tensor] = None


@case((2, 4))
def model_output_rewrapped_with_double_star(x):
    inner = LayerOutput(last_hidden_state=x.tanh(), attentions=(x.sigmoid(),))
    out = _OutputWithImage(**inner, image_hidden_states=x * 2)
    return out.to_tuple(), list(out.keys()), out.aux_loss is None


def _head(last_hidden_state, attentions=(), scale=1.0):
    return last_hidden_state * scale + sum(a.mean() for a in attentions)


@case((2, 3))
def dict_subclass_splatted_into_a_call_and_a_display(x):
    out = Output()
    out["last_hidden_state"] = x.exp()
    out.attentions = (x.abs(),)
    merged = {**out, "scale": 2.0}
    return _head(**out), _head(**merged), sorted(merged)


@case((2, 4), extra=_layer_output)
def model_output_passed_in_splatted(x, outputs):
    kwargs = {**outputs}
    return _head(**kwargs, scale=0.5) + x, sorted(kwargs)


@case((3,))
def tensor_tagged_with_a_dict_of_its_sources(x):
    # a Python attribute holding a dict (a hook's bookkeeping), set on a tensor and read back
    y = x * 2
    y.meta = {"scale": 3.0, "src": x, "shape": list(x.shape)}
    return y, y.meta["scale"] * y.meta["src"], y.meta["shape"]


@case((2, 6))
def tensor_method_loaded_before_a_break_in_its_arguments(x):
    # higgs_audio_v2's decoder layer: hidden.masked_scatter(mask, norm(hidden[mask])) -- the boolean
    # index breaks after the bound method was loaded, so the resume function is handed the method,
    # a builtin it calls eagerly: a break there too, as TorchDynamo's (a function marked as skipped)
    mask = x > 0
    hidden = x * 2
    hidden = hidden.masked_scatter(mask, torch.tanh(hidden[mask]) + 1.0)
    return hidden.masked_scatter(~mask, hidden[~mask] * 3)


# ---- collections.ChainMap: options resolved over layers of dicts (argparse/config code), its
# Python methods followed as a user's mapping's ----
_DEFAULT_OPTS = {"scale": 2.0, "bias": 0.5, "act": "relu"}


@case((3,))
def chain_map_of_overrides_over_defaults(x):
    opts = collections.ChainMap({"bias": -1.0}, _DEFAULT_OPTS)
    y = x * opts["scale"] + opts["bias"]
    if opts.get("act") == "relu" and "dropout" not in opts:
        y = y.relu()
    return y, len(opts), sorted(opts), dict(opts)


@case((3,), extra=lambda seed: (collections.ChainMap({"scale": 3.0}, {"scale": 1.0, "shift": 0.25}),))
def chain_map_passed_in(x, opts):
    return x * opts["scale"] + opts["shift"], opts.get("missing", 7)


@case((2, 3))
def chain_map_child_scope_writes(x):
    scope = collections.ChainMap({"depth": 0})
    inner = scope.new_child({"depth": 1})
    inner["width"] = x.shape[-1]
    return x * inner["depth"] + scope["depth"], inner.parents["depth"], "width" in scope, inner.maps[0]


# ---- staticmethods reached through super() of the class (super(C, C).build(...)), as factory
# helpers of small class hierarchies write it ----
class _BaseBuilder:
    @staticmethod
    def build(v):
        return v + 1


class _ScaledBuilder(_BaseBuilder):
    @staticmethod
    def build(v):
        return super(_ScaledBuilder, _ScaledBuilder).build(v) * 2

    @classmethod
    def build_twice(cls, v):
        return super().build(super(_ScaledBuilder, cls).build(v))


@case((3,))
def staticmethod_through_super_of_the_class(x):
    return _ScaledBuilder.build(x), _ScaledBuilder.build_twice(x)


# ---- a @torch.jit.script helper called from eager model code (torchvision's and older
# transformers' scripted helpers): its Python original is inlined, as TorchDynamo does ----
@torch.jit.script
def _scripted_bias_gelu(x: torch.Tensor, bias: float) -> torch.Tensor:
    y = x + bias
    return y * 0.5 * (1.0 + torch.erf(y / 1.41421))


@case((2, 3))
def torch_jit_script_helper_called(x):
    return _scripted_bias_gelu(x, 0.25).sum(-1)


# ---- per-thread state in a threading.local() (a library's recursion depth, its last result): written
# in the trace, replayed after the graph in the calling thread, read back as written ----
_TLS = threading.local()
_TLS.depth = 0


@case((3,))
def thread_local_state_written_and_read_back(x):
    _TLS.depth += 1
    _TLS.last = x.relu()
    out = _TLS.last * _TLS.depth
    _TLS.depth -= 1
    return out
