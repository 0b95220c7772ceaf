"""torch.func's grad, grad_and_value and functional_call inside compiled code, written the way
torch.func's tutorials (per-sample gradients, model ensembling), meta-learning code (MAML's inner
step) and physics-informed models write them. Appended to python_cases.CASES; each is checked
against eager and torch._dynamo.explain by test_python_cases.py."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, stack_module_state, vjp, vmap

from python_cases import NOT_YET, case  # noqa: F401


class _MLP(nn.Module):
    def __init__(self, d_in=6, d_hidden=10, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class _BNNet(nn.Module):  # a buffer-carrying model (running statistics)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, scale=1.0):
        h = F.relu(self.bn(self.conv(x)))
        return self.head(h.mean((2, 3))) * scale


class _TiedLM(nn.Module):  # an embedding tied to the output projection, as language models tie them
    def __init__(self, vocab=11, d=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.proj = nn.Linear(d, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, ids):
        return self.lm_head(torch.tanh(self.proj(self.embed(ids))))


torch.manual_seed(0)
_MODEL = _MLP()
_BN = _BNNet().eval()
_BN_TRAIN = _BNNet()
_TIED = _TiedLM()
_ENSEMBLE = [_MLP() for _ in range(4)]
_BASE = copy.deepcopy(_ENSEMBLE[0]).to("meta")


def _detached(m):
    return {k: v.detach() for k, v in m.named_parameters()}


def _params_and_data(seed):
    g = torch.Generator().manual_seed(seed + 100)
    return [_detached(_MODEL), torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)]


# ---- functional_call ----
@case((4, 6))
def functional_call_with_scaled_parameters(x):
    params = {name: p * 0.5 for name, p in _MODEL.named_parameters()}
    return functional_call(_MODEL, params, (x,))


@case((4, 6))
def functional_call_with_one_parameter_replaced(x):
    # the other parameters stay the module's own (strict=False)
    return functional_call(_MODEL, {"fc2.bias": torch.zeros(3)}, x)


@case((4, 6), extra=lambda seed: [_detached(_MODEL)])
def functional_call_of_a_parameter_dict_argument(x, params):
    out = functional_call(_MODEL, params, args=(x,))
    return out.softmax(-1)


@case((3, 2, 5, 5))
def functional_call_with_buffers_and_kwargs(x):
    params = {k: v.detach() for k, v in _BN.named_parameters()}
    buffers = {k: v.clone() for k, v in _BN.named_buffers()}
    return functional_call(_BN, (params, buffers), (x,), {"scale": 2.0})


@case((3, 2, 5, 5))
def functional_call_in_training_updates_the_given_buffers(x):
    # BatchNorm in training mode updates running stats in place: the tensors passed in, not the module's
    buffers = {k: v.clone() for k, v in _BN_TRAIN.named_buffers()}
    out = functional_call(_BN_TRAIN, buffers, (x,))
    return out, buffers["bn.running_mean"], buffers["bn.num_batches_tracked"]


@case((2, 5))
def functional_call_tied_weights_follow_the_embedding(x):
    ids = (x.abs() * 10).long() % 11
    new_embed = torch.ones(11, 6) * 0.1
    return functional_call(_TIED, {"embed.weight": new_embed}, (ids,))


@case((2, 5))
def functional_call_untied_weights(x):
    ids = (x.abs() * 10).long() % 11
    return functional_call(_TIED, {"embed.weight": torch.ones(11, 6)}, (ids,), tie_weights=False)


@case((4, 6))
def functional_call_strict_with_every_key(x):
    params = {k: v + 1 for k, v in _MODEL.state_dict().items()}
    return functional_call(_MODEL, params, (x,), strict=True)


@case((4, 6))
def functional_call_strict_with_a_missing_key_raises(x):
    try:
        return functional_call(_MODEL, {"fc1.weight": torch.zeros(10, 6)}, (x,), strict=True)
    except RuntimeError:
        return x - 1


@case((4, 6))
def functional_call_through_the_deprecated_stateless_module(x):
    from torch.nn.utils import stateless
    params = {k: v * 2 for k, v in _MODEL.named_parameters()}
    return stateless.functional_call(_MODEL, params, (x,))


@case((4, 6))
def functional_call_then_module_itself(x):
    # the module's own parameters are read again after the call
    zeros = {k: torch.zeros_like(v) for k, v in _MODEL.named_parameters()}
    return functional_call(_MODEL, zeros, (x,)), _MODEL(x)


@case((4, 6))
def functional_call_nested_in_a_helper_module_call(x):
    def head(h):
        return functional_call(_MODEL.fc2, {"weight": _MODEL.fc2.weight * 0, "bias": _MODEL.fc2.bias}, (h,))
    return head(F.relu(_MODEL.fc1(x)))


# ---- torch.func.grad / grad_and_value ----
@case((5,))
def grad_of_a_scalar_function(x):
    return grad(lambda y: (y.sin() ** 2).sum())(x)


@case((5,), (5,))
def grad_with_two_argnums(x, y):
    dx, dy = grad(lambda a, b: (a * b.exp()).sum(), argnums=(0, 1))(x, y)
    return dx + 1, dy


@case((5,), (5,))
def grad_with_respect_to_the_second_argument(x, y):
    return grad(lambda a, b: (a * b).pow(2).mean(), argnums=1)(x, y)


@case((5,))
def grad_with_aux(x):
    def f(y):
        s = y.tanh()
        return s.sum(), {"act": s, "scale": s.abs().max()}
    g, aux = grad(f, has_aux=True)(x)
    return g, aux["act"] * aux["scale"]


@case((5,))
def grad_with_a_number_in_aux_raises(x):
    try:
        return grad(lambda y: (y.sum(), {"n": 3, "none": None}), has_aux=True)(x)
    except RuntimeError as e:
        return x + len(str(e))


@case((5,))
def grad_and_value_of_a_loss(x):
    g, value = grad_and_value(lambda y: (y.cos() * y).sum())(x)
    return g, value


@case((5,))
def grad_and_value_with_aux(x):
    (g, (loss, aux)) = grad_and_value(lambda y: ((y ** 2).sum(), y.mean()), has_aux=True)(x)
    return g, loss, aux


@case((5,))
def second_derivative_by_nested_grad(x):
    d2 = vmap(grad(grad(torch.sin)))(x)
    return d2, -x.sin()


@case((5,))
def grad_under_no_grad(x):
    with torch.no_grad():
        g = grad(lambda y: (y ** 3).sum())(x)
    return g, torch.is_grad_enabled()


@case((5,))
def grad_of_a_closure_over_a_tensor(x):
    w = x.flip(0) + 1
    return grad(lambda y: (y * w).sum())(x)


@case((5,))
def grad_raising_inside_is_caught_outside(x):
    def f(y):
        if y.shape[0] == 5:
            raise ValueError("five")
        return y.sum()
    try:
        return grad(f)(x)
    except ValueError:
        return x * 0


@case((5, 3))
def grad_of_a_non_scalar_output_raises(x):
    try:
        return grad(lambda y: y * 2)(x)
    except RuntimeError as e:
        return x + len(str(e))


@case((5,))
def grad_then_more_ops(x):
    g = grad(lambda y: torch.logsumexp(y, 0))(x)  # the softmax
    return (g - x.softmax(0)).abs().max(), g.sum()


@case(extra=_params_and_data)
def grad_of_a_loss_with_respect_to_a_parameter_dict(params, x, y):
    def loss(p):
        return F.cross_entropy(functional_call(_MODEL, p, (x,)), y)
    g = grad(loss)(params)
    return {k: v.norm() for k, v in g.items()}


@case(extra=_params_and_data)
def maml_inner_step(params, x, y):
    # one inner-loop SGD step on the functional parameters, then the loss at the adapted ones
    def loss(p, xs, ys):
        return F.cross_entropy(functional_call(_MODEL, p, (xs,)), ys)
    g = grad(loss)(params, x, y)
    adapted = {k: v - 0.1 * g[k] for k, v in params.items()}
    return loss(adapted, x, y)


@case(extra=_params_and_data)
def per_sample_gradients(params, x, y):
    # the torch.func tutorial's per-sample gradients
    def compute_loss(p, sample, target):
        predictions = functional_call(_MODEL, p, (sample.unsqueeze(0),))
        return F.cross_entropy(predictions, target.unsqueeze(0))
    per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))(params, x, y)
    return per_sample["fc1.weight"].shape, per_sample


@case((8, 6))
def model_ensembling_over_stacked_parameters(x):
    # the torch.func tutorial's ensembling: one base module on the meta device, stacked parameters
    params, buffers = stack_module_state(_ENSEMBLE)

    def fmodel(p, b, inp):
        return functional_call(_BASE, (p, b), (inp,))
    return vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)


@case((6, 2))
def physics_informed_derivative_of_a_network(xt):
    # du/dx of a small network at each point (a PINN residual): vmap over points of the grad of u
    net = _PINN

    def u(point):
        return net(point.unsqueeze(0)).squeeze()
    du = vmap(grad(u))(xt)
    return du[:, 0] - 0.1 * du[:, 1]


_PINN = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))


# ---- transforms made outside the compiled function (a module-level grad(f), vmap(f)) ----
_GRAD_OF_ENERGY = grad(lambda pos: (pos.pow(2).sum(-1) + 1).log().sum())
_GRAD_AND_LOSS = grad_and_value(lambda w, x: (x @ w).pow(2).mean(), argnums=0)
_ROW_NORMS = vmap(lambda r: r.norm())


@case((4, 3))
def grad_made_outside_the_compiled_function(pos):
    force = -_GRAD_OF_ENERGY(pos)
    return force, force.norm()


@case((3, 2), (5, 3))
def grad_and_value_made_outside(w, x):
    g, loss = _GRAD_AND_LOSS(w, x)
    return w - 0.1 * g, loss


@case((4, 3))
def vmap_made_outside_the_compiled_function(x):
    return _ROW_NORMS(x) + 1


@case((6, 4))
def vmap_in_chunks_of_a_function_returning_a_dict(x):
    out = vmap(lambda r: {"act": r.sin(), "total": r.sum()}, chunk_size=4)(x)
    return out["act"], out["total"]


# ---- a module that reads its tensors another way inside functional_call (eager swaps them into its
# _parameters and _buffers, so parameters(), named_buffers() and _parameters see the tensors given) ----
class _SelfRegularized(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x):
        penalty = sum(p.pow(2).sum() for p in self.parameters())
        buffers = dict(self.named_buffers())
        return self.lin(x) + buffers["shift"], penalty, self.lin._parameters["weight"].sum()


_SELF_REG = _SelfRegularized()


@case((3, 4))
def functional_call_of_a_module_iterating_its_parameters(x):
    return functional_call(_SELF_REG, {"lin.weight": torch.eye(4), "shift": torch.zeros(4)}, (x,))


class _PrintsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        print("", end="")  # a graph break inside the module called functionally
        return h * 2


_PRINTS = _PrintsInForward()


@case((3, 4))
def functional_call_with_a_break_inside_the_module(x):
    return functional_call(_PRINTS, {"lin.weight": torch.eye(4)}, (x,)) + 1


@case((4,))
def grad_of_a_function_with_a_break_inside(x):
    def f(y):
        z = y.sin()
        print("", end="")
        return z.sum()
    return grad(f)(x) + 1


@case((4,))
def grad_with_keyword_arguments(x):
    return grad(lambda y, scale=1.0: (y * scale).sum())(x, scale=3.0)


@case((4,))
def grad_with_respect_to_a_list_of_tensors(x):
    gs = grad(lambda ps: (ps[0] * ps[1]).sum())([x, x * 2])
    return gs[0], gs[1]


# ---- torch.func.jacrev: the vjp, a standard basis of the outputs, the vjp vmapped over it ----
@case((3,))
def jacrev_of_an_elementwise_function(x):
    return jacrev(lambda y: y.sin() * 2)(x)


@case((3,))
def jacrev_of_a_torch_function_itself(x):
    return jacrev(torch.tanh)(x) + 1


@case((3,), (4, 3))
def jacrev_with_respect_to_two_arguments(x, w):
    jx, jw = jacrev(lambda a, b: b @ a.tanh(), argnums=(0, 1))(x, w)
    return jx, jw.shape, jw


@case((2, 3))
def jacrev_of_a_matrix_input(x):
    return jacrev(lambda y: (y ** 2).sum(0))(x)


@case((3,))
def jacrev_of_a_function_with_two_outputs(x):
    j_vec, j_scalar = jacrev(lambda y: (y.sin(), y.cos().sum()))(x)
    return j_vec, j_scalar


@case((3,))
def jacrev_with_aux(x):
    j, aux = jacrev(lambda y: (y.exp(), y.mean()), has_aux=True)(x)
    return j, aux


@case((5, 3))
def jacrev_per_example_by_vmap(x):
    # the jacobian of a softmax at each row of a batch
    return vmap(jacrev(lambda y: y.softmax(-1)))(x)


@case((3,))
def jacrev_of_a_network(x):
    return jacrev(_PINN_3)(x)


@case((3,))
def jacrev_under_no_grad(x):
    with torch.no_grad():
        return jacrev(lambda y: y * y)(x)


@case((3,))
def hessian_by_jacrev_of_jacrev(x):
    return jacrev(jacrev(lambda y: (y ** 3).sum()))(x)


@case((3,))
def jacrev_of_an_integer_output_raises(x):
    try:
        return jacrev(lambda y: (y > 0).long())(x)
    except RuntimeError as e:
        return x + len(str(e))


@case((3,))
def jacrev_with_respect_to_a_parameter_dict(x):
    params = dict(_PINN_3.named_parameters())
    j = jacrev(lambda p: functional_call(_PINN_3, p, (x,)))(params)
    return j["0.weight"].shape, j["2.bias"]


@case((3,))
def jacrev_in_chunks(x):
    return jacrev(lambda y: y.sin(), chunk_size=1)(x)


@case((5,))
def jacrev_in_chunks_of_two(x):  # 5 rows: chunks of 2, 2 and 1, concatenated
    return jacrev(lambda y: y.sin() * y.sum(), chunk_size=2)(x)


@case((2, 3), (4,))
def jacrev_in_chunks_over_two_inputs_and_outputs(x, b):
    def f(w, v):
        return (w @ v[:3]).tanh(), (w.sum() * v).exp()
    return jacrev(f, argnums=(0, 1), chunk_size=3)(x, b)


@case((4,))
def jacrev_with_a_chunk_as_large_as_the_output(x):
    return jacrev(lambda y: y.cumsum(0), chunk_size=4)(x), jacrev(lambda y: y.cumsum(0), chunk_size=100)(x)


@case((3, 2))
def per_sample_jacobians_in_chunks_under_vmap(x):
    return vmap(jacrev(lambda r: r.sin().outer(r), chunk_size=2))(x)


@case((3,))
def hessian_of_a_cubic(x):
    return torch.func.hessian(lambda y: (y ** 3).sum())(x)


_PINN_3 = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


# ---- torch.func.jacfwd and hessian: a basis of the inputs vmapped through one jvp (dual tensors) ----
@case((3,))
def jacfwd_of_an_elementwise_function(x):
    return jacfwd(lambda y: y.sin() * 2)(x)


@case((3,))
def jacfwd_of_a_torch_function_itself(x):
    return jacfwd(torch.tanh)(x)


@case((3,), (4, 3))
def jacfwd_with_respect_to_two_arguments(x, w):
    return jacfwd(lambda a, b: b @ a.tanh(), argnums=(0, 1))(x, w)


@case((2, 3))
def jacfwd_of_a_matrix_input(x):
    return jacfwd(lambda y: (y ** 2).sum(0))(x)


@case((3,))
def jacfwd_of_a_function_with_two_outputs(x):
    return jacfwd(lambda y: (y.sin(), y.cos().sum()))(x)


@case((3,))
def jacfwd_with_aux(x):
    j, aux = jacfwd(lambda y: (y.exp(), y.mean()), has_aux=True)(x)
    return j, aux


@case((5, 3))
def jacfwd_per_example_by_vmap(x):
    return vmap(jacfwd(lambda y: y.softmax(-1)))(x)


@case((3,))
def jacfwd_of_a_network(x):
    return jacfwd(_PINN_3)(x)


@case((3,))
def jacfwd_under_no_grad(x):
    with torch.no_grad():
        return jacfwd(lambda y: y * y)(x)


@case((3,))
def jacfwd_of_a_scalar_input(x):
    s = x.sum()
    return jacfwd(lambda t: t * x)(s)


@case((3,))
def jacfwd_of_a_constant_output(x):
    return jacfwd(lambda y: torch.ones(2))(x)


@case((3,))
def hessian_of_a_network_output(x):
    return hessian(lambda y: _PINN_3(y).sum())(x)


@case((3,), (3,))
def hessian_with_respect_to_the_second_argument(x, y):
    return hessian(lambda a, b: (a * b).sum() ** 2, argnums=1)(x, y)


@case((4, 2))
def laplacian_of_a_network_by_hessian(xy):
    # a PINN's Laplace residual: the trace of the hessian of u at each point
    u = lambda p: _PINN(p.unsqueeze(0)).squeeze()  # noqa: E731
    h = vmap(hessian(u))(xy)
    return h.diagonal(dim1=-2, dim2=-1).sum(-1)


@case((3,), (2,))
def jacfwd_of_an_output_of_the_other_argument(x, y):
    return jacfwd(lambda a, b: b.exp() * 2, argnums=0)(x, y)


@case((3,))
def jacfwd_of_a_tuple_with_a_constant_part(x):
    return jacfwd(lambda y: (y.sin(), torch.zeros(2), y.sum()))(x)


@case((3,))
def jacfwd_of_a_detached_output(x):
    return jacfwd(lambda y: y.detach() * 2 + 1)(x)


@case((3,))
def jacfwd_of_an_output_made_from_a_size(x):
    return jacfwd(lambda y: torch.full((2,), float(y.shape[0])))(x)


@case((3,))
def jacfwd_of_a_constant_written_in_place_from_the_input(x):
    def f(y):
        out = torch.zeros(3)
        out[:2] = y[:2] * 3  # computed from y after all: its tangent is no zero
        return out
    return jacfwd(f)(x)


@case((4,))
def grad_of_a_function_with_in_place_ops(x):
    def f(y):
        z = y * 2
        z.add_(1)
        return z.pow(2).sum()
    return grad(f)(x)


# ---- jacrev over pytrees of inputs (functorch flattens the primals, and gives the jacobians back in
# their structure) ----
@case((5, 3), (4, 3))
def empirical_ntk_of_a_network(x1, x2):
    # the torch.func tutorial's neural tangent kernel: per-example jacobians over a parameter dict
    params = {k: v.detach() for k, v in _PINN_3.named_parameters()}

    def fnet_single(p, x):
        return functional_call(_PINN_3, p, (x.unsqueeze(0),)).squeeze(0)
    jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
    jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
    jac1 = [j.flatten(2) for j in jac1.values()]
    jac2 = [j.flatten(2) for j in jac2.values()]
    return torch.stack([torch.einsum("Naf,Mbf->NMab", j1, j2) for j1, j2 in zip(jac1, jac2)]).sum(0)


@case((3,), (3,))
def jacrev_with_respect_to_a_list_argument(x, y):
    return jacrev(lambda ps: ps[0] * ps[1].sin())([x, y])


@case((3,), (3,))
def jacrev_with_respect_to_a_tuple_argument(x, y):
    jx, jy = jacrev(lambda ps: ps[0] * ps[1])((x, y))
    return jx, jy


@case((3, 4))
def vmap_of_an_in_place_method_gives_back_its_input(x):
    # functorch's _remove_batch_dim returns the tensor _add_batch_dim wrapped when the function
    # returned its input and out_dims is in_dims: `is` holds in eager, not for out_dims=0 of in_dims=1
    y = torch.vmap(torch.Tensor.acos_)(x)
    z = torch.vmap(lambda r: r.mul_(2), in_dims=1, out_dims=1)(x)
    w = torch.vmap(lambda r: r, in_dims=1, out_dims=0)(x)
    return y is x, z is x, w is x, torch.vmap(torch.vmap(lambda r: r))(x) is x, y + w.T


@case((3,), (3,))
def jacrev_of_a_tensor_and_a_dict_by_argnums(x, y):
    jx, jd = jacrev(lambda a, d: a * d["w"], argnums=(0, 1))(x, {"w": y})
    return jx, jd["w"]


@case((3, 4))
def vmap_with_in_place_ops_on_an_input_that_requires_grad(x):
    h = _MODEL.fc1.weight[:3, :4] * 2 + x  # requires grad (a parameter's), no leaf
    return torch.vmap(lambda r: r.mul_(2).sum())(h)


@case((3,))
def jacfwd_with_respect_to_a_parameter_dict(x):
    params = {"w": x, "b": x[0] * 2}
    return jacfwd(lambda p: (p["w"] * p["b"]).sin())(params)


@case((2, 3))
def jacfwd_with_respect_to_a_tuple_argument(x):
    return jacfwd(lambda a: (a[0] * a[1]).sum(0), argnums=0)((x, x.cos()))


@case((3,), (2,))
def jacfwd_over_a_list_and_a_tensor(x, y):
    return jacfwd(lambda ws, b: (ws[0] * ws[1].sum() + b.sum()).exp(), argnums=(0, 1))([x, x * 2], y)


@case((4,))
def jacfwd_of_a_pinn_network_wrt_its_parameters(x):  # forward-mode NTK-style jacobian of a tiny net
    params = {k: v.detach() for k, v in _PINN_3.named_parameters()}
    return jacfwd(lambda p, inp: functional_call(_PINN_3, p, (inp,)))(params, x[:3])


@case((3,))
def hessian_with_respect_to_a_parameter_dict(x):
    params = {"a": x, "b": x[:2] + 1}
    return hessian(lambda p: (p["a"].sin().sum() * p["b"].prod()))(params)


# ---- torch.func.jvp: forward-mode products (one jvp level, duals of the tangents given) ----
@case((3,))
def jvp_of_an_elementwise_function(x):
    return jvp(torch.sin, (x,), (torch.ones_like(x),))


@case((4, 3), (3,))
def jvp_of_a_network_along_a_direction(x, v):
    def f(inp):
        return _MODEL.fc2(torch.tanh(_MODEL.fc1(inp)))
    out, tangent = jvp(f, (x[:, :3].repeat(1, 2),), (v.repeat(4, 2),))
    return out, tangent


@case((3,), (3,))
def jvp_of_two_primals(x, y):
    return jvp(lambda a, b: (a * b).sum() + a.exp(), (x, y), (torch.ones_like(x), y.cos()))


@case((3,))
def jvp_with_aux(x):
    def f(a):
        s = a.sin()
        return s * 2, {"sin": s}
    out, t, aux = jvp(f, (x,), (x,), has_aux=True)
    return out, t, aux["sin"]


@case((3,))
def jvp_of_a_function_returning_a_tuple_with_a_constant_part(x):
    return jvp(lambda a: (a.cumsum(0), torch.full((2,), 3.0)), (x,), (torch.ones(3),))


@case((2, 3))
def jvp_over_a_tuple_primal(x):
    def f(pair):
        w, b = pair
        return w.tanh() + b
    return jvp(f, ((x, x[0]),), ((torch.ones_like(x), x[1]),))


@case((3,))
def jvp_under_vmap_gives_a_jacobian(x):  # the jacobian column by column, as jacfwd builds it
    def push(v):
        return jvp(lambda a: a.sin() * a.sum(), (x,), (v,))[1]
    return vmap(push)(torch.eye(3))


@case((3,))
def jvp_of_a_grad(x):  # forward-over-reverse: a hessian-vector product
    return jvp(grad(lambda a: (a.sin() * a).sum()), (x,), (torch.ones(3),))


@case((3,))
def jvp_of_a_function_that_breaks(x):
    def f(a):
        print("", end="")
        return a.sin()
    return jvp(f, (x,), (x,))


# ---- torch.func.vjp: the forward at one grad level, vjp_fn called later with cotangents ----
@case((3,))
def vjp_of_an_elementwise_function(x):
    out, vjp_fn = vjp(torch.sin, x)
    return out, vjp_fn(torch.ones_like(out))


@case((4, 6))
def vjp_of_a_network_with_respect_to_its_input(x):
    out, vjp_fn = vjp(_MODEL, x)
    (g,) = vjp_fn(torch.ones_like(out))
    return out, g


@case((3,), (3,))
def vjp_of_two_primals_called_twice(x, y):
    out, vjp_fn = vjp(lambda a, b: (a * b.exp(), a.sum()), x, y)
    g1 = vjp_fn((torch.ones(3), torch.tensor(1.0)))
    g2 = vjp_fn((x, torch.tensor(2.0)))
    return out, g1, g2


@case((3,))
def vjp_with_aux(x):
    def f(a):
        s = a.sin()
        return s.sum(), s.detach()
    out, vjp_fn, aux = vjp(f, x, has_aux=True)
    return out, vjp_fn(torch.tensor(1.0)), aux


@case((3,))
def vjp_fn_vmapped_over_a_basis_is_a_jacobian(x):  # jacrev spelled out, as the tutorials do
    out, vjp_fn = vjp(lambda a: a.sin() * a.sum(), x)
    (jac,) = vmap(vjp_fn)(torch.eye(3))
    return jac


@case((2, 3))
def vjp_over_a_dict_primal(x):
    params = {"w": x, "b": x[0]}
    out, vjp_fn = vjp(lambda p: (p["w"] * p["b"]).tanh(), params)
    (g,) = vjp_fn(torch.ones(2, 3))
    return out, g["w"], g["b"]


@case((3,))
def vjp_of_an_integer_output_raises(x):
    try:
        vjp(lambda a: a.argmax(), x)
    except RuntimeError as e:
        return x * 2, str(e)
    return x


@case((3,))
def vjp_with_cotangents_of_the_wrong_structure_raises(x):
    out, vjp_fn = vjp(lambda a: (a.sin(), a.cos()), x)
    try:
        vjp_fn(torch.ones(3))
    except RuntimeError as e:
        return out[0] * 2, str(e)
    return out[0]


# ---- torch.func.linearize: not traced (a break, it runs eagerly); its jvp_fn called in the frame ----
# jvp_fn runs a const-folded FX graph whose folded constants are a ParameterList: its forward,
# compiled on its own, failed with KeyError '0' before ParameterList items were reloaded from
# _parameters.
@case((3,))
def linearize_then_jvp(x):
    y = x + 1
    out, jvp_fn = torch.func.linearize(torch.sin, y)
    return out, jvp_fn(torch.ones_like(y))


@case((3,))
def linearize_of_a_closure(x):
    w = x * 2
    out, jvp_fn = torch.func.linearize(lambda t: (t * w).cos().sum(), x)
    return out * 2, jvp_fn(x)


NOT_YET["linearize_then_jvp"] = "torch.func.linearize is a break that runs eagerly (TorchDynamo: 3 graphs)"
NOT_YET["linearize_of_a_closure"] = "torch.func.linearize is a break that runs eagerly (TorchDynamo: 4 graphs)"
