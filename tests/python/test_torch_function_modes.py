"""Torch function modes and compiled code (issue 14): a mode entered inside the compiled function or
outside it is traced (its handler inlined for every torch function, tensor method, operator and
tensor attribute read, as eager dispatches them); a break inside a mode's block splits the frame. The counts
of the stateless cases are compared with TorchDynamo's in python_cases_modes.py; here, what those cases cannot show: a mode's own state
against eager's, the frame that runs eagerly, and modes entered outside."""
import pytest
import torch
import torch.nn.functional as F
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


def logged_across_a_break(x):
    with Log() as log:
        y = x.cos()
        torch._dynamo.graph_break()
        y = y * 2 + y.shape[0]
    return y, log.calls


def test_a_break_inside_a_mode_block_splits_the_frame(capsys):
    # as TorchDynamo splits it (2 graphs, 1 break): print runs under the mode, entered for real by
    # the transformed code, and the resume function is traced under it and leaves its block
    x = torch.randn(3)
    want = breaks_in_the_block(x)
    got, records = _records(breaks_in_the_block, x)
    torch.testing.assert_close(got, want)
    assert [r["has_break"] for r in records] == [True, False], records
    assert records[0]["break_id"] == "DV0015" and not records[0]["eager_why"]
    # the handler doubled each sin in both graphs
    assert records[0]["ops"].count("mul") == 1 and records[1]["ops"].count("mul") == 1, records
    assert torch._C._len_torch_function_stack() == 0
    torch.testing.assert_close(dynview.compile(breaks_in_the_block, backend="eager")(x), want)
    assert dynview._C.take_records() == []
    # a logging mode's list across the break is eager's (TorchDynamo 2.13 loses the `as` target in its
    # resume function: AttributeError on None)
    want = logged_across_a_break(x)
    got, records = _records(logged_across_a_break, x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] and "cos" in want[1] and "__get__" in want[1], (got[1], want[1])
    assert len(records) == 2 and torch._C._len_torch_function_stack() == 0


class AddIsMul(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.add, torch.Tensor.add):
            return torch.mul(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def plain(x, y):
    return (x + y).sin()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_mode_entered_outside_is_traced(backend):
    # As TorchDynamo traces it: the call is compiled again with the mode on the trace's stack (its
    # handler inlined: the graph multiplies), guarded by the number and types of the modes; the graph
    # runs with the mode off the stack, so nothing is done twice (TorchDynamo 2.13's "eager" backend
    # runs its graph under the mode again). Another instance of the mode hits; outside the mode the
    # first entry serves again.
    x, y = torch.randn(3), torch.randn(3)
    dynview.reset()
    dynview._C.take_records()
    c = dynview.compile(plain, backend=backend)
    torch.testing.assert_close(c(x, y), plain(x, y))
    with AddIsMul():
        torch.testing.assert_close(c(x, y), plain(x, y))
        torch.testing.assert_close(c(x, y), torch.sin(x * y))
    with AddIsMul():
        torch.testing.assert_close(c(x, y), torch.sin(x * y))
    torch.testing.assert_close(c(x, y), torch.sin(x + y))
    records = dynview._C.take_records()
    assert [("mul" in r["ops"], "add" in r["ops"]) for r in records] == [(False, True), (True, False)], records
    assert "torch function mode stack: expected 0 mode(s), found 1" in records[1]["reason"]
    assert "___check_type_id(___get_torch_function_mode_stack_at(0), AddIsMul)" in records[1]["guards"]
    entries = dynview._C.cache_entries(plain.__code__)
    assert len(entries) == 2 and sorted(e["hits"] for e in entries) == [1, 2], entries
    dynview.reset()


def test_a_logging_mode_outside_sees_eager_calls_across_a_break(capsys):
    def f(x):
        y = torch.relu(x) + 1
        print("between")  # a break: the resume function is traced under the mode too
        return F.softmax(y * 2, -1)

    x = torch.randn(4)
    with Log() as want:
        expected = f(x)
    dynview.reset()
    dynview._C.take_records()
    c = dynview.compile(f, backend="eager")
    for _ in range(2):  # compiled, then a hit with a new mode object
        with Log() as got:
            out = c(x)
        torch.testing.assert_close(out, expected)
        assert got.calls == want.calls and "softmax" in want.calls, (got.calls, want.calls)
    assert [r["has_break"] for r in dynview._C.take_records()] == [True, False]
    dynview.reset()


def made_here(x):
    z = torch.zeros(3) * 2  # no device: the mode's device
    return z, torch.ones(2, device="cpu") + x.sum()


def test_a_device_context_outside_gives_factories_its_device():
    # `with torch.device(...)` (torch.set_default_device's mode): torch.utils._device's handler is
    # traced; the factory without a device makes its tensor on the mode's device, as in eager
    x = torch.randn(3)
    with torch.device("meta"):
        want = made_here(x)
    torch._dynamo.reset()
    with torch.device("meta"):
        explained = torch._dynamo.explain(made_here)(x)
    dynview.reset()
    dynview._C.take_records()
    with torch.device("meta"):
        got = dynview.compile(made_here, backend="eager")(x)
    assert want[0].device.type == "meta" and want[1].device.type == "cpu"
    assert (got[0].device.type, got[1].device.type) == ("meta", "cpu")
    assert got[0].shape == want[0].shape
    records = dynview._C.take_records()
    assert (len(records), sum(r["has_break"] for r in records)) == (explained.graph_count, len(explained.break_reasons)) == (1, 0)
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


def test_a_logging_mode_outside_a_transformers_model_sees_eagers_calls():
    # Every torch function, method, operator and attribute read of a real model reaches the mode as
    # in eager, in eager's order -- and nothing eager does not hand it (torch.compiler.is_exporting,
    # which transformers calls on its compile path, is a Python function without handle_torch_function)
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=100)).eval()
    ids = torch.randint(0, 100, (1, 8))
    with torch.no_grad(), Log() as want:
        expected = model(ids).last_hidden_state
    dynview.reset()
    dynview._C.take_records()
    compiled = dynview.compile(model, backend="eager")
    for _ in range(2):  # the capture, then a hit under another Log
        with torch.no_grad(), Log() as got:
            out = compiled(ids).last_hidden_state
        torch.testing.assert_close(out, expected)
        assert got.calls == want.calls and len(want.calls) > 100
    records = dynview._C.take_records()
    assert [(r["graph"] is not None, r["has_break"]) for r in records] == [(True, False)]
    dynview.reset()
