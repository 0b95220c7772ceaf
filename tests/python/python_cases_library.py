"""Plain-Python cases for test_python_cases.py found in model-library code (issue 14, transformers
5.24 and the survey in tests/benchmarks/hf_survey.py): values read from arguments the trace changes,
Enum members and classes, local helpers with defaults, max/min of 0-d tensors, modules built and
buffers reassigned in forward, configs holding sets, torch arithmetic of Python ints used as sizes.
Appended to python_cases.CASES like python_cases_more's."""
import collections
import contextlib
import copy
import enum
import functools
import io
import itertools
import sys
import types
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from python_cases import DIFFERS, case, module_case


# ---- values read from an argument the trace then changes: returned as they were read ----
class _Slot:
    def __init__(self, value):
        self.value = value


def _cache_and_queue(seed):
    return ({"k": torch.full((2,), float(seed)), "layer": _Slot(seed), "steps": 3}, [_Slot(1.0), _Slot(2.0)])


@case((3,), extra=_cache_and_queue)
def items_popped_from_arguments_and_returned(x, cache, queue):
    state = cache.pop("k")
    layer = cache.pop("layer")
    last = queue.pop()
    cache["total"] = state.sum()
    return x + 1, state, layer, last, cache.pop("steps")


# ---- Enum members (transformers' ExplicitEnum(str, Enum), a plain Enum, IntEnum, Flag) ----
class _Action(str, enum.Enum):  # transformers.utils.deprecation.Action
    NONE = "none"
    NOTIFY = "notify"
    NOTIFY_ALWAYS = "notify_always"
    RAISE = "raise"


def _deprecate_kwarg(old_name, new_name):  # transformers' deprecate_kwarg, trimmed
    def wrapper(func):
        @functools.wraps(func)
        def wrapped_func(*args, **kwargs):
            minimum_action = _Action.NONE
            message = None
            if old_name in kwargs and new_name in kwargs:
                minimum_action = _Action.NOTIFY_ALWAYS
                message = f"Both `{old_name}` and `{new_name}` are set. Using `{new_name}`."
                kwargs.pop(old_name)
            elif old_name in kwargs:
                minimum_action = _Action.NOTIFY
                message = f"`{old_name}` is deprecated. Use `{new_name}` instead."
                kwargs[new_name] = kwargs.pop(old_name)
            if minimum_action == _Action.RAISE:
                raise ValueError(message)
            elif minimum_action in (_Action.NOTIFY, _Action.NOTIFY_ALWAYS) and not torch.compiler.is_compiling():
                warnings.warn(message, FutureWarning, stacklevel=2)
            return func(*args, **kwargs)
        return wrapped_func
    return wrapper


@_deprecate_kwarg("past_key_values", "cache")
def _attend(q, cache=None, scale=1.0):
    return (q @ cache.transpose(-1, -2) * scale).softmax(-1) @ cache


@case((2, 4), (3, 4))
def str_enum_actions_of_a_deprecated_keyword(q, kv):
    return _attend(q, past_key_values=kv), _attend(q, cache=kv, scale=0.5), _attend(q, cache=kv, past_key_values=q)


class _Reduction(enum.Enum):
    NONE = "none"
    MEAN = "mean"
    SUM = "sum"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class _Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


_WEIGHT_OF = {_Reduction.MEAN: 0.5, _Reduction.SUM: 2.0}


@case((4,), extra=lambda seed: (_Reduction.MEAN, _Level.HIGH))
def enum_members_passed_in_and_compared(x, reduction, level):
    if reduction is _Reduction.NONE:
        return x
    scale = _WEIGHT_OF[reduction] * (level + 1)
    out = x.mean() if reduction == _Reduction.MEAN else x.sum()
    perm = _Perm.R | _Perm.W
    return (out * scale, reduction.value, reduction.name, level > _Level.LOW, _Perm.W in perm,
            _Action.NOTIFY == "notify", f"{reduction.value}-{int(level)}")


class _Pooling(str, enum.Enum):  # an Enum with behaviour: a property and a method of its author's
    CLS = "cls"
    MEAN = "mean"
    MAX = "max"

    @property
    def reduces(self):
        return self is not _Pooling.CLS

    def apply(self, h):
        if self is _Pooling.CLS:
            return h[:, 0]
        return h.mean(1) if self == "mean" else h.amax(1)


@case((2, 5, 4))
def enum_with_a_property_and_a_method_picks_the_pooling(h):
    outs = {}
    for mode in (_Pooling.CLS, _Pooling.MEAN, _Pooling.MAX):
        outs[mode.value] = (mode.apply(h), mode.reduces, mode in {_Pooling.MEAN: 1})
    return outs, [m.name for m in _Pooling], len(_Pooling), _Pooling("max") is _Pooling.MAX, _Pooling.MEAN in _Pooling



# ---- a local helper with default arguments (all constants: one LOAD_CONST of their tuple) ----
@case((3,))
def local_helper_with_default_arguments(x):
    def scale(t, k=2, bias=(0.5, 1.0), *, shift=0.5):
        return t * k + bias[0] + shift

    return scale(x), scale(x, 3), scale(x, shift=1.0)


# ---- max()/min() of 0-d tensors (encodec's padding from buffers): torch.maximum/minimum ----
class _PaddedConv(nn.Module):  # transformers' EncodecConv1d, trimmed
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3)
        self.register_buffer("padding_total", torch.tensor(2, dtype=torch.int64), persistent=False)

    @staticmethod
    def _pad1d(hidden_states, paddings):
        length = hidden_states.shape[-1]
        padding_left, padding_right = paddings
        max_pad = max(padding_left, padding_right)
        return hidden_states * (max_pad - length + 1), min(padding_left, padding_right, max_pad)

    def forward(self, hidden_states):
        padding_right = self.padding_total // 2
        padding_left = self.padding_total - padding_right
        scaled, low = self._pad1d(hidden_states, (padding_left, padding_right))
        return self.conv(scaled) * (low + 1)


