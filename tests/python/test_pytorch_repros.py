"""Cases from PyTorch's own TorchDynamo regression tests (test/dynamo/test_repros.py) that dynview
failed while torch.compile passed them, written as their authors wrote them and checked against
eager and torch.compile on the same calls."""
import pytest
import torch

import dynview
from counting import counting_backend

pytestmark = pytest.mark.usefixtures("fresh_engine")


def _index_calls(compile_fn, reset):
    reset()
    backend, n = counting_backend()
    outs = []
    for index in ([], [2], [0, 3]):
        def f(t):
            xs = [1, 2, 3, 4]
            return t + xs.index(3, *index)

        outs.append(compile_fn(f, backend=backend, fullgraph=True)(torch.zeros(1)))
    return outs, n[0]


def test_list_index_bounds_that_change_between_compiles():
    # test_list_index: the same code object compiled for index=[], [2], [0, 3]; on the third compile
    # the closed-over list's ints were symbolic (automatic dynamic) and list.index broke
    want = [torch.zeros(1) + [1, 2, 3, 4].index(3, *i) for i in ([], [2], [0, 3])]
    td, td_graphs = _index_calls(torch.compile, torch._dynamo.reset)
    dv, dv_graphs = _index_calls(dynview.compile, dynview.reset)
    for a, b, w in zip(td, dv, want):
        torch.testing.assert_close(a, w)
        torch.testing.assert_close(b, w)
    assert dv_graphs == td_graphs


def _closure_module():
    x = torch.randn(10, 10)

    class Mod(torch.nn.Module):
        @property
        def y(self):
            return torch.ones(10, 10) + x

        def forward(self, x):
            return x @ self.y

    return Mod(), x


def test_a_property_reading_a_tensor_of_its_enclosing_scope():
    # test_nn_module_property_closure: the getter's closure holds a tensor, read through the getter
    # found on the class (it has no source of its own): a graph input, not a break
    mod, captured = _closure_module()
    x = torch.randn(10, 10)
    backend, n = counting_backend()
    compiled = dynview.compile(lambda t: mod(t), backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x), x @ (torch.ones(10, 10) + captured))
    captured.mul_(2)  # the captured tensor changed in place: read again, not a constant of the graph
    torch.testing.assert_close(compiled(x), x @ (torch.ones(10, 10) + captured))
    assert n[0] == 1


def test_a_closure_int_of_a_property_rebound_between_calls():
    scale = 2

    class Scaled(torch.nn.Module):
        @property
        def factor(self):
            return scale * 3

        def forward(self, t):
            return t * self.factor

    mod, t = Scaled(), torch.ones(2)
    compiled = dynview.compile(mod, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(t), t * 6)
    scale = 5  # the getter's cell now holds 5: eager gives t * 15
    torch.testing.assert_close(compiled(t), t * 15)
