"""A compiled frame's arguments are wrapped as its code reads them, as TorchDynamo's lazy locals: an
argument the code does not read on the path it takes (a flag, a mask, a mode string, **kwargs
passed for other layers) adds no guard, so calls that change only it hit the cache; one still
unread at a graph break is handed to the resume function as it came (reloaded from the frame's own
slot, not rebuilt from a guarded value). Each case against eager (values, mutated arguments) and
torch.compile's compile counts on the same calls; the guards of each compile name no argument the
code did not read."""
import pytest
import torch
from torch import nn

import dynview
from test_engine_behaviour import counting_dynamo
from test_lazy_sequences import _reset, same  # noqa: F401  (_reset: the engines reset around each test, autouse)


def run_both(fn, calls):
    """Each call (a function giving (args, kwargs)) through eager, torch.compile and dynview: values
    equal eager's; returns (dynview's graphs, torch.compile's graphs, the guard texts of dynview's
    compiles)."""
    td, n_td = counting_dynamo(fn)
    dv = dynview.compile(fn, backend="eager")
    dynview._C.take_records()
    for make in calls:
        args, kwargs = make()
        want = fn(*args, **kwargs)
        same(td(*args, **kwargs), want)
        same(dv(*args, **kwargs), want)
    records = dynview._C.take_records()
    guards = [g for r in records for g in r["guards"]]
    return len([r for r in records if r["graph"] is not None]), n_td[0], guards


def names_argument(guards, name):
    return any(f"L['{name}']" in g for g in guards)


X = torch.ones(4)


def scale_small_inputs(x, k):
    if x.shape[0] <= 2:
        return x * k
    return x + 1


def test_an_int_argument_the_path_taken_does_not_read_adds_no_guard():
    dv, td, guards = run_both(scale_small_inputs, [lambda i=i: ((X, i), {}) for i in range(4)])
    assert (dv, td) == (1, 1)
    assert not names_argument(guards, "k") and names_argument(guards, "x")


def test_the_int_argument_is_guarded_once_the_code_reads_it():
    small = torch.ones(2)
    dv, td, guards = run_both(scale_small_inputs, [lambda: ((small, 2), {}), lambda: ((small, 2), {}), lambda: ((small, 3), {})])
    assert (dv, td) == (2, 2)
    assert names_argument(guards, "k")


class Block(nn.Module):
    """A transformer-style layer: flags and masks other layers use, passed to every layer."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, layer_name="block", **kwargs):
        hidden_states = self.proj(hidden_states)
        return torch.relu(hidden_states)


def test_unused_flags_masks_strings_and_kwargs_of_a_module_forward_add_no_guard():
    torch.manual_seed(0)
    block = Block()
    h = torch.randn(2, 4)
    calls = [lambda i=i: ((h,), {"attention_mask": torch.ones(1, i + 2), "output_attentions": i % 2 == 0,
                                 "layer_name": f"layer{i}", "position_ids": torch.arange(i + 1)}) for i in range(4)]
    dv, td, guards = run_both(block, calls)
    assert (dv, td) == (1, 1)
    for name in ("attention_mask", "output_attentions", "layer_name", "kwargs"):
        assert not names_argument(guards, name), name


def add_then_log(x, k, tag):
    y = x + 1
    print("step", end="")  # a graph break: the resume function gets k and tag as they came
    return y * k


def test_arguments_unread_at_a_break_reach_the_resume_function_as_they_came(capsys):
    dv, td, _ = run_both(add_then_log, [lambda i=i: ((X, i, f"t{i}"), {}) for i in range(4)])
    assert (dv, td) == (3, 3)  # the first graph once; the resume function's at k=0, then k dynamic
    capsys.readouterr()


def add_mask_after_break(x, scale, mask):
    y = x + 1
    torch._dynamo.graph_break()
    if mask is not None:
        y = y + mask
    return y * scale


def test_a_tensor_or_none_unread_at_a_break_is_reloaded_from_the_frame():
    calls = [lambda i=i: ((X, 2.0, torch.full((4,), float(i)) if i % 2 else None), {}) for i in range(4)]
    dv, td, _ = run_both(add_mask_after_break, calls)
    assert (dv, td) == (3, 3)


def delete_after_print(x, cache):
    y = x * 2
    print("", end="")
    del cache  # reads the binding: the resume function must get it
    return y


def overwrite_before_read(x, k):
    k = 3
    return x * k


@pytest.mark.parametrize("fn", [delete_after_print, overwrite_before_read])
def test_an_argument_deleted_or_overwritten_unread_adds_no_guard(fn):
    dv, td, guards = run_both(fn, [lambda i=i: ((X, i), {}) for i in range(4)])
    assert dv == td
    assert not names_argument(guards, "cache") and not names_argument(guards, "k")


class Base(nn.Module):
    def forward(self, x):
        return x * 2


class Child(Base):
    def forward(self, x, step):
        return super().forward(x) + 1  # zero-argument super() reads self from the frame


def test_zero_argument_super_reads_self_and_leaves_other_arguments_unread():
    dv, td, guards = run_both(Child(), [lambda i=i: ((X, i), {}) for i in range(4)])
    assert (dv, td) == (1, 1)
    assert not names_argument(guards, "step")


def sum_in_inference_mode(xs, unused):
    with torch.inference_mode():
        total = xs[0] + xs[1]
    return total


def test_a_tensor_first_read_inside_inference_mode_is_guarded_as_the_frame_gets_it():
    # The trace enters the block for real; the tensors' guards must still hold at the frame's entry,
    # outside it, or every call recompiles.
    xs = [torch.ones(3), torch.ones(3)]
    dv, td, _ = run_both(sum_in_inference_mode, [lambda i=i: ((xs, i), {}) for i in range(3)])
    assert (dv, td) == (1, 1)