module_case(_PaddedConv, (1, 2, 6))


# ... and of a 0-d tensor and Python numbers (a scale floored at an epsilon, a clipped count):
# torch.clamp(min=) / (max=), as TorchDynamo lowers them; the value eager's operand has
@case((4,))
def max_of_a_reduction_and_an_epsilon(x):
    amax = x.abs().max()
    scale = max(amax, 1e-5) / 127.0
    return torch.round(x / scale).clamp(-128, 127) * scale


@case((4,))
def min_of_numbers_and_a_0d_tensor(x):
    total = (x * 3).sum()
    return x + min(0.5, total, 2), x - max(0, total)


@case((2, 3))
def max_of_two_reductions_and_a_bound(x):
    return x / max(x.norm(), x.abs().sum(), 1.0)


# ---- modules built inside forward: from a tuple of constants (canine's padding), and a library's
# nn.Module subclass with torch's __init__ (transformers' ClassInstantier: ACT2FN["silu"]) ----
class _SiLUActivation(nn.Module):
    def forward(self, input):
        return F.silu(input)


class _ClassInstantier(collections.OrderedDict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


_ACT2FN = _ClassInstantier({"silu": _SiLUActivation, "gelu_new": (nn.GELU, {"approximate": "tanh"})})


class _ConvProjection(nn.Module):
    def __init__(self, kernel_size=4):
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(4, 4, kernel_size)

    def forward(self, inputs):
        pad_total = self.kernel_size - 1
        pad_beg = pad_total // 2
        pad_end = pad_total - pad_beg
        pad = nn.ConstantPad1d((pad_beg, pad_end), 0)
        return _ACT2FN["silu"](self.conv(pad(inputs))) + _ACT2FN["gelu_new"](inputs)


class _Upsampler(nn.Module):  # the projection called from another module's forward (inlined)
    def __init__(self):
        super().__init__()
        self.projection = _ConvProjection()

    def forward(self, x):
        return self.projection(x * 2)


module_case(_Upsampler, (2, 4, 8))


# ---- a config holding a set, deep-copied in forward (transformers' get_text_config) ----
class _TextConfig:
    def __init__(self):
        self.hidden_size = 4
        self.is_encoder_decoder = True
        self.keys_to_ignore_at_inference = {"past_key_values", "encoder_last_hidden_state"}


_TEXT_CONFIG = _TextConfig()


@case((3,))
def config_with_a_set_deep_copied(x):
    config = copy.deepcopy(_TEXT_CONFIG) if _TEXT_CONFIG.is_encoder_decoder else _TEXT_CONFIG
    config.keys_to_ignore_at_inference.add("attentions")
    return (x * config.hidden_size, sorted(config.keys_to_ignore_at_inference),
            "attentions" in _TEXT_CONFIG.keys_to_ignore_at_inference, config is _TEXT_CONFIG)


# ---- torch arithmetic of Python ints used as a size (longformer's _chunk) ----
@case((2, 8, 3))
def sizes_computed_with_torch_div_of_ints(hidden_states):
    window_overlap = 2
    hidden_states = hidden_states.view(
        hidden_states.size(0),
        torch.div(hidden_states.size(1), (window_overlap * 2), rounding_mode="trunc"),
        window_overlap * 2,
        hidden_states.size(2),
    )
    chunks = torch.floor_divide(hidden_states.size(1), 2)
    return hidden_states * 2, hidden_states.reshape(-1, chunks, 3).shape


# ---- conversions with nothing to convert return the tensor itself (x.to(x.dtype) is x), and
# Module.to in forward (switch_transformers' router: `self.classifier = self.classifier.to(self.dtype)`)
class _Top1Router(nn.Module):  # transformers' SwitchTransformersTop1Router, trimmed
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(4, 3, bias=False)
        self.dtype = getattr(torch, "float32")
        self.expert_capacity = 2

    def forward(self, hidden_states):
        self.input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(self.dtype)
        self.classifier = self.classifier.to(self.dtype)
        router_logits = self.classifier(hidden_states)
        router_probs = nn.functional.softmax(router_logits, dim=-1, dtype=self.dtype).to(self.input_dtype)
        expert_index = torch.argmax(router_probs, dim=-1)
        expert_index = torch.nn.functional.one_hot(expert_index, num_classes=3)
        token_priority = torch.cumsum(expert_index, dim=-2)
        expert_index = expert_index * (token_priority <= self.expert_capacity)
        return expert_index, torch.max(router_probs, dim=-1).values.unsqueeze(-1), router_logits


module_case(_Top1Router, (2, 5, 4))


@case((3,))
def conversion_to_its_own_dtype_is_the_tensor(x):
    h = x.float()  # x is float32 already: h is x, so the in-place op below changes x too
    h.mul_(2)
    return h + 1, x.to(torch.float32) is x, x.to("cpu") is x, x.type_as(x) is x


@case((3,))
def conversion_to_another_dtype_is_a_copy(x):
    h = x.double()  # a new tensor: x keeps its values
    h.add_(1)
    return h, x * 2, h is x


# ---- 0-d tensors of Python-number arithmetic keep their value through more arithmetic (as fake
# tensors propagate constants): longformer's chunks_count, later a size of new_zeros and as_strided ----
def _sliding_chunks_scores(query, window_overlap):  # LongformerSelfAttention, trimmed
    batch_size, seq_len, head_dim = query.size()
    chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
    scores = query.new_zeros((batch_size, chunks_count + 1, window_overlap, window_overlap * 2 + 1))
    padded = F.pad(query, (0, 0, window_overlap, window_overlap), value=-1)
    stride = padded.stride()
    chunked = padded.as_strided(size=(batch_size, chunks_count + 1, 3 * window_overlap, head_dim),
                                stride=(stride[0], window_overlap * stride[1], stride[1], stride[2]))
    return scores, chunked


@case((2, 8, 3))
def chunk_counts_from_torch_div_used_as_sizes(query):
    scores, chunked = _sliding_chunks_scores(query, 2)
    chunks_count = torch.div(query.size(1), 2, rounding_mode="trunc") - 1
    return scores.sum(-1) + 1, chunked * 2, chunks_count * 3, (chunks_count + 1).abs()


# ---- the types of iterators the trace makes: module.parameters() is a generator (clip_grad_norm_
# asks isinstance(parameters, types.GeneratorType)), map, zip, enumerate, itertools' own ----
class _ParameterCount(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        params = self.parameters()
        is_generator = isinstance(params, types.GeneratorType)
        params = list(params)
        kinds = (type(map(abs, [1])) is map, isinstance(zip([1], [2]), zip), type(enumerate([1])) is enumerate,
                 isinstance(itertools.chain([1], [2]), itertools.chain), isinstance(params, types.GeneratorType))
        return self.lin(x) * len(params), is_generator, kinds


module_case(_ParameterCount, (2, 3))


# ---- profiler ranges in model code (torch.autograd.profiler.record_function): ignored while
# capturing, as TorchDynamo ignores them ----
@case((2, 3))
def profiler_range_around_a_block(x):
    with torch.autograd.profiler.record_function("attention"):
        y = torch.softmax(x * 2, dim=-1)
    return y + 1


# ---- torch.vmap, associative_scan and torch.utils._pytree, as model code and functorch's users
# write them: the scan of Mamba's selective state space (transformers' mamba_selective_scan under
# torch.compile), per-example functions, nested vmaps, pytree maps over a config of tensors ----
def _mamba_scan(discrete_A, deltaB_u):  # transformers' MambaMixer scan (combine_mode on the CPU)
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(left, right):
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right

    combine_mode = "pointwise" if discrete_A.device.type in ("cuda", "xpu") else "generic"
    _, all_states = associative_scan(combine_fn, (discrete_A, deltaB_u), dim=2, combine_mode=combine_mode)
    return all_states


@case((2, 3, 7, 4), (2, 3, 7, 4), (2, 4, 7))
def selective_scan_of_mamba(A, Bu, C):
    all_states = _mamba_scan(torch.exp(-A.abs()), Bu)
    scan_output = torch.matmul(all_states.transpose(1, 2), C.transpose(1, 2).unsqueeze(-1))
    return scan_output.squeeze(-1).transpose(1, 2), all_states[:, :, -1]


@case((5, 8))
def reversed_associative_scan_is_a_suffix_sum(x):
    from torch._higher_order_ops.associative_scan import associative_scan
    return associative_scan(lambda a, b: a + b, x, dim=1, reverse=True, combine_mode="generic")


@case((4, 3, 5), (5, 2))
def vmap_with_an_unbatched_argument(x, w):
    return torch.vmap(lambda row, m: row @ m, in_dims=(0, None))(x, w)


@case((4, 6), (4, 6))
def vmap_of_a_torch_function(x, y):
    return torch.func.vmap(torch.dot)(x, y) + 1


@case((3, 4), (5, 4))
def nested_vmap_pairwise_distances(x, y):
    def dist(a, b):
        return (a - b).pow(2).sum().sqrt()
    return torch.vmap(torch.vmap(dist, in_dims=(None, 0)), in_dims=(0, None))(x, y)


@case((3, 4))
def vmap_returning_two_outputs_on_different_dims(x):
    total, scaled = torch.vmap(lambda r: (r.sum(), r.softmax(-1) * 2), out_dims=(0, 1))(x)
    return total, scaled


@case((6, 4))
def vmap_closing_over_a_tensor_of_the_frame(x):
    center = x.mean(0)
    return torch.vmap(lambda r: (r - center).abs().max(), in_dims=-2)(x)


class _PerTokenProjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        return torch.vmap(self.proj, in_dims=1, out_dims=1)(x).relu()


module_case(_PerTokenProjection, (2, 5, 4))

_SCALE = 3.0


@case((2, 3), (4,))
def pytree_map_reads_a_global_of_this_module(x, y):
    import torch.utils._pytree as pytree
    tree = {"hidden": x, "extra": [y, (y + 1, None)]}
    out = pytree.tree_map(lambda t: t * _SCALE if isinstance(t, torch.Tensor) else t, tree)
    return out["hidden"].sum() + out["extra"][1][0]


@case((2, 3), (3,))
def pytree_flatten_then_unflatten(x, y):
    from torch.utils._pytree import tree_flatten, tree_unflatten
    leaves, spec = tree_flatten((x, [y, {"b": x, "a": y}]))
    return tree_unflatten([leaf.cos() for leaf in leaves], spec)[1][1]["a"], spec.num_leaves


_OFFSET = 0.5


@case((3,), (3,))
def closure_made_here_called_by_another_modules_helper(x, y):
    # the lambda reads this module's _OFFSET; the helper's module has its own _OFFSET
    from python_cases_closures import apply_to_each
    a, b, c = apply_to_each(lambda t: t * _SCALE + _OFFSET, (x, y))
    return a + b, c


@case((4, 3))
def vmap_of_one_tensor_passed_twice_batched_once(x):
    return torch.vmap(lambda a, b: a * b.sum(), in_dims=(None, 0))(x, x)


@case((4, 3))
def vmap_raising_inside_caught_outside(x):
    def check(row):
        if row.shape[0] != 5:
            raise ValueError("rows of 5 expected")
        return row
    try:
        y = torch.vmap(check)(x)
    except ValueError:
        y = x * 2
    return y + 1


@case((4, 3), (4, 3))
def vmap_over_a_dict_of_tensors(x, y):
    # in_dims as a pytree: a dict of dims for a dict argument
    return torch.vmap(lambda d: (d["q"] * d["k"]).sum(), in_dims=({"q": 0, "k": 0},))({"q": x, "k": y})


@case((5, 3), (3, 2))
def vmap_with_an_unbatched_dict_of_weights(x, w):
    # per-sample functions over a dict of parameters (as torch.func users pass them): None for the dict
    params = {"w": w, "b": w.sum(0)}
    return torch.vmap(lambda p, row: row @ p["w"] + p["b"], in_dims=(None, 0))(params, x)


@case((7, 5), (7, 5))
def vmap_in_chunks_of_a_per_example_function(x, y):
    # chunk_size bounds the memory of a large vmap (functorch splits the batch and concatenates)
    return torch.vmap(lambda r, s: (r - s).pow(2).mean(), chunk_size=3)(x, y)


@case((4, 6))
def vmap_in_chunks_with_out_dims(x):
    probs, total = torch.vmap(lambda c: (c.softmax(-1), c.sum()), in_dims=1, out_dims=(1, 0), chunk_size=4)(x)
    return probs * 2, total


@case((3, 4))
def vmap_with_a_chunk_larger_than_the_batch(x):
    return torch.vmap(torch.outer, in_dims=(0, None), chunk_size=8)(x, x[0])


# ---- torch.func transforms other than vmap: their results are functools.wraps wrappers dressed as
# the function they transform (jacrev(torch.sin) has torch.sin's __module__ and __name__), which a
# graph's generated code would call by that name -- torch.sin itself, a wrong result. Traced as
# TorchDynamo traces them (functorch's steps in the graph, python_cases_functorch.py), the wrapper is
# never called. ----
@case((3,))
def jacrev_of_a_torch_function(x):
    return torch.func.jacrev(torch.sin)(x) + 1


@case((3,))
def jacfwd_of_a_torch_function(x):
    return torch.func.jacfwd(torch.tanh)(x).sum(0)


@case((3,))
def hessian_of_a_lambda(x):
    return torch.func.hessian(lambda t: (t ** 3).sum())(x)


@case((3,))
def grad_and_value_of_a_lambda(x):
    g, v = torch.func.grad_and_value(lambda t: (t.sin() * t).sum())(x)
    return g * 2, v




# ---- helpers made by exec() in namespaces of their own (code generators, config-built functions):
# each reads its own globals, though no module owns them and none has a __name__ ----
def _exec_helper(k):
    ns = {"K": k}
    exec("def scaled(t):\n    return t * K\n", ns)
    return ns["scaled"]


_SCALE_BY_TWO, _SCALE_BY_TEN = _exec_helper(2.0), _exec_helper(10.0)


@case((3,))
def helpers_made_by_exec_read_their_own_globals(x):
    return _SCALE_BY_TWO(x), _SCALE_BY_TEN(x)


# ---- torch.is_complex / torch.is_floating_point as torch.optim's functions ask them of each
# parameter (_view_as_real, the foreach grouping): answers of the guarded dtype, no graph node ----
def _view_as_real(params, *state_and_grads):  # torch.optim.optimizer._view_as_real, as written there
    for i, p in enumerate(params):
        if torch.is_complex(p):
            params[i] = torch.view_as_real(params[i])
            for s in state_and_grads:
                s[i] = torch.view_as_real(s[i])


@case((3,), (2, 2))
def optimizer_params_viewed_as_real_when_complex(a, b):
    params = [a * 1, torch.complex(b, b * 2)]
    grads = [a.sin(), torch.complex(b.cos(), b)]
    _view_as_real(params, grads)
    steps = [p.add(g, alpha=-0.1) if torch.is_floating_point(p) else p for p, g in zip(params, grads)]
    return steps, [torch.is_complex(p) for p in params]


# ---- grad mode as PyTorch's own dynamo tests use it (test_functions.py's nested no_grad functions):
# @torch.no_grad() / @torch.enable_grad() on functions defined in the compiled function, set_grad_enabled
# as a statement and as a block, managers kept across a break; each case reports the mode it ends in ----
def _trainable(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).requires_grad_(),)


@case((3,), extra=_trainable)
def local_function_decorated_by_no_grad(x, w):
    @torch.no_grad()
    def frozen(t):
        return t * w
    y = frozen(x)
    return y, y.requires_grad, (x * w).requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def local_function_decorated_by_set_grad_enabled(x, w):
    # made, set_grad_enabled(False) sets the mode; as a decorator it puts the mode back and gives a
    # function run without grad
    @torch.set_grad_enabled(False)
    def frozen(t):
        return t * w
    between = torch.is_grad_enabled()
    y = frozen(x)
    return y, y.requires_grad, between, (x * w).requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def enable_grad_decorated_helper_called_under_no_grad(x, w):
    @torch.enable_grad()
    def tracked(t):
        return t * w
    with torch.no_grad():
        y = tracked(x)
        z = x * w
    return y, y.requires_grad, z.requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def no_grad_decorated_helper_raising_leaves_the_mode_as_before(x, w):
    @torch.no_grad()
    def check(t):
        if t.shape[0] != 4:
            raise ValueError("four expected")
        return t
    try:
        y = check(x)
    except ValueError:
        y = x * w
    return y, y.requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def set_grad_enabled_as_a_statement(x, w):
    torch.set_grad_enabled(False)
    y = x * w
    torch.set_grad_enabled(True)
    return y, y.requires_grad, (x * w).requires_grad


@case((3,), extra=_trainable)
def set_grad_enabled_block_inside_no_grad_restores_no_grad(x, w):
    with torch.no_grad():
        with torch.set_grad_enabled(True):
            y = x * w
        z = x * w
    return y, y.requires_grad, z.requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def no_grad_decorated_function_kept_across_a_break(x, w):
    @torch.no_grad()
    def frozen(t):
        return t * w
    y = x + 1
    torch._dynamo.graph_break()
    return frozen(y).requires_grad, (y * w).requires_grad


DIFFERS["no_grad_decorated_function_kept_across_a_break"] = (
    (2, 1), (3, 1),
    "TorchDynamo does not inline the rebuilt decorated function in the resume function and "
    "compiles its frame on its own (3 graphs); dynview inlines it into the resume function's graph (2)")


@case((3,), extra=_trainable)
def no_grad_manager_made_before_a_break(x, w):
    ctx = torch.no_grad()
    y = x + 1
    torch._dynamo.graph_break()
    with ctx:
        z = y * w
    return z, z.requires_grad, torch.is_grad_enabled()


# ---- found running PyTorch's own dynamo tests (test_functions.py, test_dicts.py) through dynview ----
def _raises_with_a_keyword(x, strict=False):
    raise TypeError("not this one")


@case((3,))
def keyword_call_raising_then_a_method_call_in_the_handler(x):
    # the raising call's KW_NAMES (3.11, 3.12) must not name the handler's next call's arguments
    try:
        _raises_with_a_keyword(x, strict=True)
    except TypeError:
        x = x + x.sum()
    return x


class _Record:
    def __init__(self, a):
        self.a = a

    def __eq__(self, other):  # compared with eager's after the call (mutated arguments)
        return type(other) is _Record and vars(self) == vars(other)


@case((3,), extra=lambda seed: (_Record(1),))
def dunder_dict_read_after_an_attribute_assignment(x, rec):
    rec.c = 7
    return x + 1, "c" in rec.__dict__, rec.__dict__.get("c"), len(vars(rec))


@case((3,), extra=lambda seed: (_Record(1),))
def attribute_read_after_a_dunder_dict_write(x, rec):
    rec.__dict__["a"] = 3
    rec.__dict__["z"] = 4
    return x * rec.a, getattr(rec, "z", 100)


@case((3,), extra=lambda seed: (_Record(1),))
def dunder_dict_taken_before_an_assignment_sees_it(x, rec):
    d = vars(rec)
    rec.b = 2
    return x * len(d), sorted(d)


class _SlottedTally:  # a __slots__ class (no __dict__) with its own __eq__, as OrderedSet-like helpers write it
    __slots__ = ("seen",)

    def __init__(self):
        self.seen = {}

    def __eq__(self, other):
        if isinstance(other, int):
            return len(self.seen) == other
        return type(other) is _SlottedTally and self.seen == other.seen


@case((3,), extra=lambda seed: (_SlottedTally(),))
def slotted_object_compared_after_the_trace_changed_it(x, tally):
    # its __eq__ is inlined: it reads the dict as the trace changed it, not the real one as it was
    tally.seen["k"] = 1
    return x + 1, tally == 1, tally != 1, 1 == tally


@case((3,), extra=lambda seed: (types.MappingProxyType({"scale": 2.0, "shift": seed}),))
def read_through_a_mappingproxy_argument(x, settings):
    # an item of a read-only view of a dict (a class's __dict__, a frozen config) is guarded
    # (test_dict_guards.py: a change of the dict behind it recompiles)
    return x * settings["scale"]


@case((3,), (3,))
def tensor_type_names_and_conversions(a, b):
    # Tensor.type() is the legacy name of the dtype on the device; Tensor.type(t) converts to it
    half = a.to(torch.float16)
    return (b.type(half.type()), a.type(torch.float64), b.type("torch.IntTensor"), a.type(torch.HalfTensor),
            half.type(), a.type(torch.float32) is a)


@case((3,))
def in_finds_a_constant_before_reaching_a_tensor(x):
    items = [1, 2, 3, 4, 5, x]
    assert 3 in items          # list.__contains__ stops at the first equal item: the tensor is not compared
    assert 6 not in [1, 2, 3, 4, 5]
    return sum(items)


@case((3,))
def int_times_list_and_list_repeated_in_place(x):
    pair = [x, x * 2]
    alias = pair
    pair *= 2                  # in place: the alias sees four items
    return sum(4 * [x]), len(alias), alias[3], 2 * (x, 1)


@case((3,))
def class_name_of_a_tensor_in_an_f_string(x):
    tag = f"{x.__class__.__name__} input"
    if tag.startswith("Tensor"):
        return x + 1, tag, type(x) is x.__class__
    return x - 1, tag, False


@case((3,))
def builtin_methods_called_through_their_type(x):
    # dict.get(d, k), list.append(l, v), str.join(sep, parts): the unbound method with its instance
    # first, as generic helpers write them (and as a subclass's override calls its base)
    d = {"scale": 2.0}
    parts = ["q", "k"]
    list.append(parts, "v")
    return x * dict.get(d, "scale", 1.0) + len(dict.keys(d)), str.join("/", parts), tuple.index((1, 2, 3), 2)


# ---- sets from outside the frame: the trace's copy, written back into the caller's set ----
class _Settings:
    def __init__(self, seed):
        self.skip = {"dropout", "layer0"}

    def __eq__(self, other):
        return type(other) is _Settings and vars(self) == vars(other)


@case((3,), extra=lambda seed: ({"q", "k", 0},))
def set_argument_changed_by_its_methods_and_in_place_operators(x, names):
    names.add("v")
    names.discard("k")
    names |= {"o"}
    names -= {0}
    return x * len(names), "q" in names, sorted(map(str, names)), names.issubset({"q", "v", "o", 1, 2})


@case((3,), extra=lambda seed: (_Settings(seed),))
def set_held_by_a_config_read_and_extended(x, settings):
    if "dropout" in settings.skip:
        x = x * 2
    settings.skip.update({"attention"})
    return x + len(settings.skip), len(settings.skip - {"dropout"})


@case((3,), extra=lambda seed: ({frozenset("ab"), 0},))
def set_of_frozensets_searched_by_a_set(x, groups):
    # set.discard / set.remove / `in` take a set as the frozenset with its items
    found = {"a", "b"} in groups
    groups.discard({"a", "b"})
    local = set([frozenset("xy"), frozenset("z")])
    local.discard(set("xy"))
    return x + len(groups), found, len(local)


@case((3,))
def set_changed_in_place_seen_through_an_alias(x):
    seen = {1, 2}
    alias = seen
    seen |= {3}
    seen &= {2, 3, 4}
    seen ^= {5}
    return x * len(alias), sorted(alias), alias is seen


@case((3,))
def frozenset_copy_is_the_same_object_and_id(x):
    frozen = frozenset("abc")
    again = frozen.copy()      # a frozenset's copy is itself
    seen = {id(frozen): "first"}
    return x + 1, again is frozen, id(again) == id(frozen), seen.get(id(again))


@case((3,))
def reraising_the_outer_exception_does_not_chain_a_cycle(x):
    try:
        try:
            raise KeyError("outer")
        except KeyError as outer_:
            outer = outer_
            try:
                raise ValueError("inner")
            except ValueError as inner_:
                inner = inner_
                raise outer    # inner's context was outer: CPython cuts that link
    except KeyError:
        x = x * 2
    return x + 1, outer.__context__ is inner, inner.__context__ is None


# ---- frames that are given no tensor: compiled when they make tensors (torch among their globals) ----
@case(extra=lambda seed: (4, "causal"))
def mask_built_from_a_length_and_a_mode(n, mode):
    mask = torch.ones(n, n, dtype=torch.bool)
    if mode == "causal":
        mask = torch.tril(mask)
    return mask, mask.sum(dim=-1)


class _Labelled:  # its __repr__ is called by print in the caller's eager code, after the break
    def __init__(self, n):
        self.n = n

    def __repr__(self):
        return f"labelled {self.n}"


class _Tallied:
    def __init__(self, n):
        self.n = n
        self.total = None

    def __repr__(self):   # no tensor given, but it makes one: a frame of its own, with a graph
        self.total = torch.arange(self.n) * 2
        return "tallied"

    def __eq__(self, other):
        return type(other) is _Tallied and self.n == other.n and torch.equal(self.total, other.total)


@case((3,), extra=lambda seed: (_Labelled(2), _Tallied(3)))
def frames_called_by_print_after_the_break(x, labelled, tallied):
    y = x + 1
    print(labelled, tallied, file=io.StringIO())
    return y * 2


@case((3,))
def set_slots_called_by_name_and_through_the_type(x):
    # p.__or__(q), set.__sub__(p, q), set.__len__(s): the slot wrappers of the trace's own sets
    p, q = {1, 2, 3}, {2}
    union = p.__or__({9})
    q.__ior__({4})
    return (x + len(set.__sub__(p, q)) + set.__len__(union), set.issubset(q, p), sorted(q),
            p.__eq__({1, 2, 3}), (7).__mul__(3), set.__contains__(union, 9))


@case((3,))
def fromkeys_of_ordered_dict_and_defaultdict(x):
    # each class's fromkeys makes one of that class; a defaultdict made so has no default_factory
    flags = collections.defaultdict.fromkeys(["a", "b"], 1)
    order = collections.OrderedDict.fromkeys("xy", 2)
    try:
        flags["missing"]
        found = True
    except KeyError:
        found = False
    return x + flags["a"] + len(flags) + order["y"], list(order), flags.default_factory is None, found


# ---- functions made in the frame carry attributes; contextlib.ExitStack -------------------------
# Each case runs a tensor op first: a break anywhere would show as a second graph.
@contextlib.contextmanager
def _tagged(log, n):
    log.append(("enter", n))
    try:
        yield n
    finally:
        log.append(("exit", n))


@case((3,))
def exitstack_enter_context_after_an_op(x):
    y = x * 2
    log = []
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(_tagged(log, 1))
        b = stack.enter_context(_tagged(log, 2))
        y = y * a + b
    return y, log


@case((3,))
def exitstack_callbacks_run_in_reverse(x):
    y = x + 1
    out = []
    with contextlib.ExitStack() as stack:
        stack.callback(out.append, "first")
        stack.callback(out.append, "second")
        y = y * 3
    return y, out


@case((3,))
def exitstack_with_suppress_inside(x):
    y = x + 1
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.suppress(KeyError))
        y = y * 2
        y = y + {}["missing"]
    return y


