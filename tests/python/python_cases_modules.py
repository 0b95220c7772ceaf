"""Module cases: forward pre-hooks and forward hooks (feature taps, input rescaling, keyword hooks),
written as model code and libraries register them. Appended to python_cases.CASES; each runs against
eager and torch._dynamo.explain."""
import inspect

import torch
import torch.nn as nn

from python_cases import CASES, case, module_case


class FeatureTap(nn.Module):
    """The feature-extraction idiom: forward hooks that save intermediate outputs by name."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        self.feats = {}
        self.body[0].register_forward_hook(self._save("lin0"))
        self.body[1].register_forward_hook(self._save("act"))

    def _save(self, name):
        def hook(module, inputs, output):
            self.feats[name] = output.detach()
        return hook

    def forward(self, x):
        self.feats = {}  # this call's features
        out = self.body(x)
        return out, self.feats["lin0"] * 2, self.feats["act"].sum()


module_case(FeatureTap, (3, 4))


class PreAndPostLambdas(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        self.lin.register_forward_pre_hook(lambda m, args: args[0] + 1)  # not a tuple: wrapped in one
        self.lin.register_forward_hook(lambda m, args, out: out + args[0])
        self.lin.register_forward_hook(lambda m, args, out: None)  # None keeps the result

    def forward(self, x):
        return self.lin(x).relu()


module_case(PreAndPostLambdas, (2, 3))


class Scale(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


class KeywordHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Scale()
        self.inner.register_forward_pre_hook(self._pre, with_kwargs=True)
        self.inner.register_forward_hook(self._post, with_kwargs=True)

    @staticmethod
    def _pre(module, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 3.0
        return args, kwargs

    @staticmethod
    def _post(module, args, kwargs, out):
        return out + kwargs["scale"]

    def forward(self, x):
        return self.inner(x, scale=0.5) + self.inner(x)


module_case(KeywordHooks, (4,))


class Clamp(nn.Module):
    def __init__(self, lo, hi):
        super().__init__()
        self.lo, self.hi = lo, hi

    def hook(self, module, inputs, output):  # a bound method of another module as the hook
        return output.clamp(self.lo, self.hi)


class HookedByOtherModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.clamp = Clamp(-0.5, 0.5)
        self.proj = nn.Linear(4, 4)
        self.proj.register_forward_hook(self.clamp.hook)

    def forward(self, x):
        return self.proj(x) * 2


module_case(HookedByOtherModule, (2, 4))


# ---- RNN, GRU and LSTM modules: TorchDynamo does not wrap them (allow_rnn=False), so a forward that
# reads one runs eagerly, and a helper that reads one is a break at its call ----
class GRUEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8, batch_first=True, bidirectional=True)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        out, h = self.rnn(x)
        return self.head(out.mean(1)) + h.sum(0).repeat(1, 2).sum(-1, keepdim=True)


module_case(GRUEncoder, (2, 5, 4))


class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 6)
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)

    def encode(self, x):
        return self.lstm(x)[0]

    def forward(self, x):
        h = self.embed(x).tanh()
        return self.encode(h).softmax(-1)


module_case(LSTMTagger, (2, 5, 4))


class MaskedScoresInTraining(nn.Module):
    """Attention scores scaled, then masked in place, in training mode: the scaled scores require grad
    (the projections' parameters do) and are no leaf, so masked_fill_ is allowed, as in eager."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-1, -2) * 0.125
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        scores.masked_fill_(causal, float("-inf"))
        bias = self.q.bias * 2
        bias.add_(1)
        return scores.softmax(-1), bias


module_case(MaskedScoresInTraining, (2, 5, 8))


class LayerScaledStack(nn.Module):
    """Per-layer learnable scales in a ParameterList and named biases in a ParameterDict, as
    layer-scale / adapter code keeps them: indexed, iterated and summed in forward (iterating a
    ParameterList gave nothing, and indexing it failed with KeyError, before they were followed)."""

    def __init__(self, depth=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(depth))
        self.scales = nn.ParameterList(nn.Parameter(torch.full((4,), 0.5 + i)) for i in range(depth))
        self.biases = nn.ParameterDict({"pre": nn.Parameter(torch.randn(4)), "post": nn.Parameter(torch.randn(4))})

    def forward(self, x):
        x = x + self.biases["pre"]
        for i, layer in enumerate(self.layers):
            x = layer(x) * self.scales[i]
        reg = sum(s.pow(2).sum() for s in self.scales) + sum(p.sum() for p in self.scales)
        names = [k for k in self.biases]
        return x + self.biases["post"] + self.scales[-1], reg, names


module_case(LayerScaledStack, (2, 4))


class NamedSequentialHead(nn.Module):
    """A Sequential of named children (built from an OrderedDict) indexed by position: seq[0] is
    _modules['proj'], not _modules['0']."""

    def __init__(self):
        super().__init__()
        from collections import OrderedDict
        self.head = nn.Sequential(OrderedDict(proj=nn.Linear(4, 8), act=nn.GELU(), out=nn.Linear(8, 2)))

    def forward(self, x):
        h = self.head[0](x)
        return self.head[-1](self.head[1](h)), self.head[1:](h).shape


module_case(NamedSequentialHead, (3, 4))


class ConfigBackedModule(nn.Module):
    """A module whose class defines its own __getattr__, as diffusers' ModelMixin does: a name that
    is neither an attribute nor a parameter, buffer or submodule is looked up in a config dict read
    through self.__dict__; anything else goes to nn.Module.__getattr__ (super()). Its dtype
    property probes every submodule with hasattr() for an optional hook, as ModelMixin.dtype does.
    Both broke (DV0005) before the class's own __getattr__ was followed."""

    def __init__(self):
        super().__init__()
        self._internal_dict = {"scale": 3, "shift": 0.5}
        self.proj = nn.Linear(4, 4)
        self.register_buffer("offset", torch.arange(4.0))

    def __getattr__(self, name):
        in_config = "_internal_dict" in self.__dict__ and name in self.__dict__["_internal_dict"]
        if in_config and name not in self.__dict__:
            return self.__dict__["_internal_dict"][name]
        return super().__getattr__(name)

    @property
    def dtype(self):
        for _, sub in self.named_modules():
            if hasattr(sub, "_cast_hook"):
                return sub._cast_hook.dtype
        return next(self.parameters()).dtype

    def forward(self, x):
        y = self.proj(x) * self.scale + self.shift + self.offset
        return y.to(self.dtype), hasattr(self, "missing_name")


module_case(ConfigBackedModule, (2, 4))


class SignatureRoutedAttention(nn.Module):
    """diffusers' Attention.forward: the keyword arguments its processor's __call__ accepts, found by
    a set of inspect.signature(...).parameters.keys(), are passed on and the others dropped (set()
    of the keys view broke with DV0004 before)."""

    class Processor:
        def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, *args, **kwargs):
            ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
            out = attn.to_out(attn.to_q(hidden_states) + attn.to_q(ctx).mean(1, keepdim=True))
            return out if temb is None else out + temb

    def __init__(self):
        super().__init__()
        self.to_q = nn.Linear(4, 4)
        self.to_out = nn.Linear(4, 4)
        self.processor = self.Processor()

    def forward(self, hidden_states, **cross_attention_kwargs):
        hidden_states = hidden_states * 0.5  # (work before it: a break there would split the graph)
        accepted = set(inspect.signature(self.processor.__call__).parameters.keys())
        names = [p.name for p in inspect.signature(self.processor.__call__).parameters.values()]
        unused = sorted(k for k in cross_attention_kwargs if k not in accepted)
        kwargs = {k: v for k, v in cross_attention_kwargs.items() if k in accepted}
        return self.processor(self, hidden_states, **kwargs), unused, len(accepted), names


