"""`x.data = y` inside the compiled code: the tensor keeps its identity and autograd flags and takes
y's storage, shape and strides, as eager's assignment does. TorchDynamo records it as x.set_(y)
under no_grad and gives back the version set_ counted (PyTorch's test_repros test_tensor_set_data,
issue 113030); dynview records the same, so the frame stays one graph where it broke before
(DV0008, the whole frame eager). Cases are written as the code that does it is: MoCo's momentum
update of a key encoder, weight clipping, swapping two buffers, PyTorch's own repro; each is checked
against eager (values, the arguments after the call, storage shared, versions) and torch.compile's
per-call compile counts."""
import copy

import pytest
import torch
import torch.nn as nn

import dynview
from test_lazy_attributes import run_both, same
from test_lazy_sequences import _reset  # noqa: F401  (the engines reset around each test, autouse)


def r(*shape, requires_grad=False):
    """A tensor of that shape with set values (each call of a case makes its arguments again)."""
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=torch.float32).reshape(shape) * 0.3 - 1).requires_grad_(requires_grad)


def counting_backend(backend):
    """torch.compile's backend of that name, counting the graphs it is given ([n])."""
    n = [0]
    inner = torch._dynamo.lookup_backend(backend)

    def count(gm, example_inputs):
        n[0] += 1
        return inner(gm, example_inputs)
    return count, n


def set_then_add(x, y):
    # PyTorch's repro (func1)
    x.data = y
    x.add_(1)
    return x


def test_set_data_then_an_in_place_op_is_one_graph():
    calls = [lambda: (torch.ones(6), torch.ones(6)), lambda: (torch.zeros(6), torch.full((6,), 2.0))]
    dv, td, _ = run_both(set_then_add, calls)
    assert dv == td == [1, 1]
    dynview.reset()
    same(dynview.compile(set_then_add, backend="eager", fullgraph=True)(*calls[0]()), set_then_add(*calls[0]()))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_the_tensor_keeps_its_identity_and_shares_the_new_storage(backend):
    def f(x, y):
        z = x
        x.data = y
        return torch.tensor(x is z), x * 2, x.shape[0]

    be, n = counting_backend(backend)
    cf = dynview.compile(f, backend=be, fullgraph=True)
    for size in (6, 6):
        want_x, want_y = torch.ones(6, requires_grad=True), torch.randn(size, requires_grad=True)
        got_x, got_y = torch.ones(6, requires_grad=True), want_y.detach().clone().requires_grad_()
        want = f(want_x, want_y)
        got = cf(got_x, got_y)
        same(got, want)
        assert got[0].item() is True and got[2] == size == got_x.shape[0]
        # x now reads y's storage (eager's .data = shares it), and stays the leaf that requires grad
        assert got_x.untyped_storage().data_ptr() == got_y.untyped_storage().data_ptr()
        assert got_x.requires_grad and got_x.is_leaf and got_x.grad_fn is None
        if backend == "eager":  # set_ counted a version, given back as eager's assignment leaves it
            assert got_x._version == want_x._version
    assert n[0] == 1


def test_later_reads_see_the_new_shape():
    def f(x, y):
        x.data = y
        return x.sum(0) + x.shape[0], x.reshape(-1, 2)

    # torch.compile gives x.sum(0) + 4 here (the shape x came in with); eager and dynview + 6
    calls = [lambda: (r(4, 3), r(6, 3)), lambda: (r(4, 3), r(6, 3))]
    dv, _, _ = run_both(f, calls, torch_compile=False)
    assert dv == [1, 1]
    dynview.reset()
    same(dynview.compile(f, backend="eager", fullgraph=True)(*calls[0]()), f(*calls[0]()))