@case((3,))
def exitstack_pop_all_then_close(x):
    y = x + 1
    log = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(_tagged(log, 1))
        rest = stack.pop_all()
    log.append("between")
    rest.close()
    return y, log


@case((3,))
def exitstack_closed_by_hand(x):
    log = []
    stack = contextlib.ExitStack()
    stack.enter_context(_tagged(log, 1))
    y = x * 2
    stack.close()
    return y, log


@case((3,))
def wraps_after_an_op(x):
    # functools.update_wrapper writes __module__, __name__, __qualname__, __doc__, __wrapped__ and
    # the __dict__ of the wrapper made here
    y = x.sin()

    def inner(t, k=2):
        """Doubles."""
        return t * k

    @functools.wraps(inner)
    def outer(*args, **kwargs):
        return inner(*args, **kwargs) + 1
    return outer(y), outer.__name__, outer.__qualname__, outer.__doc__, outer.__wrapped__ is inner, outer.__module__


@case((3,))
def function_attributes_after_an_op(x):
    y = x.cos()

    def f(t):
        return t + 1
    f.calls = 0
    f.calls += 1
    f.__dict__["tag"] = "t"
    return f(y) * f.calls, f.tag, getattr(f, "missing", 5), hasattr(f, "calls"), sorted(f.__dict__), f.__name__