def _routed_attention(x, temb):
    return SIGNATURE_ROUTED(x, temb=temb, scale=2.0, ip_adapter_masks=None)


SIGNATURE_ROUTED = SignatureRoutedAttention()
CASES.append(("signature_routed_attention_kwargs", _routed_attention,
              lambda seed: (torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(seed)),
                            torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(seed + 1)))))


# ---- how Python finds a module's attribute and calls it (what nn.Module.__call__ and __getattr__ do) ----
class GatedBlock(nn.Module):
    """A method that shares its name with a submodule: self.gate is the method (class attributes come
    before nn.Module.__getattr__'s submodules), as in eager."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.gate = nn.Sigmoid()  # registered in _modules, shadowed by the method below

    def gate(self, h):
        return h * torch.tanh(h)

    def forward(self, x):
        return self.gate(self.proj(x))


module_case(GatedBlock, (2, 4))


class ScaledCall(nn.Module):
    """A module whose class defines its own __call__ (a wrapper scaling forward's result)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def __call__(self, x, scale=2.0):
        return self.forward(x) * scale

    def forward(self, x):
        return self.lin(x)


_SCALED = ScaledCall()


@case((2, 3))
def calls_a_module_with_its_own_dunder_call(x):
    return _SCALED(x) + _SCALED(x, scale=0.5)


def _patched_forward(x):
    return torch.relu(x) - 1


_PATCHED = nn.Linear(3, 3)
_PATCHED.forward = _patched_forward  # monkeypatched on the instance, as adapters and offloading hooks do


@case((2, 3))
def calls_a_module_whose_forward_is_set_on_the_instance(x):
    return _PATCHED(x) * 2


class Stack(nn.Module):
    """Layers reached through the model's own __getitem__ (self[i]), as some model zoos write it."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    def forward(self, x):
        for i in range(len(self)):
            x = self[i](x).relu()
        return x


module_case(Stack, (2, 3))

_TRUNK = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3), nn.Tanh())


@case((2, 3))
def runs_a_slice_of_a_slice_of_a_sequential(x):
    head = _TRUNK[1:]
    return head[1:](x), head[-1](x), len(head[::2])


_BIASES = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(4)])


@case((2, 3))
def sums_a_slice_of_a_parameter_list(x):
    # before: the slice of a ParameterList was read as its (empty) submodules: sum() gave 0
    return x + sum(_BIASES[1:]), x * sum(p.sum() for p in _BIASES[::2])


class MultiHead(nn.Module):
    """Heads picked by name and by membership, as task-conditioned models do."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1)})
        self.scales = nn.ParameterDict({"cls": nn.Parameter(torch.ones(2))})
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.extra = nn.Linear(4, 4)

    def forward(self, x):
        outs = {}
        for task in ("cls", "reg", "seg"):
            if task in self.heads:  # before: DV0018, 'in' with a constant and a module
                y = self.heads[task](x)
                outs[task] = y * self.scales[task] if task in self.scales else y
        shared = [b for b in (self.extra, self.blocks[1]) if b in self.blocks]
        return outs, len(shared), shared[0](x)


module_case(MultiHead, (2, 4))


# ---- Tensor.register_hook on tensors the forward computes (TorchDynamo 2.13: a register_hook
# operator with the hook traced as a subgraph); gradients are compared in test_tensor_hooks.py ----
def _leaf(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(4, 3, generator=g).requires_grad_(),)


@case((3, 2), extra=_leaf)
def activation_gradient_clipped_by_a_hook(x, w):
    h = torch.tanh(w @ x)
    h.register_hook(lambda grad: grad.clamp(-0.1, 0.1))
    return h.sum(dim=0)


def _finite_or_zero(grad):
    return torch.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)


