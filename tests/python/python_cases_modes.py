"""Torch function modes entered inside compiled code (issue 14), written as their users write them:
transformers' masks built under torch._dynamo's TransformGetItemToIndex (t5gemma2, unlimited_ocr),
rewriting and logging modes in the style of PyTorch's test_torch_function_mode tests and of
torch.overrides' documentation, nested modes, reflected operators, Python torch functions
(F.softmax reaches handle_torch_function), attribute reads. Appended to python_cases.CASES."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
from torch.overrides import BaseTorchFunctionMode, TorchFunctionMode
from transformers.masking_utils import and_masks, causal_mask_function, padding_mask_function, sdpa_mask

from python_cases import DIFFERS, NOT_YET, case, module_case  # noqa: F401


class AddIsMul(TorchFunctionMode):
    """Every addition multiplies (test_torch_function_mode_guards-style rewriting mode)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.add, torch.Tensor.add):
            return torch.mul(*args, **kwargs)
        return func(*args, **kwargs)


class ScaledSoftmax(BaseTorchFunctionMode):
    """BaseTorchFunctionMode: a temperature applied wherever softmax is called."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.softmax:
            x, *rest = args
            return func(x / 2.0, *rest, **kwargs)
        return super().__torch_function__(func, types, args, kwargs)


class NegateSin(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.sin or func is torch.sin:
            return -out
        return out


@case((3,), (3,))
def mode_rewrites_operators_and_torch_functions(x, y):
    with AddIsMul():
        a = x + y
        b = torch.add(x, y, alpha=1) if False else torch.add(x, y)
        c = x.add(y)
    return a, b, c, x + y


@case((3,))
def mode_sees_reflected_operators(x):
    with AddIsMul():
        return 2 + x, 2 - x, x - 2, 3 * x, 1 / (x.abs() + 1)


@case((2, 5))
def python_torch_function_under_a_mode(x):
    # F.softmax is Python code: its has_torch_function branch hands the call to the mode
    with ScaledSoftmax():
        return F.softmax(x, dim=-1), torch.softmax(x, -1)


@case((3,))
def nested_modes_innermost_first(x):
    with AddIsMul():
        with NegateSin():
            y = (x + x).sin()
        z = x + 1
    return y, z


@case((3,))
def mode_returned_by_enter(x):
    with NegateSin() as mode:
        y = x.sin()
    return y, isinstance(mode, TorchFunctionMode)


@case((4, 3))
def attributes_read_under_a_mode(x):
    with NegateSin():
        n, d = x.shape
        y = x.new_zeros(n, d).sin() + x.sin() * x.dtype.is_floating_point
    return y, n * d


@case((5, 5), extra=lambda seed: (torch.tensor(seed % 5), torch.tensor((seed + 2) % 5)))
def index_by_zero_d_tensors_under_transform_getitem(x, i, j):
    # what flex attention's score_mod and transformers' vmapped masks do: x[i, j] with 0-d
    # tensor indices becomes an index op, not a Python int
    with TransformGetItemToIndex():
        return x[i, j] + 1, x[i] * 2


def _padding(seed):
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, :seed % 3 + 1] = False
    return (mask,)


@case((2, 6, 8), extra=_padding)
def transformers_vmapped_mask_with_padding(x, padding):
    # transformers.masking_utils.sdpa_mask with use_vmap=True: the mask functions vmapped four
    # times under TransformGetItemToIndex (the path of custom and/or mask functions)
    mask = sdpa_mask(batch_size=x.shape[0], q_length=x.shape[1], kv_length=x.shape[1],
                     mask_function=and_masks(causal_mask_function, padding_mask_function(padding)),
                     allow_is_causal_skip=False, use_vmap=True, device=x.device)
    return x.masked_fill(~mask[:, 0, :, :1], 0.0), mask


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        with ScaledSoftmax():
            w = F.softmax(q @ k.transpose(-1, -2), dim=-1)
        return w @ v


module_case(_Attention, (2, 4, 8))


class CountCalls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


@case((3,), (3,))
def mode_counting_its_calls(x, y):
    with CountCalls() as counter:
        z = torch.relu(x) * y + 1
        z = F.softmax(z, -1)
    return z, counter.n


DIFFERS["mode_counting_its_calls"] = (
    (1, 0), (4, 0),
    "TorchDynamo 2.13 raises AttributeError('n') reading the attribute the mode's __init__ set, runs the frame "
    "eagerly and compiles the handler's frames on their own (4 graphs); dynview traces the mode (1 graph), and "
    "the count equals eager's")



# Graph breaks inside a mode's block split the frame, as TorchDynamo splits them for a mode whose
# __enter__/__exit__ are TorchFunctionMode's: the transformed code enters the mode for real before
# the code that runs eagerly, and the resume function is traced under it (the mode its block leaves).
@case((3,))
def break_inside_a_mode_block(x):
    with NegateSin():
        y = x.sin()
        torch._dynamo.graph_break()
        y = y.sin() + y
    return y.cos()


@case((2, 3))
def break_inside_nested_mode_blocks_inner(x):
    with AddIsMul():
        y = x + 1
        with NegateSin():
            z = y.sin()
            print("", end="")
            z = z + y.sin()
        w = z + 2
    return w, y


@case((3,), (3,))
def torch_function_called_eagerly_under_the_mode(x, y):
    with AddIsMul():
        a = torch.add(x, y)
        n = int(torch.add(x, y).sum().item() > 0)  # .item(): a break, run under the mode
        b = x + n
    return a, b