@case((3,))
def lambda_name_and_doc(x):
    # (g.__defaults__ too equals eager's; TorchDynamo 2.13 fails on reading it: AssertionError "push
    # expects VariableTracker")
    y = x + 1
    g = lambda t, k=3: t * k  # noqa: E731
    return g(y), g.__name__, g.__doc__


# ---- range objects kept as values: len, indexing, attributes, membership, methods ----
@case((6,))
def range_object_len_index_iter(x):
    y = x * 2
    r = range(1, x.shape[0], 2)
    tot = 0
    for i in r:
        tot += i
    return y * len(r) + r[1] + tot + r.start + r.stop + r.step, 3 in r, r.index(3), r.count(5), list(reversed(r))


@case((6,))
def range_in_zip_beside_another(x):
    y = x + 1
    r = range(3)
    return [y[i] * j for i, j in zip(r, range(10, 13))], len(r) == 3


# ---- __getattr__ fallbacks on objects made in the trace; list.sort ----
class _LazyDefaults:
    """Names with a known prefix read as a default until set (a registry of optional settings)."""
    _DEFAULTS = {"opt_": 0, "use_": False}

    def __init__(self):
        self.known = 2

    def __getattr__(self, name):
        for prefix, default in self._DEFAULTS.items():
            if name.startswith(prefix):
                return default
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}")