@case((3, 2), extra=_leaf)
def hook_is_a_module_level_function(x, w):
    h = w @ x
    h.register_hook(_finite_or_zero)
    return (h * h).mean()


@case((3, 2), extra=_leaf)
def hook_reads_a_mask_made_in_forward(x, w):
    h = w @ x
    keep = (h.detach() > 0).float()
    h.register_hook(lambda grad: grad * keep)
    return torch.relu(h)


def _observe(grad):
    return None


@case((3, 2), extra=_leaf)
def hook_returning_none_and_two_hooks(x, w):
    h = w @ x
    h.register_hook(_observe)
    h.register_hook(lambda grad: grad * 2)
    h.register_hook(lambda grad: grad + 1)
    return h.exp().sum()


_seen_grads = []


@case((3, 2), extra=_leaf)
def hook_storing_the_gradient_breaks(x, w):
    h = w @ x
    h.register_hook(lambda grad: _seen_grads.append(grad))
    return h.sum()


@case((3, 2), extra=_leaf)
def hook_registered_on_an_input(x, w):
    # a tensor from outside: TorchDynamo registers it after the graph, as dynview does
    w.register_hook(lambda grad: grad * 2)
    return (w @ x).sum(dim=0)


class GradientReversal(nn.Module):
    """Domain-adversarial training's layer: identity forward, gradient negated and scaled backward."""

    def __init__(self, alpha=0.5):
        super().__init__()
        self.alpha = alpha
        self.features = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        feats = torch.relu(self.features(x))
        if self.training:
            feats = feats * 1.0
            feats.register_hook(lambda grad: -self.alpha * grad)
        return self.head(feats)


