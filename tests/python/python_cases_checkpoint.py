"""torch.utils.checkpoint inside compiled code, written the way model code calls it: a block per
layer in a loop (non-reentrant, as PyTorch recommends), through functools.partial as transformers'
gradient checkpointing does, with keyword arguments for the checkpointed function, nested, with a
selective-checkpointing policy, and with graph breaks inside the checkpointed function. Appended to
python_cases.CASES; each is checked against eager and torch._dynamo.explain by test_python_cases.py
(gradients through the checkpointed graph: test_checkpoint.py)."""
import functools
from functools import wraps

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from python_cases import case, module_case


class _Block(nn.Module):  # a pre-norm transformer block, as small GPT-style models write one
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask=None):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class CheckpointedGPT(nn.Module):
    def __init__(self, layers=3, d=16):
        super().__init__()
        self.blocks = nn.ModuleList(_Block(d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.gradient_checkpointing = True

    def forward(self, x):
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.ln_f(x)


module_case(CheckpointedGPT, (2, 5, 16))


class CheckpointedWithMask(nn.Module):  # extra positional and keyword arguments for the block
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(_Block() for _ in range(2))

    def forward(self, x):
        t = x.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False, mask=mask)
        return x


module_case(CheckpointedWithMask, (2, 5, 16))


class PartialCheckpointing(nn.Module):  # transformers' _gradient_checkpointing_func
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.SiLU()) for _ in range(3))
        self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)

    def forward(self, x):
        for layer in self.layers:
            x = self._gradient_checkpointing_func(layer.__call__, x)
        return x.mean(-1)


module_case(PartialCheckpointing, (4, 8))


class _GCLayer(nn.Module):
    # transformers' GradientCheckpointingLayer: each subclass's forward wrapped so that only the
    # outermost wrapper checkpoints (`type(self).forward is forward_with_checkpointing`)
    gradient_checkpointing = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        forward = cls.forward

        @wraps(forward)
        def forward_with_checkpointing(self, *args, **kwargs):
            is_outermost = type(self).forward is forward_with_checkpointing
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled() and is_outermost:
                return checkpoint(functools.partial(forward, self, **kwargs), *args, use_reentrant=False)
            return forward(self, *args, **kwargs) * 0.5  # (eager's value differs if the test above is wrong)

        cls.forward = forward_with_checkpointing


class _DecoderLayer(_GCLayer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, hidden_states, scale=1.0):
        return torch.tanh(self.fc(hidden_states)) * scale


class GradientCheckpointingLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(_DecoderLayer() for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, scale=2.0)
        return x


module_case(GradientCheckpointingLayers, (3, 8))


class ShiftedWindowCheckpointed(nn.Module):  # Swin's layers set their shift in forward (the value it has)
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.shift_size = 1

    def set_shift(self, t):
        self.shift_size = 0 if t.shape[0] <= 2 else 1

    def layer(self, t):
        self.set_shift(t)
        return self.fc(t).roll(self.shift_size, 0)

    def forward(self, x):
        return checkpoint(self.layer, x, use_reentrant=False), self.shift_size


module_case(ShiftedWindowCheckpointed, (4, 6))


_MLP = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 6))


@case((4, 6))
def checkpoint_a_lambda_over_a_module(x):
    return checkpoint(lambda t: _MLP(t).relu() + t, x, use_reentrant=False)


@case((4, 6))
def checkpoint_returning_a_tuple_with_a_constant(x):
    def body(t, k):
        return t.sin() * k, k + 1

    y, k = checkpoint(body, x, 3, use_reentrant=False)
    return y * k


@case((4, 6))
def checkpoint_returning_nested_containers(x):
    def body(t):
        return t.sin(), [t.cos(), 3], {"double": t * 2}

    a, (b, c), d = checkpoint(body, x, use_reentrant=False)
    return a + b * c + d["double"]


@case((4, 6))
def checkpoint_returning_its_input(x):
    a, b = checkpoint(lambda t: (t, t.exp()), x, use_reentrant=False)
    return a * b


@case((4, 6))
def checkpoint_closing_over_an_earlier_tensor(x):
    w = x.cos()

    def body(t):
        return t * w + w.sum()

    return checkpoint(body, x, use_reentrant=False) + w


@case((4, 6))
def checkpoint_inside_a_checkpoint(x):
    def inner(t):
        return t.sin() * 2

    def outer(t):
        return checkpoint(inner, t, use_reentrant=False).cos() + t

    return checkpoint(outer, x, use_reentrant=False)


@case((4, 6))
def checkpoint_of_a_function_that_only_checkpoints(x):
    return checkpoint(lambda t: checkpoint(torch.sin, t, use_reentrant=False), x, use_reentrant=False)


@case((4, 6))
def checkpoint_with_its_own_options(x):
    return checkpoint(_MLP, x, use_reentrant=False, preserve_rng_state=False, determinism_check="none") * 2


@case((4, 6))
def checkpoint_output_used_twice(x):
    h = checkpoint(_MLP, x, use_reentrant=False)
    return h.softmax(-1) @ h.T, h


@case((4, 6))
def checkpoint_mutating_an_intermediate(x):
    y = x * 1

    def body(t):
        t.add_(1)
        return t.sin()

    return checkpoint(body, y, use_reentrant=False), y


@case((4, 6))
def checkpoint_under_no_grad(x):
    with torch.no_grad():
        return checkpoint(_MLP, x, use_reentrant=False)


@case((4, 6))
def checkpoint_without_use_reentrant(x):  # eager warns and takes the reentrant variant
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return checkpoint(torch.tanh, x.requires_grad_()) * 2


def _policy(ctx, op, *args, **kwargs):  # selective activation checkpointing: keep matmul outputs
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


@case((4, 6))
def checkpoint_with_a_selective_policy(x):
    context_fn = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(_MLP, x, use_reentrant=False, context_fn=context_fn)


@case((4, 6))
def checkpoint_with_a_break_inside(x):
    def body(t):
        print("", end="")
        return t.sin()

    return checkpoint(body, x.cos(), use_reentrant=False).exp()


@case((4, 6))
def checkpoint_with_a_data_dependent_value_inside(x):
    def body(t):
        return t * t.sum().item()

    return checkpoint(body, x.cos(), use_reentrant=False).exp()


@case((4, 6))
def checkpoint_with_graph_break_call_inside(x):
    def body(t):
        torch._dynamo.graph_break()
        return t.sin()

    return checkpoint(body, x.cos(), use_reentrant=False).exp()


@case((4, 6))
def checkpoint_of_dropout_in_eval_mode(x):
    return checkpoint(F.dropout, x, 0.5, False, use_reentrant=False) + 1