@case((3,))
def getattr_fallback_after_an_op(x):
    y = x * 3
    o = _LazyDefaults()
    o.opt_scale = 4
    return (y * o.known + o.opt_bias + o.opt_scale, o.use_cache, hasattr(o, "other"), getattr(o, "opt_w", 5),
            getattr(o, "zzz", 7))


class _DelegatingConfig:
    """Unknown names are read from a dict, as many libraries' config objects do."""
    def __init__(self, **kw):
        self._values = dict(kw)

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None


@case((3,))
def config_with_getattr_delegation(x):
    y = x + 1
    cfg = _DelegatingConfig(scale=2.0, act="relu")
    out = y * cfg.scale
    if cfg.act == "relu":
        out = out.relu()
    return out, hasattr(cfg, "missing"), getattr(cfg, "dropout", 0.1)


@case((2, 3))
def list_sort_after_an_op(x):
    y = x * 2
    xs = [3, 1, 2]
    xs.sort()
    names = ["b", "aa", "c"]
    names.sort(key=len, reverse=True)
    return y + xs[0], xs, names


@case((2, 3), extra=lambda seed: ([3, 1, 2],))
def list_argument_sorted_in_place(x, xs):
    # the caller's list is sorted (the transformed code writes it back)
    xs.sort(reverse=True)
    return x * xs[0]


