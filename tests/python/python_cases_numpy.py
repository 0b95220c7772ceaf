"""Cases for NumPy in compiled code, written the way people write it: `x.numpy()` then NumPy functions,
ndarray attributes, methods, operators and subscripts, ndarrays turned back into tensors, NumPy under
a module's forward. TorchDynamo traces them through torch._numpy (an ndarray is a tensor inside the
graph; one that leaves it is a numpy.ndarray again), and breaks where torch._numpy has no answer.
Appended to python_cases.CASES; each runs against eager and torch._dynamo.explain."""
import numpy as np
import torch
import torch.nn as nn

from python_cases import DIFFERS, case, module_case


@case((2, 3))
def numpy_sin_exp_back_to_tensor(x):
    a = x.numpy()
    return torch.from_numpy(np.sin(a) + np.exp(a))


@case((3, 4))
def numpy_sum_mean_over_axes(x):
    a = x.numpy()
    return np.sum(a, axis=0), np.mean(a, axis=1), np.max(a, axis=-1)


@case((3, 4))
def numpy_where_and_clip(x):
    a = x.numpy()
    return np.where(a > 0, a, 0.0), np.clip(a, -0.5, 0.5), np.clip(a, a_min=0.0, a_max=None)


@case((2, 3), (4, 3))
def numpy_concatenate_arrays(x, y):
    return np.concatenate([x.numpy(), y.numpy()], axis=0), np.stack([x.numpy(), x.numpy() * 2])


@case((4,))
def numpy_arange_times_array(x):
    a = x.numpy()
    return a * np.arange(4), np.arange(0, 8, 2) + a


@case((2, 3))
def ndarray_attributes(x):
    a = x.numpy()
    return a.T, a.shape, a.ndim, a.size, a.itemsize, len(a)


@case((2, 3))
def ndarray_methods(x):
    a = x.numpy()
    return a.reshape(-1), a.astype(np.float64), a.reshape(3, 2).max(axis=0), a.transpose(1, 0).copy(), a.mean(axis=0)


@case((2, 3))
def ndarray_arithmetic_with_scalars(x):
    a = x.numpy()
    b = 2 * a + 1
    c = -b / 3
    return c ** 2, a >= 0, abs(c), b - 0.5


@case((3,), (3,))
def ndarray_arithmetic_of_two_tensors(x, y):
    a, b = x.numpy(), y.numpy()
    return a + b * 2, a @ b, np.maximum(a, b)


@case((2, 3))
def numpy_between_torch_ops(x):
    y = torch.relu(x) + 1
    z = torch.from_numpy(np.cos(y.numpy()))
    return z * x, torch.as_tensor(np.log(y.numpy()))


@case((3, 3))
def ndarray_subscripts(x):
    a = x.numpy()
    return a[0], a[:, 1:], a[1, 2] * 2, a[None, :, 0]


@case((3, 3))
def ndarray_item_assignment_on_a_copy(x):
    a = x.numpy().copy()
    a[0] = 0.0
    a[:, 2] += 1.0
    return a, x


@case((4,))
def numpy_returned_directly(x):
    return x.numpy() * 2


@case((2, 3))
def numpy_pi_and_linalg(x):
    a = x.numpy()
    return np.sin(a * np.pi), np.linalg.norm(a, axis=1), np.matmul(a, a.T)


@case((3,))
def numpy_force_and_isinstance(x):
    a = (x * 2).numpy(force=True)
    return isinstance(a, np.ndarray), np.tanh(a)


@case((2, 3))
def numpy_reduction_to_scalar(x):
    a = x.numpy()
    return np.sum(a), a.max()


@case((2, 2))
def ndarray_dtype_printed(x):
    a = np.exp(x.numpy())
    return str(a.dtype), a + 1


@case((3,))
def numpy_function_missing_from_torch_numpy(x):
    a = x.numpy() + 1
    return np.nanpercentile(a, 50), a * 2


@case((3,))
def numpy_tolist_breaks(x):
    a = np.square(x.numpy())
    return a.tolist(), x + 1


@case((3,))
def ndarray_to_python_float_breaks(x):
    a = np.mean(x.numpy() * 2)
    return float(a) + 1.0, x * 2


