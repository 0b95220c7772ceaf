"""Torch function modes and compiled code (issue 14): a mode entered inside the compiled function is
traced (its handler inlined for every torch function, tensor method, operator and tensor attribute
read, as eager dispatches them); a mode entered outside runs the call as it is; a break inside a
mode's block runs the frame eagerly. The counts of the stateless cases are compared with
TorchDynamo's in python_cases_modes.py; here, what those cases cannot show: a mode's own state
against eager's, the frame that runs eagerly, and modes entered outside."""
import pytest
import torch
from torch.overrides import TorchFunctionMode

import dynview


class Log(TorchFunctionMode):
    """Records what it is given, in order (the mode users write to see what a model calls)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))


def logged(x, w):
    with Log() as log:
        h = torch.nn.functional.linear(x, w)
        n = h.shape[-1]
        h = h.relu() + n
        y = (2 - h)[0].sum(dim=-1)
        if torch.is_floating_point(y) and torch.numel(y) == 1:  # answered without a graph node, given to the mode
            y = torch.as_tensor(y, dtype=torch.float64)
    return y, log.calls


def _records(fn, *args):
    dynview._C.reset()
    dynview._C.take_records()
    out = dynview.compile(fn, backend="eager")(*args)
    return out, dynview._C.take_records()


def test_a_mode_made_in_the_trace_sees_what_eager_gives_it():
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    want = logged(x, w)
    got, records = _records(logged, x, w)
    torch.testing.assert_close(got[0], want[0])
    # every call in eager's order, the attribute read (Tensor.shape's __get__) and the reflected
    # 2 - h (Tensor.__rsub__) among them
    assert got[1] == want[1] and {"__get__", "__rsub__", "is_floating_point", "numel", "as_tensor"} <= set(want[1]), (got[1], want[1])
    top = [r for r in records if r["qualname"] == "logged"]
    assert len(top) == 1 and top[0]["graph"] is not None and not top[0]["has_break"]
    assert {"linear", "relu"} <= set(top[0]["ops"])
    # a second call: a cache hit, whose mode logs the same calls again (the handler ran in the trace;
    # the list is rebuilt by the transformed code)
    again = dynview.compile(logged, backend="eager")(x, w)
    assert again[1] == want[1]
    assert dynview._C.take_records() == []


class Doubled(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.Tensor.sin else out


def breaks_in_the_block(x):
    with Doubled():
        y = x.sin()
        print("inside", y.shape)  # a graph break
        y = y.sin()
    return y + 1


def test_a_break_inside_a_mode_block_runs_the_frame_eagerly(capsys):
    # (TorchDynamo splits it: 2 graphs, 1 break; dynview does not yet enter the mode again in a
    # resume function, so the frame runs as it is and only the handler's frames are compiled)
    x = torch.randn(3)
    want = breaks_in_the_block(x)
    got, records = _records(breaks_in_the_block, x)
    torch.testing.assert_close(got, want)
    top = [r for r in records if r["qualname"] == "breaks_in_the_block"][0]
    assert top["has_break"] and top["break_id"] == "DV0015"
    assert "torch function mode" in top["eager_why"]
    # later calls run it as it is, with the same results
    torch.testing.assert_close(dynview.compile(breaks_in_the_block, backend="eager")(x), want)


class AddIsMul(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.add, torch.Tensor.add):
            return torch.mul(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def plain(x, y):
    return (x + y).sin()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_mode_entered_outside_sees_the_call_as_in_eager(backend):
    # compiled without a mode, then called under one: the graph would not call the handler (with
    # aot_eager not even through its FX code), so the call runs as it is
    x, y = torch.randn(3), torch.randn(3)
    dynview.reset()
    c = dynview.compile(plain, backend=backend)
    torch.testing.assert_close(c(x, y), plain(x, y))
    with AddIsMul():
        torch.testing.assert_close(c(x, y), plain(x, y))
        torch.testing.assert_close(c(x, y), torch.sin(x * y))
    # and outside it again the compiled entry is used: one entry, hit
    c(x, y)
    entries = dynview._C.cache_entries(plain.__code__)
    assert len(entries) == 1 and entries[0]["hits"] >= 1
    dynview.reset()


def test_the_trace_reads_its_own_mode_stack():
    def f(x):
        with AddIsMul():
            n = torch._C._len_torch_function_stack()
            y = torch.add(x, n)
        return y, n, torch._C._len_torch_function_stack()

    x = torch.randn(3)
    want = f(x)
    got = dynview.compile(f, backend="eager")(x)
    assert got[1:] == want[1:] == (1, 0)
    torch.testing.assert_close(got[0], want[0])