# ---- torch.inference_mode blocks: _enter_inference_mode / _exit_inference_mode nodes ----
@case((3,))
def inference_mode_block(x):
    y = x * 2
    with torch.inference_mode():
        z = y + 1
    return z * 3, y.requires_grad


@case((3,))
def inference_mode_false_block(x):
    y = x * 2
    with torch.inference_mode(False):
        z = y + 1
    return z


@torch.inference_mode()
def _predict(t):
    return t.sin() * 2


@case((3,))
def inference_mode_decorated_helper(x):
    y = x + 1
    return _predict(y) + 1


@case((3,))
def inference_mode_nested_in_no_grad(x):
    with torch.no_grad():
        with torch.inference_mode(True):
            y = x.cos()
        z = y * 2
    return z


@case((3,))
def inference_mode_left_by_an_exception(x):
    # the block's exit runs as the exception leaves it; torch.is_inference_mode_enabled() breaks (its
    # answer is state no guard checks), as in TorchDynamo
    y = x + 1
    try:
        with torch.inference_mode():
            y = y * 2
            raise KeyError("k")
    except KeyError:
        y = y - 1
    return y, torch.is_inference_mode_enabled()


@case((3,))
def inference_mode_break_inside(x):
    y = x + 1
    with torch.inference_mode():
        y = y * 2
        print("", end="")
        y = y + 3
    return y