@case((3,))
def numpy_branch_on_array_value_breaks(x):
    a = x.numpy()
    if np.sum(a) > 100.0:
        return x + 1
    return x - 1


def _arrays(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3)]


@case((2, 3), extra=_arrays)
def ndarray_arguments_are_graph_inputs(x, a, b):
    return torch.from_numpy(a) + x, np.exp(a) * b, a, b.T


@case((3,), extra=lambda seed: [np.arange(3.0) + seed])
def ndarray_argument_mutated_in_place(x, a):
    a += 1
    a[0] = -1.0
    return x + torch.from_numpy(a)


@case((3,), extra=lambda seed: [np.arange(3, dtype=np.int64)])
def ndarray_int_argument_arithmetic(x, a):
    return a * 2, a // 2, a % 2, a * 0.5, x * torch.as_tensor(a)


@case((3, 2))
def ndarray_rows_in_a_loop(x):
    total = np.zeros(2, dtype=np.float32)
    for row in x.numpy():
        total = total + np.abs(row)
    return total, [r * 2 for r in x.numpy()]


@case((3,), extra=lambda seed: [np.arange(1, 4) + seed])
def ndarray_int_true_division_breaks(x, a):
    return a / 2, x + 1


DIFFERS["ndarray_int_true_division_breaks"] = (
    (0, 0), (1, 0),
    "torch._numpy divides int arrays into float32 where NumPy gives float64; TorchDynamo "
    "returns the float32 array (1 graph), dynview breaks there and eager NumPy computes it")


@case((3,))
def numpy_ufunc_called_on_a_tensor(x):
    y = x * 2
    return np.sin(y) + 1  # eager: a Tensor (Tensor.__array_wrap__), computed by NumPy


DIFFERS["numpy_ufunc_called_on_a_tensor"] = (
    (2, 1), (1, 0),
    "np.sin(tensor) is a torch.Tensor in eager (NumPy computes it, Tensor.__array_wrap__ wraps it); TorchDynamo "
    "traces it through torch._numpy and returns a numpy.ndarray (1 graph), dynview breaks at the call (a graph on "
    "each side of it) and NumPy computes it")


