"""Tensor.register_hook in compiled code (issue 14): on a tensor the code computes, the hook traced as a
subgraph called through torch.ops.higher_order.register_hook, as TorchDynamo 2.13 does; on an input or
a parameter, registered for real after the graph, as TorchDynamo replays it. The cases in
python_cases_modules.py compare forward results and counts with eager and TorchDynamo; here, the
gradients the hooks shape, under the eager backend and under AOTAutograd (aot_eager), which traces the
hook into its backward graph."""
import pytest
import torch

import dynview
import python_cases_modules as cases


def _grads(fn, w, x, compiled, backend):
    w = w.detach().clone().requires_grad_()
    f = dynview.compile(fn, backend=backend) if compiled else fn
    out = f(x, w)
    out.sum().backward()
    return out.detach(), w.grad


HOOKED = [cases.activation_gradient_clipped_by_a_hook, cases.hook_is_a_module_level_function,
          cases.hook_reads_a_mask_made_in_forward, cases.hook_returning_none_and_two_hooks]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", HOOKED, ids=[f.__name__ for f in HOOKED])
def test_gradients_shaped_by_the_hook_equal_eager(fn, backend):
    dynview.reset()
    dynview._C.take_records()
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(3, 2, generator=g), torch.randn(4, 3, generator=g)
    want = _grads(fn, w, x, False, backend)
    got = _grads(fn, w, x, True, backend)
    torch.testing.assert_close(got, want)
    # one graph holding the hook operator, no break; and a second call is a cache hit
    records = dynview._C.take_records()
    assert [r["qualname"] for r in records] == [fn.__name__] and not records[0]["has_break"]
    assert "register_hook" in records[0]["ops"], records[0]["ops"]
    torch.testing.assert_close(_grads(fn, w, x, True, backend), want)
    assert dynview._C.take_records() == []
    dynview.reset()


def test_the_hook_changes_the_gradient():
    # (the check above would pass with the hook dropped if it did nothing: this one would not)
    x, w = torch.ones(3, 2), torch.ones(4, 3)
    plain = lambda x, w: (w @ x).sum() * 10  # noqa: E731

    def clipped(x, w):
        h = w @ x
        h.register_hook(lambda grad: grad.clamp(-0.1, 0.1))
        return h.sum() * 10

    _, g_plain = _grads(plain, w, x, True, "aot_eager")
    _, g_clipped = _grads(clipped, w, x, True, "aot_eager")
    torch.testing.assert_close(g_clipped, g_plain / 100)


def test_gradient_reversal_module_trains_as_eager():
    torch.manual_seed(0)
    eager_m = cases.GradientReversal()
    compiled_m = cases.GradientReversal()
    compiled_m.load_state_dict(eager_m.state_dict())
    cm = dynview.compile(compiled_m, backend="aot_eager")
    x = torch.randn(5, 3)
    eager_m(x).pow(2).sum().backward()
    cm(x).pow(2).sum().backward()
    for (n, a), b in zip(eager_m.named_parameters(), compiled_m.parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=n)
    dynview.reset()


def test_a_hook_that_stores_the_gradient_runs_eagerly_and_stores_it():
    # its body appends to a list: the graph breaks at the registration (as TorchDynamo's), which then
    # runs as it is, so the list gets the gradient in the backward pass as in eager
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(3, 2, generator=g), torch.randn(4, 3, generator=g)
    cases._seen_grads.clear()
    _grads(cases.hook_storing_the_gradient_breaks, w, x, False, "eager")
    want = list(cases._seen_grads)
    cases._seen_grads.clear()
    dynview.reset()
    dynview._C.take_records()
    _grads(cases.hook_storing_the_gradient_breaks, w, x, True, "eager")
    assert len(cases._seen_grads) == len(want) == 1
    torch.testing.assert_close(cases._seen_grads[0], want[0])
    brk = [r for r in dynview._C.take_records() if r["has_break"]]
    assert brk and "append" in brk[0]["break_message"]
    dynview.reset()


def test_a_hook_on_a_tensor_without_grad_raises_as_eager():
    def f(x):
        h = x * 2
        h.register_hook(lambda grad: grad)
        return h

    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="doesn't require gradient") as want:
        f(x)
    with pytest.raises(RuntimeError, match="doesn't require gradient") as got:
        dynview.compile(f, backend="eager")(x)
    assert str(got.value) == str(want.value)


def test_the_handle_is_not_traced():
    # TorchDynamo 2.13 fails on handle.remove() ("idx must not be None"); dynview runs the frame as it is
    def f(x):
        h = x * 2
        handle = h.register_hook(lambda grad: grad * 100)
        handle.remove()
        return h.sum()

    x = torch.randn(3, requires_grad=True)
    dynview.compile(f, backend="eager")(x).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    dynview.reset()


def test_a_hook_on_an_input_is_registered_after_the_graph():
    calls = []

    def f(x):
        def hook(grad):
            calls.append(grad.shape)
            return grad * 2
        x.register_hook(hook)
        return (x.sin() * 3).sum()

    def run(compiled, backend):
        x = torch.arange(3.0).requires_grad_()
        (dynview.compile(f, backend=backend) if compiled else f)(x).backward()
        return x.grad, list(calls)

    for backend in ("eager", "aot_eager"):
        want = run(False, backend)
        calls.clear()
        dynview.reset()
        dynview._C.take_records()
        got = run(True, backend)
        calls.clear()
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] == [torch.Size([3])]  # the hook ran once, as Python, in the backward pass
        records = dynview._C.take_records()
        assert len(records) == 1 and not records[0]["has_break"] and records[0]["graph"] is not None
    dynview.reset()


class ScaledWeightGrad(torch.nn.Module):
    """A forward that registers a hook on its own weight, every call (eager keeps adding them)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        self.lin.weight.register_hook(lambda grad: grad * 0.5)
        return self.lin(x).sum()


def test_a_parameter_hook_registered_by_forward_accumulates_as_eager():
    torch.manual_seed(0)
    a, b = ScaledWeightGrad(), ScaledWeightGrad()
    b.load_state_dict(a.state_dict())
    cb = dynview.compile(b, backend="aot_eager")
    x = torch.randn(4, 3)
    for _ in range(2):
        a(x).backward()
        cb(x).backward()
    torch.testing.assert_close(b.lin.weight.grad, a.lin.weight.grad)
    assert len(b.lin.weight._backward_hooks) == len(a.lin.weight._backward_hooks) == 2
    dynview.reset()
