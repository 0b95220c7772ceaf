"""NumPy in the trace, as TorchDynamo traces it (read by tracer/values/ndarray.cpp): an ndarray is a
tensor inside the graph, and NumPy functions, ndarray methods, attributes and operators become graph
nodes calling TorchDynamo's wrappers, which run torch._numpy on tensors. Graph outputs that are
ndarrays are turned back into numpy.ndarray after the graph (to_numpy)."""
import functools
import operator

import torch

try:
    import numpy as np
except ImportError:  # no NumPy: nothing here is ever asked for
    np = None


@functools.lru_cache(maxsize=1)
def _np_to_tnp():
    from torch._dynamo.variables.misc import get_np_to_tnp_map

    return get_np_to_tnp_map()


def tnp_function(fn):
    """torch._numpy's function for the NumPy callable `fn`, or None (TorchDynamo breaks on it)."""
    try:
        return _np_to_tnp().get(fn)
    except TypeError:  # unhashable
        return None


def is_numpy_callable(fn):
    """A NumPy function or ufunc (not a class): TorchDynamo's NumpyVariable calls."""
    if np is None or isinstance(fn, type):
        return False
    if isinstance(fn, np.ufunc):
        return True
    mod = getattr(fn, "__module__", None)
    return isinstance(mod, str) and (mod == "numpy" or mod.startswith("numpy."))


def is_random(tnp_fn):
    return getattr(tnp_fn, "__module__", "") == "torch._numpy.random"


@functools.lru_cache(maxsize=None)
def function_wrapper(tnp_fn):
    from torch._dynamo.utils import numpy_to_tensor_wrapper

    return numpy_to_tensor_wrapper(tnp_fn)


@functools.lru_cache(maxsize=None)
def method_wrapper(name):
    from torch._dynamo.utils import numpy_method_wrapper

    return numpy_method_wrapper(name)


@functools.lru_cache(maxsize=None)
def operator_wrapper(name):
    from torch._dynamo.utils import numpy_operator_wrapper

    return numpy_operator_wrapper(getattr(operator, name))


def attr_wrapper():
    from torch._dynamo.utils import numpy_attr_wrapper

    return numpy_attr_wrapper


def dtype_name(x):
    """A NumPy dtype or scalar type given as an argument: its name (what torch._numpy reads, and what
    the graph's code can spell); None when `x` is not one."""
    if np is None:
        return None
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return np.dtype(x).name
    if x in (bool, int, float, complex):  # np.arange(5, dtype=float): NumPy's dtype of the builtin type
        return np.dtype(x).name
    return None


def array_dtype(example):
    """ndarray.dtype of the array behind a tensor of `example`'s dtype: the numpy.dtype eager NumPy
    gives (a dtype NumPy lacks, bfloat16, raises)."""
    return torch.empty(0, dtype=example.dtype).numpy().dtype


def to_numpy(value):
    """A graph output that is an ndarray in the traced code: the numpy.ndarray eager code has."""
    if isinstance(value, torch.Tensor):
        return value.numpy(force=True)
    return value


def to_numpy_scalar(value):
    """A 0-d graph output where NumPy gives a scalar (nd[i], nd.sum(), a ufunc of scalars): that scalar
    (numpy.float64 ...), as eager code has it."""
    return to_numpy(value)[()]
