"""NumPy values in compiled code: scalars used with tensors equal eager (they were spelled `np.` in
the graph's code, a NameError); Tensor.numpy() and NumPy calls on its result are traced as TorchDynamo
traces them, through torch._numpy (an ndarray is a tensor inside the graph, the graph's code calls
TorchDynamo's wrappers), and where torch._numpy has no answer the graph breaks with a reason."""
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def scalar_math(x):
    return x + np.float32(2.0), x * np.int64(3), (x > np.float64(0.5)).sum()


def with_numpy_array(x):
    a = x.numpy()
    return torch.from_numpy(a * 2) + 1


@pytest.mark.parametrize("fn", [scalar_math, with_numpy_array])
def test_equals_eager(fn):
    cf = dynview.compile(fn, backend="eager")
    for seed in (0, 1):
        x = torch.rand(4, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(cf(x), fn(x))


def test_tensor_numpy_is_traced_like_torch_dynamo():
    x = torch.ones(3)
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(with_numpy_array)(x)
    ours = dynview.explain(with_numpy_array)(x)
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0)


def numpy_pipeline(x):
    a = x.numpy()
    b = np.clip(np.sin(a) * 2, -1.0, 1.0)
    return torch.from_numpy(b.T), b.sum(axis=0)


def test_graph_code_calls_torch_numpy_wrappers():
    # The FX code is valid Python that names TorchDynamo's wrappers (globals of the GraphModule).
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    x = torch.randn(2, 3)
    got = dynview.compile(numpy_pipeline, backend=backend)(x)
    (gm,) = graphs
    code = gm.code
    for name in ("view_as", "wrapped_sin", "wrapped_mul", "wrapped_clip", "numpy_attr_wrapper", "torch.as_tensor", "wrapped_sum"):
        assert name in code, code
    compile(code, "<graph>", "exec")
    want = numpy_pipeline(x)
    torch.testing.assert_close(got[0], want[0])
    assert type(got[1]) is np.ndarray and got[1].dtype == want[1].dtype
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def missing_from_torch_numpy(x):
    return np.nanpercentile(x.numpy(), 50)


def test_numpy_function_outside_torch_numpy_breaks_with_a_reason():
    dynview._C.take_records()
    cf = dynview.compile(missing_from_torch_numpy, backend="eager")
    x = torch.arange(5.0)
    assert cf(x) == missing_from_torch_numpy(x)
    reasons = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert any("nanpercentile is not in torch._numpy" in m for m in reasons), reasons


def on_cuda_or_grad(x):
    return x.numpy() * 2


def test_numpy_of_a_tensor_that_requires_grad_raises_like_eager():
    # TorchDynamo would trace it (its graph never raises); eager raises, and so does dynview's break.
    x = torch.ones(3, requires_grad=True)
    cf = dynview.compile(on_cuda_or_grad, backend="eager")
    with pytest.raises(RuntimeError, match="requires grad"):
        cf(x)


def _dynview_bin():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for cand in (os.environ.get("DYNVIEW_BIN"), os.path.join(root, "build", "dynview"), shutil.which("dynview")):
        if cand and os.path.exists(cand):
            return cand
    pytest.fail("dynview executable not built (expected build/dynview or DYNVIEW_BIN)")


def test_recorded_graph_names_the_wrappers(tmp_path):
    path = tmp_path / "numpy.dyn"
    with dynview.record(str(path)):
        dynview.compile(numpy_pipeline, backend="eager")(torch.randn(2, 3))
    out = subprocess.run([_dynview_bin(), "explain", str(path)], capture_output=True, text=True, check=True).stdout
    assert "torch._dynamo.utils.wrapped_sin" in out and "view_as" in out, out
    assert "repr failed" not in out, out


def scale_array(x, a):
    return torch.from_numpy(a) * x, a * 2


def test_ndarray_arguments_are_guarded_graph_inputs():
    # torch.as_tensor(a) is the graph's input, guarded as a tensor: a repeat call hits the cache, a
    # new dtype recompiles, and the ndarray results keep NumPy's dtype.
    cf = dynview.compile(scale_array, backend="eager")
    x = torch.ones(3, dtype=torch.float64)
    a = np.arange(3.0)
    for _ in range(2):
        got, want = cf(x, a), scale_array(x, a)
        torch.testing.assert_close(got[0], want[0])
        assert type(got[1]) is np.ndarray and got[1].dtype == np.float64
        np.testing.assert_array_equal(got[1], want[1])
    (entry,) = dynview._C.cache_entries(scale_array.__code__)
    assert entry["hits"] == 1
    b = np.arange(3, dtype=np.int32)
    got = cf(x, b)
    assert got[1].dtype == np.int32 and len(dynview._C.cache_entries(scale_array.__code__)) == 2
    np.testing.assert_array_equal(got[1], b * 2)


def rows_of(x, a):
    return torch.from_numpy(np.sin(a)) + x.sum(), a.shape, (a * 2).sum(axis=0)


def test_ndarray_arguments_become_dynamic_like_tensors():
    # automatic dynamic shapes: a size that changes between calls is symbolic in the next compile
    # (the ndarray's shape then comes from the graph), and later sizes hit that entry.
    cf = dynview.compile(rows_of, backend="eager")
    g = np.random.default_rng(0)
    for n in (3, 4, 5, 6):
        x, a = torch.randn(n), g.standard_normal((n, 2))
        got, want = cf(x, a), rows_of(x, a)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is tuple
        np.testing.assert_allclose(got[2], want[2])
    entries = dynview._C.cache_entries(rows_of.__code__)
    assert len(entries) == 2 and sum(e["hits"] for e in entries) == 2


def scaled_by(x, s):
    return x * s


def test_a_numpy_scalar_argument_is_guarded_by_its_value():
    # the graph takes it as a constant: another value (or another NumPy type) recompiles, and the
    # same value is a cache hit
    cf = dynview.compile(scaled_by, backend="eager")
    x = torch.ones(2)
    for s in (np.float32(2.0), np.float32(3.0), np.float64(3.0), np.int64(4), np.float32(2.0)):
        torch.testing.assert_close(cf(x, s), scaled_by(x, s))
    entries = dynview._C.cache_entries(scaled_by.__code__)
    assert len(entries) == 4 and sum(e["hits"] for e in entries) == 1
    theirs = torch._dynamo.explain(scaled_by)(x, np.float32(2.0))
    ours = dynview.explain(scaled_by)(x, np.float32(2.0))
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
