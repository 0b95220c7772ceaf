"""nn.Modules built inside the compiled code that leave it: returned, or kept by the caller. Eager
gives each call a module of its own, with what its __init__ (and the rest of the frame) set on it;
so does the transformed code, which makes the module again after the graph: by calling its class
with the same constant arguments where its __init__ only sets attributes, else by nn.Module's own
__init__ and the attributes, buffers and submodules the trace set on it, in order. Before, such a
frame failed to generate its code (DV0020) -- under fullgraph an error, else the frame ran eagerly.
Against eager and torch.compile (PyTorch's own test_repros.py: test_hf_gelu_inline,
test_partially_initialized_module_property)."""
import pytest
import torch
from torch import nn

import dynview
from counting import counting_backend
from python_cases_values import CallCounter  # a module whose forward counts its calls

pytestmark = pytest.mark.usefixtures("fresh_engine")


class GELUActivation(nn.Module):  # transformers' activation style: __init__ only sets attributes
    def __init__(self, use_gelu_python=False):
        super().__init__()
        self.act = self._gelu_python if use_gelu_python else nn.functional.gelu

    def _gelu_python(self, x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.4142135623730951))

    def forward(self, x):
        return self.act(x)


def returns_activation(x):
    return GELUActivation(), x + 1


def _run(fn, calls, fullgraph=True):
    backend, n = counting_backend()
    compiled = dynview.compile(fn, backend=backend, fullgraph=fullgraph)
    return [compiled(*a) for a in calls], n[0]


def _once(fn, *args):
    """fn(*args) compiled in one graph (fullgraph: no break, no eager fallback)."""
    outs, graphs = _run(fn, [args])
    assert graphs == 1
    return outs[0]


def test_an_activation_module_built_and_returned():
    x = torch.randn(4)
    outs, graphs = _run(returns_activation, [(x,), (x,)])
    assert graphs == 1  # the second call hits the cache
    (m1, y1), (m2, y2) = outs
    for m, y in outs:
        assert type(m) is GELUActivation and m.act is nn.functional.gelu and m.training
        assert list(m.children()) == [] and list(m.parameters()) == []
        torch.testing.assert_close(y, x + 1)
        torch.testing.assert_close(m(x), nn.functional.gelu(x))
    assert m1 is not m2  # one per call, as eager's


def returns_python_gelu(x):
    act = GELUActivation(use_gelu_python=True)
    return act(x), act


def test_a_module_built_with_a_bound_method_attribute_is_made_again_with_its_own():
    x = torch.randn(4)
    y, m = _once(returns_python_gelu, x)
    want, _ = returns_python_gelu(x)
    torch.testing.assert_close(y, want)
    assert m.act.__self__ is m  # its own bound method, not the trace's object's
    torch.testing.assert_close(m(x), want)


class Matrix(nn.Module):  # test_partially_initialized_module_property
    def __init__(self, data):
        super().__init__()
        self._data = data
        self.foo = 10 * self.blocking

    @property
    def data(self):
        return self._data

    @property
    def blocking(self):
        return self.data.shape[1]


def builds_matrix(x):
    return Matrix(x * 2)


def test_a_module_whose_init_reads_its_own_property_is_returned():
    x = torch.randn(10, 20)
    torch._dynamo.reset()
    td = torch.compile(builds_matrix, backend="eager", fullgraph=True)(x)
    (m,), graphs = _run(builds_matrix, [(x,)])
    assert graphs == 1
    assert type(m) is Matrix and m.foo == td.foo == 200
    torch.testing.assert_close(m.data, x * 2)
    assert list(vars(m)) == list(vars(Matrix(x * 2)))  # the same attributes, in eager's order


class RotaryTable(nn.Module):
    """Rotary position tables computed in __init__, kept as a non-persistent buffer (Llama style)."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("scale", torch.ones(()))
        self.dim = dim

    def forward(self, positions):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        return torch.cat([freqs.cos(), freqs.sin()], dim=-1) * self.scale


def builds_rotary(x):
    table = RotaryTable(x.shape[-1])
    return x * table(torch.arange(x.shape[0])), table


def test_a_module_with_buffers_built_in_the_trace_keeps_them_as_buffers():
    x = torch.randn(5, 8)
    want, want_table = builds_rotary(x)
    got, table = _once(builds_rotary, x)
    torch.testing.assert_close(got, want)
    assert type(table) is RotaryTable and table.dim == 8
    assert [k for k, _ in table.named_buffers()] == [k for k, _ in want_table.named_buffers()] == ["inv_freq", "scale"]
    assert list(table.state_dict()) == list(want_table.state_dict()) == ["scale"]  # inv_freq not persistent
    torch.testing.assert_close(table.inv_freq, want_table.inv_freq)
    torch.testing.assert_close(table(torch.arange(3)), want_table(torch.arange(3)))


def counts_twice(x):
    m = CallCounter()
    y = m(x) + m(x)
    return y, m


def test_attributes_its_forward_set_are_on_the_returned_module():
    x = torch.randn(3)
    y, m = _once(counts_twice, x)
    torch.testing.assert_close(y, x * 3)
    assert type(m) is CallCounter and m.calls == 2


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.full((2,), 3.0)
        self.act = GELUActivation()


def builds_nested(x):
    h = Holder()
    return h.act(x) * h.scale, h


def test_a_module_built_in_the_trace_holding_another_built_there():
    x = torch.randn(2)
    want, want_h = builds_nested(x)
    got, h = _once(builds_nested, x)
    torch.testing.assert_close(got, want)
    assert type(h) is Holder and type(h.act) is GELUActivation
    assert dict(h.named_children()).keys() == dict(want_h.named_children()).keys() == {"act"}
    torch.testing.assert_close(h.scale, want_h.scale)


class Lazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = None

    def forward(self, x):
        if self.head is None:
            self.head = GELUActivation()
        return self.head(x)


def test_a_module_built_in_forward_and_set_on_a_module_from_outside():
    x = torch.randn(3)
    m, want = Lazy(), Lazy()
    backend, n = counting_backend()
    compiled = dynview.compile(m, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x), want(x))
    assert type(m.head) is GELUActivation and "head" in dict(m.named_children())
    torch.testing.assert_close(compiled(x), want(x))  # the head now set: another path, compiled again
    assert n[0] == 2
