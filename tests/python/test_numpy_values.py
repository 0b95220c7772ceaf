"""NumPy values in compiled code: scalars used with tensors equal eager (they were spelled `np.` in
the graph's code, a NameError), and Tensor.numpy() breaks the graph with a reason that says so
(TorchDynamo traces NumPy through torch._numpy; dynview does not yet)."""
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


def test_tensor_numpy_breaks_with_a_reason():
    dynview._C.take_records()
    dynview.compile(with_numpy_array, backend="eager")(torch.ones(3))
    reasons = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert any("numpy()" in m for m in reasons), reasons