class MoCoKeyEncoder(nn.Module):
    """MoCo's momentum update of the key encoder (facebookresearch/moco, builder.py), in forward."""

    def __init__(self, m=0.999):
        super().__init__()
        self.m = m
        self.encoder_q = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.encoder_k = copy.deepcopy(self.encoder_q)
        with torch.no_grad():
            for p in self.encoder_q.parameters():
                p.add_(0.5)

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    def forward(self, im_q, im_k):
        q = nn.functional.normalize(self.encoder_q(im_q), dim=1)
        self._momentum_update_key_encoder()
        k = nn.functional.normalize(self.encoder_k(im_k), dim=1)
        return (q * k).sum(1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_moco_momentum_update_of_parameters_is_one_graph(backend):
    torch.manual_seed(0)
    eager_m = MoCoKeyEncoder()
    dv_m, td_m = copy.deepcopy(eager_m), copy.deepcopy(eager_m)
    be, n = counting_backend(backend)
    td_be, td_n = counting_backend(backend)
    dv_f = dynview.compile(dv_m, backend=be)
    td_f = torch.compile(td_m, backend=td_be)
    for _ in range(3):
        a, b = torch.randn(5, 8), torch.randn(5, 8)
        want = eager_m(a, b)
        same(dv_f(a, b), want)
        same(td_f(a, b), want)
        for pe, pd in zip(eager_m.encoder_k.parameters(), dv_m.encoder_k.parameters()):
            same(pd, pe)  # the key encoder moved as eager's did
            assert isinstance(pd, nn.Parameter) and pd.requires_grad
    assert n[0] == td_n[0] == 1


def swap(x, y):
    # two buffers exchanged in place (double buffering)
    x.data, y.data = y.data, x.data
    return x + 1, y * 2


def test_swapping_two_tensors_data():
    calls = [lambda: (r(3), r(5)), lambda: (r(3), r(5))]
    dv, td, _ = run_both(swap, calls)
    assert dv == td == [1, 1]


def to_half(x):
    x.data = x.data.half()
    return x * 2


def made_in_the_graph(x):
    t = x * 2
    t.data = x
    return t + 1


@pytest.mark.parametrize("fn, why", [(to_half, "another dtype"), (made_in_the_graph, "made in the compiled code")])
def test_what_torch_compile_does_not_support_breaks_with_a_reason(fn, why):
    # a break, as under torch.compile; the frame's result eager's
    calls = [lambda: (r(4),), lambda: (r(4),)]
    dv, td, _ = run_both(fn, calls)
    assert dv == td and dv[0] == dv[1] > 0  # the second call runs what the first compiled
    dynview.reset()
    cf = dynview.compile(fn, backend="aot_eager")
    dynview._C.take_records()
    cf(r(4))
    reasons = [r["break_message"] for r in dynview._C.take_records() if r["break_message"]]
    assert any("'data'" in m and why in m for m in reasons), reasons


def chained(x, y):
    x.data = y  # y is the graph's first input (read first), x the second
    y.data = torch.zeros([0])
    return x


def chained_x_first(x, y):
    z = x + 0  # x read first
    x.data = y
    y.data = torch.zeros([0])
    return x, z


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_storage_given_away_and_then_replaced_stays_with_the_first_tensor(backend):
    # x.data = y; y.data = z: x keeps y's old storage. AOTAutograd sets the inputs' storages after
    # the graph in input order, reading x's from y: where y is the earlier input, x would get z's
    # (torch.compile's result when y comes first). That second assignment breaks (run by the eager
    # frame after the graph); with x first, no break.
    for fn, breaks in ((chained, True), (chained_x_first, False)):
        dynview.reset()
        be, n = counting_backend(backend)
        cf = dynview.compile(fn, backend=be)
        dynview._C.take_records()
        for _ in range(2):
            want_args, got_args = (r(6), r(6) + 1), (r(6), r(6) + 1)
            want, got = fn(*want_args), cf(*got_args)
            same(got, want)
            assert [a.shape for a in got_args] == [a.shape for a in want_args] == [torch.Size([6]), torch.Size([0])]
        assert n[0] == 1, fn.__name__
        reasons = [r["break_message"] for r in dynview._C.take_records() if r["break_message"]]
        assert bool(reasons) == breaks and all("earlier `.data =`" in m for m in reasons), reasons