# ---- torch.return_types results (max(dim=), topk, sort): their class kept, alive across a break ----

@case((3, 4))
def named_result_alive_across_a_print(x):
    best = torch.max(x, dim=0)
    torch._dynamo.graph_break()  # best is rebuilt for the resume function
    return best.values + 1, best.indices, type(best).__name__


@case((3, 4))
def named_result_fields_and_tuple_forms(x):
    r = torch.sort(x, dim=1)
    values, order = r
    return (isinstance(r, tuple), len(r), r.values + values, hasattr(r, "_fields"), hasattr(r, "indices"),
            tuple(r)[1] + order, type(r) is torch.return_types.sort)


@case((3, 4), extra=lambda seed: (torch.topk(torch.randn(3, 5, generator=torch.Generator().manual_seed(seed)), 2),))
def named_result_passed_in(x, top):
    return x[:, :2] * top.values, top.indices.sum(), len(top), type(top).__name__


# ---- from PyTorch's own dynamo tests' constructs: exceptions, grad-mode decorators, legacy types ----

class _RetryableError(RuntimeError):
    pass


@case((3,))
def exc_info_inside_the_handler(x):
    # logging/retry helpers read the exception being handled from sys; outside a handler it is None
    try:
        raise _RetryableError("shape mismatch")
    except RuntimeError:
        kind, err, _ = sys.exc_info()
        handled = (kind is _RetryableError, str(err), isinstance(err, RuntimeError))
    return x + 1, handled


