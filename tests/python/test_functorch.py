"""torch.func inside compiled code, beyond the case corpus (python_cases_functorch.py): state put back
after captures that break inside a transform, functional_call leaving its module untouched and
reading new tensors on a cache hit, second-order gradients through a compiled MAML step, and the
graph holding functorch's steps (the transform runs in the graph, not at trace time)."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def functorch_state():
    level = torch._C._enter_dual_level()
    torch._C._exit_dual_level(level=level)
    return (level, torch._C._functorch.maybe_current_level(), torch.is_grad_enabled(), torch._C._is_fwd_grad_enabled(),
            torch._C._autograd._saved_tensors_hooks_get_disabled_error_message())


def _printing(y):
    z = y.sin()
    print("", end="")  # a graph break inside the transformed function
    return z.sum()


@pytest.mark.parametrize("transform", [grad, jacrev, jacfwd, hessian])
@pytest.mark.parametrize("grad_mode", [True, False])
def test_state_is_put_back_after_a_break_inside_a_transform(transform, grad_mode):
    def f(x):
        return transform(_printing)(x) * 2

    before = functorch_state()
    x = torch.randn(4)
    with torch.set_grad_enabled(grad_mode):
        want = f(x)
        got = dynview.compile(f, backend="eager")(x)
        assert functorch_state() == before[:2] + (grad_mode,) + before[3:]
    torch.testing.assert_close(got, want)
    assert functorch_state() == before


def test_functional_call_leaves_the_module_alone_and_reads_new_tensors_on_a_hit():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    own = {k: v.clone() for k, v in model.state_dict().items()}
    ids = {k: id(v) for k, v in model.named_parameters()}

    def f(params, x):
        return functional_call(model, params, (x,))

    cf = dynview.compile(f, backend="eager")
    x = torch.randn(3, 4)
    for scale in (0.0, 1.0, -2.0):  # one compile, then hits with other tensors
        params = {k: v.detach() * scale for k, v in model.named_parameters()}
        torch.testing.assert_close(cf(params, x), f(params, x))
    entries = dynview._C.cache_entries(f.__code__)
    assert len(entries) == 1 and entries[0]["hits"] >= 2
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, own[k])
    assert {k: id(v) for k, v in model.named_parameters()} == ids
    torch.testing.assert_close(cf({}, x), model(x))  # nothing replaced: the module's own


def test_maml_second_order_gradients_equal_eager():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))

    def adapted_loss(params, xs, ys, xq, yq):
        def loss(p, x, y):
            return F.mse_loss(functional_call(net, p, (x,)), y)
        g = grad(loss)(params, xs, ys)
        fast = {k: v - 0.05 * g[k] for k, v in params.items()}
        return loss(fast, xq, yq)

    data = [torch.randn(8, 5), torch.randn(8, 1), torch.randn(8, 5), torch.randn(8, 1)]
    results = []
    for fn in (adapted_loss, dynview.compile(adapted_loss, backend="eager")):
        params = {k: v.detach().clone().requires_grad_() for k, v in net.named_parameters()}
        out = fn(params, *data)
        out.backward()  # through the inner gradient: second order
        results.append((out.detach(), {k: v.grad for k, v in params.items()}))
    torch.testing.assert_close(results[1][0], results[0][0])
    for k in results[0][1]:
        torch.testing.assert_close(results[1][1][k], results[0][1][k])


def test_graph_holds_functorch_steps():
    def f(x):
        return hessian(lambda y: (y.sin() * y).sum())(x), jacrev(torch.tanh)(x)

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    x = torch.randn(3)
    got = dynview.compile(f, backend=backend)(x)
    torch.testing.assert_close(got, f(x))
    assert len(graphs) == 1
    targets = [getattr(n.target, "__name__", str(n.target)) for n in graphs[0].graph.nodes if n.op == "call_function"]
    for step in ("_grad_increment_nesting", "_wrap_for_grad", "_autograd_grad", "_unwrap_for_grad", "_jvp_increment_nesting",
                 "_make_dual", "_unpack_dual", "_vmap_increment_nesting", "_add_batch_dim", "_remove_batch_dim"):
        assert step in targets, step


def test_ensemble_of_models_on_the_meta_device():
    torch.manual_seed(0)
    models = [nn.Linear(6, 3) for _ in range(5)]
    params, buffers = torch.func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def ensemble(p, b, x):
        return vmap(lambda pp, bb, xx: functional_call(base, (pp, bb), (xx,)), in_dims=(0, 0, None))(p, b, x)

    x = torch.randn(4, 6)
    got = dynview.compile(ensemble, backend="eager")(params, buffers, x)
    torch.testing.assert_close(got, torch.stack([m(x) for m in models]))


def _calls(gm):  # (Tensor.split recorded as a method here, as torch.functional.split there: the same call)
    return [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def _same_calls_as_torch_dynamo(f, *args):
    theirs = torch._dynamo.explain(f)(*args)
    ours = dynview.explain(f)(*args)
    assert ours.graph_count == theirs.graph_count == 1
    assert _calls(ours.graphs[0]) == _calls(theirs.graphs[0])
    torch.testing.assert_close(dynview.compile(f, backend="eager")(*args), f(*args))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, None])
def test_jacrev_chunks_are_torch_dynamos_calls(chunk_size):
    # the basis in chunks (new_zeros, diagonal at the chunk's offset, fill_, view), each vmapped
    # through the vjp or, one row at a time, squeezed and unsqueezed; concatenated: the same calls
    # as TorchDynamo's graph, in its order
    def f(x, w):
        return jacrev(lambda a, b: (a * b).sin().sum(0), argnums=(0, 1), chunk_size=chunk_size)(x, w)

    x, w = torch.randn(2, 4), torch.randn(4)
    _same_calls_as_torch_dynamo(f, x, w)


@pytest.mark.parametrize("name", ["two_primals", "aux_and_constant", "jacfwd_two_inputs", "jacfwd_two_outputs"])
def test_jvp_calls_are_torch_dynamos(name):
    def two_primals(x, w):
        return jvp(lambda a, b: (a @ b).sin(), (x, w), (torch.ones_like(x), w.cos()))

    def aux_and_constant(x, w):
        return jvp(lambda a: ((a.exp(), torch.zeros(2)), a.sum()), (x,), (x,), has_aux=True)

    def jacfwd_two_inputs(x, w):
        return jacfwd(lambda a, b: (a @ b).tanh(), argnums=(0, 1))(x, w)

    def jacfwd_two_outputs(x, w):  # all primals unwrapped, then all tangents
        return jacfwd(lambda a: (a.sin(), a.sum(0)))(x)

    f = {"two_primals": two_primals, "aux_and_constant": aux_and_constant, "jacfwd_two_inputs": jacfwd_two_inputs,
         "jacfwd_two_outputs": jacfwd_two_outputs}[name]
    x, w = torch.randn(2, 3), torch.randn(3)
    _same_calls_as_torch_dynamo(f, x, w)


def test_jvp_composes_with_autograd_and_puts_the_state_back():
    # primals that require grad: the outputs do, and gradients flow back through the jvp as in eager
    def f(x, v):
        out, t = jvp(lambda a: (a.sin() * a).sum(0), (x,), (v,))
        return out, t

    x, v = torch.randn(3, 2), torch.randn(3, 2)
    before = functorch_state()
    results = []
    for fn in (f, dynview.compile(f, backend="eager")):
        xx = x.clone().requires_grad_()
        out, t = fn(xx, v)
        assert out.requires_grad and t.requires_grad
        (out.sum() + t.pow(2).sum()).backward()
        results.append((out.detach(), t.detach(), xx.grad))
    torch.testing.assert_close(results[1], results[0])
    assert functorch_state() == before

    def breaking(x):
        return jvp(_printing, (x,), (torch.ones_like(x),))

    want = breaking(x)
    got = dynview.compile(breaking, backend="eager")(x)
    torch.testing.assert_close(got, want)
    assert functorch_state() == before


def test_vjp_calls_are_torch_dynamos_and_compose_with_autograd():
    def f(x, w):
        out, vjp_fn = vjp(lambda a, b: ((a @ b).sin(), a.sum()), x, w)
        ga, gb = vjp_fn((torch.ones(2), torch.tensor(2.0)))
        (jac,) = vmap(vjp_fn)((torch.eye(2), torch.zeros(2)))[:1]
        return out, ga, gb, jac

    x, w = torch.randn(2, 3), torch.randn(3)
    _same_calls_as_torch_dynamo(f, x, w)
    before = functorch_state()
    results = []
    for fn in (f, dynview.compile(f, backend="eager")):  # second order: through the vjp's gradients
        xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
        out, ga, gb, jac = fn(xx, ww)
        assert ga.requires_grad and jac.requires_grad
        (ga.pow(2).sum() + gb.sum() + jac.sum()).backward()
        results.append((out, ga.detach(), gb.detach(), jac.detach(), xx.grad, ww.grad))
    torch.testing.assert_close(results[1], results[0])
    assert functorch_state() == before

    def breaking(x):
        out, vjp_fn = vjp(_printing, x)
        return vjp_fn(torch.ones_like(out))

    torch.testing.assert_close(dynview.compile(breaking, backend="eager")(x), breaking(x))
    assert functorch_state() == before