class NumpyPostprocess(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        h = self.lin(x).detach()
        probs = np.exp(h.numpy())
        probs = probs / probs.sum(axis=-1, keepdims=True)
        return torch.from_numpy(probs), h


module_case(NumpyPostprocess, (2, 4))


@case((3,))
def numpy_dtype_described_in_the_trace(x):
    # np.dtype(...) and np.finfo(...) are immutable descriptions: built now, as torch.finfo is
    dt = np.dtype("float32")
    tiny = np.finfo(np.float32).eps
    return x * dt.itemsize + float(tiny), dt.name, dt.kind, int(np.int64(7)) // 2


# ---- NumPy's functions of a NumPy scalar argument: a mixup lam, a rotation angle ----
@case((2, 3), extra=lambda seed: [np.float64(0.3)])
def numpy_functions_of_a_numpy_float(x, lam):
    # CutMix's cut ratio and a clipped mixing weight (TorchDynamo: a 0-d array in the graph; dynview:
    # its value, guarded, computed in the trace -- no break either way)
    cut_rat = np.sqrt(1. - lam)
    w = np.clip(lam, 0.2, 0.8)
    return x * cut_rat + np.maximum(w, 0.5), x * np.exp(-lam)


@case((4, 2), extra=lambda seed: [np.float64(0.5)])
def rotation_by_a_numpy_angle(x, theta):
    c, s = np.cos(theta), np.sin(theta)
    return torch.stack([x[:, 0] * c - x[:, 1] * s, x[:, 0] * s + x[:, 1] * c], 1) * np.tan(theta / 2)


# ---- ndarrays turned back into tensors and cast by Python types ----
@case((1, 2, 3))
def tensor_copied_from_a_stacked_array(y):
    # torch.tensor(nd, dtype=...): a copy of the array's tensor in the graph, as TorchDynamo records it
    a = np.stack([np.ones([2, 3])], axis=0)
    return torch.tensor(a, dtype=torch.long) + y


@case(extra=lambda s: [np.linspace(-1.0, 1.0 + s, 5)])
def mask_cast_by_python_types(a):
    # astype(bool/float/int): NumPy's dtype for the Python type (bool, float64, int64)
    keep = (a * 5).astype(bool)
    return keep.astype(float) * 2 + keep.astype(int), a.astype(float)


@case(extra=lambda s: [np.arange(6.0).reshape(2, 3) + s])
def row_stats_as_numpy_scalars(a):
    # what NumPy gives as scalars (a reduction, an element, a ufunc of them) leaves as scalars
    total = a.sum()
    first = a[0, 0]
    return total, first, np.sqrt(total) + first, a.mean(axis=0)


@case((3, 4))
def rows_of_a_tensor_by_its_own_iterator(x):
    # x.__iter__(): the rows, as iter(x)
    out = []
    for row in x.__iter__():
        out.append(row.sum())
    return torch.stack(out)


@case((3, 4))
def returns_an_arrays_strides_in_bytes(x):
    # a.strides: the tensor's strides times its element size, the transpose's too (constants, as
    # TorchDynamo gives them; it breaks on arithmetic with them, dynview does not)
    a = (x + 1).numpy()
    return a * 2, a.strides, a.T.strides, a.itemsize


@case((2, 3))
def numpy_constructors_written_in_python(x):
    # np.ones, np.full, np.eye are Python functions in NumPy (np.zeros is a C one): torch._numpy's
    # functions as every other, not NumPy's own code run through the trace
    w = np.ones((2, 3)) * 0.5 + np.eye(2, 3)
    b = np.full((3,), 2.0)
    return torch.from_numpy(w).float() * x + torch.from_numpy(b).float(), np.ones_like(w)


_F32 = np.finfo(np.float32)


@case((2, 3))
def numpy_dtype_limits_clamp_a_tensor(x):
    # np.iinfo / np.finfo of a scalar type, a dtype name or a dtype object: descriptions made from
    # constants, their limits read as numbers (a mask value and an epsilon, as data code writes them)
    big = np.iinfo(np.int16).max
    low = np.iinfo("int32").min
    eps = np.finfo(np.dtype("float64")).eps
    y = x.masked_fill(x > 0.5, big) + low
    return y / (x.abs() + _F32.eps + eps), np.finfo(np.float16).bits, _F32.tiny


@case((3, 4))
def numpy_like_constructors_and_asarray_of_a_tensor(x):
    # NumPy reads a tensor through Tensor.__array__: np.asarray(x) shares x's memory (a write through
    # it is a write to x), np.*_like make arrays of its shape and dtype
    a = np.asarray(x)
    a[0] = 5.0
    m = np.zeros_like(x, dtype=np.float64) + np.full_like(x, 0.5)
    return torch.from_numpy(m) + x, np.array(x * 2).sum(axis=0), np.ones_like(x)


@case(extra=lambda seed: (torch.full((3,), float(seed), requires_grad=True),))
def numpy_like_of_a_tensor_that_requires_grad_raises_as_eager(w):
    try:
        return np.ones_like(w)
    except RuntimeError as e:
        return w * 2, str(e)


DIFFERS["numpy_like_of_a_tensor_that_requires_grad_raises_as_eager"] = (
    (0, 0), (1, 0),
    "TorchDynamo gives np.ones_like an ndarray of the tensor without eager's RuntimeError, so its result differs from "
    "eager's; dynview stops at the read inside the try block and runs the frame eagerly, where it raises and the "
    "handler runs")


@case((3, 4))
def an_arrays_dtype_read_in_the_forward(x):
    # a.dtype: the numpy.dtype of the array (from the tensor's guarded dtype), used as NumPy code uses
    # it -- for its limits, to make another array, compared and printed
    a = (x * 2).numpy()
    idx = x.argmax(-1).numpy()
    lo = np.finfo(a.dtype).min
    b = np.zeros(3, dtype=idx.dtype)
    return (torch.from_numpy(a).clamp(min=float(lo)), a.dtype, a.dtype == np.float32, str(idx.dtype),
            b, a.dtype.itemsize, idx.dtype.kind)


DIFFERS["ndarray_dtype_printed"] = (
    (1, 0), (1, 1),
    "TorchDynamo does not trace ndarray.dtype and runs the rest of the frame eagerly; dynview reads it from the "
    "tensor's guarded dtype: one graph, no break")
DIFFERS["an_arrays_dtype_read_in_the_forward"] = (
    (1, 0), (1, 1),
    "TorchDynamo does not trace ndarray.dtype (\"Unsupported ndarray attribute access\") and runs the rest of "
    "the frame eagerly; dynview reads it from the tensor's guarded dtype: one graph, no break")


@case((2, 3))
def numpy_scalar_of_a_higher_kind_times_an_int_tensor(x):
    # nd.sum() of a float64 array is a NumPy scalar: an int tensor times it is float32 in eager (torch
    # promotes the scalar as a Python float), float64 were it a 0-d tensor; a float tensor's dtype wins
    s = x.double().numpy().sum()
    idx = torch.arange(6).reshape(2, 3)
    return idx * s, x * s, x.half() + s, idx.sum() * 2


DIFFERS["numpy_scalar_of_a_higher_kind_times_an_int_tensor"] = (
    (1, 1), (1, 0),
    "TorchDynamo gives the scalar to the graph as a 0-d float64 tensor, so idx * s is float64 where eager's is "
    "float32 (a wrong dtype); dynview breaks at that product, which eager computes, and captures the rest")


_NP_SCALARS = (np.float64(0.25), np.float32(1.5), np.int32(7), np.bool_(True), np.int64(-3))


@case((3,))
def tensors_made_of_numpy_scalars_keep_their_dtypes(x):
    # torch.tensor(np.float64(0.25)) is float64 (torch.tensor(0.25) is float32); as_tensor too; a
    # dtype given wins (dtype=None is the scalar's)
    made = [torch.tensor(s) for s in _NP_SCALARS] + [torch.as_tensor(_NP_SCALARS[1]), torch.tensor(_NP_SCALARS[0], dtype=torch.float16),
                                                     torch.as_tensor(_NP_SCALARS[0], dtype=None)]
    return x * made[0], [(m.dtype, m) for m in made]


# ---- Python's own types as NumPy dtypes (np.arange(n, dtype=float)): NumPy's dtype of each, as in
# PyTorch's test_dtypes_no_graphbreaks (it broke: "a type passed to numpy.arange") ----
@case((2, 3))
def numpy_dtypes_given_as_builtin_types(x):
    a = x.numpy()
    r = np.arange(3, dtype=float) + np.zeros(3, dtype=int) + np.ones(3, dtype=bool)
    return torch.from_numpy(a.astype(float) * r), torch.from_numpy(np.full(2, 7, dtype=int))


# ---- tensors indexed by arrays computed in the trace: the tensor behind the array is the index (as
# eager converts an ndarray index); a NumPy integer computed in the trace cannot be (its value is
# data): a break, as TorchDynamo's item() of it ----
@case((6, 4))
def tensor_rows_picked_by_a_computed_array(x):
    idx = np.arange(3) * 2
    order = np.argsort(-np.arange(4))
    return x[idx].sum(0), x[:, order], x[idx[:2], order[:2]]


@case((6, 4))
def tensor_rows_written_through_a_computed_array(x):
    x = x.clone()
    keep = np.arange(0, 6, 2)
    x[keep] = 0.0
    x[:, np.array([1, 3])[::-1].copy()] += 1.0
    return x


class _NumpySchedule(nn.Module):
    # a scheduler that keeps its timesteps in NumPy (diffusers' PNDM keeps prk_timesteps as an array)
    # and reads its buffer at them
    def __init__(self):
        super().__init__()
        self.timesteps = np.array([5, 3, 1])
        self.register_buffer("alphas", torch.linspace(0.9, 0.1, 6))

    def forward(self, x):
        picked = self.alphas[self.timesteps]          # an array index: in the graph
        first = self.alphas[self.timesteps[0]]        # a NumPy integer computed in the trace: a break
        return x * picked.sum() + first


module_case(_NumpySchedule, (3,))