@case((3,))
def grad_mode_decorators_applied_inside(x):
    # @torch.no_grad with no parentheses calls torch.no_grad(fn): a decorated function, not a manager
    @torch.no_grad
    def frozen(t):
        return t.sin() * 2

    def tracked(t):
        return t.cos()

    tracked = torch.enable_grad(tracked)
    with torch.no_grad():
        inner = tracked(x)
    return frozen(x), inner, torch.is_grad_enabled()


@case((3,))
def deque_extended_by_a_generator_reading_it(x):
    # each item is added before the generator makes the next, so y[0] moves as eager's does
    y = collections.deque([1])
    y.extendleft(y[0] + z for z in range(3))
    y.extend(y[-1] * 10 + z for z in range(2))
    return x + len(y), list(y)


@case((3,))
def count_and_index_over_tensors_compare_their_values(x):
    # eager compares 3 with the tensor (an ambiguous truth: RuntimeError); index stops at a match first
    mixed = [3, x + 1]
    first = mixed.index(3)
    try:
        n = mixed.count(3)
    except RuntimeError as e:
        n = str(e)[:22]
    return x * first, n


@case((3,))
def legacy_tensor_types_in_isinstance(x):
    # torch.FloatTensor answers by dtype and device, not by class
    return (x + 1, isinstance(x, torch.FloatTensor), isinstance(x, torch.LongTensor),
            isinstance(x.long(), (torch.DoubleTensor, torch.LongTensor)), isinstance(x, (torch.Tensor, int)))


@case((3,))
def to_a_python_type(x):
    # Tensor.to(bool/int/float): torch.bool, torch.int64, torch.float64
    return x.to(bool), (x * 3).to(int), x.to(float) + 1, torch.zeros(2, dtype=float)


class _Base:
    def scale(self, x):
        return x * 2


class _Child(_Base):
    def scale(self, x):
        torch._dynamo.graph_break()
        return x + super().scale(x)


_CHILD = _Child()


@case((3,))
def zero_argument_super_after_a_break(x):
    # the method's resume function after the break takes self first, where super() looks for it
    return _CHILD.scale(x.sin())


# ---- torch.nn.attention.sdpa_kernel blocks: a pair of _sdpa_kernel nodes around the attention, as
# TorchDynamo's graph has them (the backends named by string) ----
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402


def _heads(x):
    b, n, d = x.shape
    return x.view(b, n, 2, d // 2).transpose(1, 2)


@case((2, 5, 8))
def attention_forced_to_the_math_kernel(x):
    q = _heads(x)
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True)
    return out.transpose(1, 2).reshape(x.shape) + x


class _KernelChoosingAttention(nn.Module):  # the backends a module was configured with, in priority order
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.backends = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH, SDPBackend.MATH]

    def forward(self, x):
        q, k, v = (_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        with sdpa_kernel(self.backends, set_priority=True) as ctx:
            out = F.scaled_dot_product_attention(q, k, v)
        return out.transpose(1, 2).flatten(2), ctx


module_case(_KernelChoosingAttention, (2, 4, 8))


class _AttentionWithBreak(nn.Module):  # a break inside the block: split, both graphs under the kernel
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.backends = [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]

    def forward(self, x):
        q, k, v = (_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        with sdpa_kernel(self.backends, set_priority=True):
            out = F.scaled_dot_product_attention(q, k, v)
            torch._dynamo.graph_break()
            out = F.scaled_dot_product_attention(out, k, v, is_causal=True)
        return out.transpose(1, 2).flatten(2)


module_case(_AttentionWithBreak, (2, 4, 8))


# ---- torch's Python helpers that answer a number about a tensor: inlined, as TorchDynamo inlines them ----
class FanScaledLinear(nn.Module):
    # a layer that rescales its weight by its fan in the forward (equalized learning rate, as
    # StyleGAN-like generators write it)
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        scale = nn.init.calculate_gain("leaky_relu", 0.2) / fan_in ** 0.5
        return F.linear(x, self.weight * scale)


module_case(FanScaledLinear, (2, 3))


@case((4, 3, 2))
def init_fans_of_a_tensor_read_in_the_forward(x):
    fan = nn.init._calculate_correct_fan(x, "fan_out")
    fans = nn.init._calculate_fan_in_and_fan_out(x)
    return x / fan, fans, type(fans).__name__


# ---- torch._check in model code: a condition over sizes is decided while tracing (guarded), and
# its message, often a lambda over tensors, is called only when it fails (the frame then breaks there
# and eager raises). transformers' torch_compilable_check calls torch._check(cond) while compiling ----
def _compilable_check(cond, msg, error_type=ValueError):  # the shape of transformers' helper
    if torch.compiler.is_compiling():
        torch._check(cond)
        return
    if not cond:
        raise error_type(msg)


@case((2, 4, 8), (8, 8))
def checks_of_sizes(hidden, w):
    b, n, d = hidden.shape
    _compilable_check(d == w.shape[0], f"hidden size {d} does not match the weight's {w.shape[0]}")
    torch._check(n >= 1)
    torch._check_value(b <= 64, lambda: f"batch {b} too large")
    return hidden @ w


@case((2, 4, 8))
def check_with_a_message_over_the_input(x):
    torch._check(x.shape[-1] % 4 == 0, lambda: f"last dim of {tuple(x.shape)} not divisible by 4")
    torch._check_index(x.shape[0] < 8, lambda: "index out of range")
    return x.view(*x.shape[:-1], -1, 4).sum(-1)

