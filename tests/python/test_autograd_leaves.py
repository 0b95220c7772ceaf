"""Tensors that require grad made inside the compiled code (a factory given requires_grad=True,
requires_grad_() on an intermediate or on a detached input): eager returns autograd leaves, and a
graph compiled by AOTAutograd (aot_eager, inductor) would return them without requires_grad. dynview
breaks there, as TorchDynamo does, so what comes back is eager's -- flags, values and gradients; a
requires_grad_() leaf of the graph's own that no output requiring grad comes from stays in the graph."""
import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def factory_requires_grad(x):
    w = torch.ones(3, requires_grad=True)
    return w * x, w


def random_factory_requires_grad(x):
    w = torch.randn(3, requires_grad=True)
    return (w * x).sum(), w


def tensor_literal_requires_grad(x):
    t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return t * x, t


def requires_grad_on_an_intermediate(x):
    y = x * 2
    y.requires_grad_()
    return y.sum(), y


def requires_grad_on_a_detached_input(x):
    # the gradient-penalty idiom: a detached copy made a leaf, then differentiated outside
    y = x.detach().requires_grad_(True)
    return (y * 3).sum(), y


def requires_grad_set_false_is_kept(x):
    y = x.detach().requires_grad_(False)  # no change: stays in the graph
    return y * 2, y


def leaf_made_inside_a_no_grad_block(x):
    # transformers' MRA without its CUDA kernel: torch.zeros_like(q).requires_grad_() as the attention,
    # under inference. No output that requires grad comes from the leaf: one graph, as TorchDynamo's
    with torch.no_grad():
        approx = torch.zeros_like(x).requires_grad_()
        y = x * 2 + approx
    return y, approx.detach() + 1


def leaf_made_then_a_loss_of_it(x):
    # the same leaf where grad is on: the loss requires grad through it, so the call breaks (the
    # capture is made again with it a break, as TorchDynamo restarts its analysis)
    z = torch.zeros_like(x).requires_grad_()
    return (z * x + 1).sum(), z


CASES = [factory_requires_grad, random_factory_requires_grad, tensor_literal_requires_grad,
         requires_grad_on_an_intermediate, requires_grad_on_a_detached_input, requires_grad_set_false_is_kept,
         leaf_made_inside_a_no_grad_block, leaf_made_then_a_loss_of_it]


def outcome(fn, backend=None):
    torch.manual_seed(0)
    f = fn if backend is None else dynview.compile(fn, backend=backend)
    out = f(torch.arange(3.0))
    seen = [(t.detach().tolist(), t.requires_grad, t.is_leaf) for t in out]
    # the gradient of the first output reaches the leaf it came from
    if out[0].requires_grad:
        out[0].sum().backward()
        seen.append(out[1].grad.tolist())
    return seen


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_a_leaf_made_inside_comes_back_as_eager_makes_it(fn, backend):
    assert outcome(fn, backend) == outcome(fn)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_graphs_and_breaks_equal_torch_dynamo(fn):
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(fn)(torch.arange(3.0))
    ours = dynview.explain(fn)(torch.arange(3.0))
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons))
