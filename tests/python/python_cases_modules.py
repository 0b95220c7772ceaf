"""Module cases: forward pre-hooks and forward hooks (feature taps, input rescaling, keyword hooks),
written as model code and libraries register them. Appended to python_cases.CASES; each runs against
eager and torch._dynamo.explain."""
import torch
import torch.nn as nn

from python_cases import module_case


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