module_case(GradientReversal, (4, 3))


# ---- torch.nn.utils' hook objects: weight_norm's WeightNorm and spectral_norm's SpectralNorm are
# forward pre-hooks that recompute the weight before each call (vocoders, GAN discriminators) ----
class WeightNormResBlock(nn.Module):
    """HiFi-GAN's residual block, as vocoders write it: dilated convolutions under weight_norm."""

    def __init__(self, channels=4, dilations=(1, 3)):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.utils.weight_norm(nn.Conv1d(channels, channels, 3, dilation=d, padding=d)) for d in dilations)

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(nn.functional.leaky_relu(x, 0.1))
        return x


module_case(WeightNormResBlock, (2, 4, 12))


class WeightNormOnTheOutputDim(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.utils.weight_norm(nn.Linear(5, 3), dim=None)  # one norm over the whole weight
        self.gate = nn.utils.parametrizations.weight_norm(nn.Linear(5, 3))  # the newer spelling

    def forward(self, x):
        return self.proj(x) * torch.sigmoid(self.gate(x))


module_case(WeightNormOnTheOutputDim, (2, 5))


def _spectral_eval():
    m = nn.Sequential(nn.utils.spectral_norm(nn.Linear(4, 4)), nn.LeakyReLU(0.2), nn.utils.spectral_norm(nn.Linear(4, 1)))
    return m.eval()  # no power iteration: the weight from the stored u and v


CASES.append(("spectral_norm_discriminator_in_eval", _spectral_eval(),
              lambda seed: [torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))]))


# ---- torch.layout and torch.memory_format values as arguments (diffusers' randn_tensor passes the
# latents' layout on) ----
@case((2, 3))
def factories_given_the_layout_of_a_tensor(x):
    noise_like = torch.zeros(x.shape, layout=x.layout, device=x.device, dtype=x.dtype)
    ones = torch.ones((2, 3), layout=torch.strided)
    return x + noise_like + ones, x.layout == torch.strided


@case((2, 3, 4, 4))
def memory_format_arguments(x):
    y = x.contiguous(memory_format=torch.channels_last)
    z = torch.empty_like(x, memory_format=torch.preserve_format).fill_(2.0)
    return y * z, y.is_contiguous(memory_format=torch.channels_last), y.stride()


from diffusers.utils.torch_utils import randn_tensor  # noqa: E402 (make deps installs diffusers)


@case((2, 4))
def diffusers_randn_tensor_shape(x):
    noise = randn_tensor(x.shape, generator=None, device=x.device, dtype=x.dtype)
    return x * 0 + noise.shape[0], noise.shape == x.shape, noise.dtype
