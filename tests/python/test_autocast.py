"""Autocast as torch.compile sees it. A compiled model called under the caller's torch.autocast (the
training loop's `with torch.autocast(...): loss = model(x)`) traces with example values of the dtypes
autocast gives (a linear's output is bfloat16), so code that reads a dtype, converts or branches on
it does what eager does; a change of autocast's state or dtype recompiles. Each case against eager
and against torch.compile's graph count on the same calls."""
import pytest
import torch
from torch import nn

import dynview
from test_engine_behaviour import counting_dynamo
from test_lazy_sequences import _reset  # noqa: F401  (both engines reset around each test)


class DtypeAware(nn.Module):
    """Reads the dtype autocast gave its activations, as mixed-precision model code does (upcasting
    for a norm, a branch for half-precision outputs, `x.to(dtype) is x`)."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        h = self.proj(x)
        if h.dtype in (torch.float16, torch.bfloat16):
            h = h.float() * 2
        h = torch.nn.functional.layer_norm(h, (8,))
        y = self.out(h.relu())
        return y, y.dtype, h.to(torch.float32) is h, torch.bmm(y[None], y[None].transpose(1, 2)).dtype


def _calls(model, dtypes):
    g = torch.Generator().manual_seed(0)
    out = []
    for dt in dtypes:
        x = torch.randn(3, 8, generator=g)
        if dt is None:
            out.append(model(x))
        else:
            with torch.autocast("cpu", dtype=dt):
                out.append(model(x))
    return out


@pytest.mark.parametrize("dtypes", [[torch.bfloat16] * 3, [torch.bfloat16, None, torch.float16, torch.bfloat16]],
                         ids=["bf16", "changing"])
def test_a_model_called_under_autocast_equals_eager(dtypes):
    torch.manual_seed(0)
    model = DtypeAware()
    want = _calls(model, dtypes)
    td, n_td = counting_dynamo(model)
    _calls(td, dtypes)
    compiled = dynview.compile(model, backend="eager")
    dynview._C.take_records()
    got = _calls(compiled, dtypes)
    for g, w in zip(got, want):
        assert g[1:] == w[1:]
        torch.testing.assert_close(g[0], w[0])
    graphs = [r for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(graphs) == n_td[0], [r["reason"] for r in graphs]


def test_autocast_dtype_is_guarded():
    torch.manual_seed(0)
    model = DtypeAware()
    compiled = dynview.compile(model, backend="eager")
    _calls(compiled, [torch.bfloat16])
    dynview._C.take_records()
    assert _calls(compiled, [torch.float16])[0][1] == torch.float16
    records = dynview._C.take_records()
    assert len(records) == 1 and "autocast dtype changed" in records[0]["reason"], [r["reason"] for r in records]
