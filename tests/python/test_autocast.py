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


# ---- torch.autocast blocks inside the compiled code: _enter_autocast/_exit_autocast nodes around the
# operators they enclose, as TorchDynamo's graph has them ----
def block_bf16(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        z = y.float().sum() + y.sum()
    return y.float() + 1, z, y.dtype


def block_disabled_inside_enabled(x, w):
    # the rotary-embedding idiom: force float32 for a part of a mixed-precision forward
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        with torch.autocast(device_type="cpu", enabled=False):
            freqs = (h.float() @ w).cos()
        out = h * freqs.to(h.dtype)
    return out, freqs.dtype, h.dtype


def block_reads_the_state(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        on = torch.is_autocast_enabled("cpu")
        y = x @ w
    return y.float() * (2 if on else 3), torch.is_autocast_enabled("cpu")


def block_raising_caught_outside(x, w):
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            raise ValueError("stop")
    except ValueError:
        pass
    return (x @ w).dtype, y.dtype


def block_with_a_break_inside(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        print("", end="")
        z = y @ w.to(y.dtype)
    return z.float() + 1, z.dtype


def block_deprecated_spelling(x, w):
    with torch.cpu.amp.autocast(dtype=torch.bfloat16):
        y = x @ w
    return y.float() - 1, y.dtype


def _deprecated_spelling_as_torch_dynamo_reads_it(x, w):
    # TorchDynamo 2.13 on CPython 3.13 raises an internal error (KeyError: dtype) on
    # torch.cpu.amp.autocast(...); its counts are taken on the same block spelled torch.autocast("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y.float() - 1, y.dtype


ORACLE = {block_deprecated_spelling: _deprecated_spelling_as_torch_dynamo_reads_it}

MIXED = torch.autocast("cpu", dtype=torch.bfloat16)


def block_of_a_global_object(x, w):
    with MIXED:  # made once, outside: its settings are guarded, the object itself is not entered while tracing
        y = (x @ w).relu()
    return y.float(), y.dtype


@torch.autocast("cpu", dtype=torch.bfloat16)
def _mixed_matmul(x, w):
    return x @ w


def block_of_a_decorated_function(x, w):
    return _mixed_matmul(x, w).float() * 2, _mixed_matmul(x, w).dtype


BLOCKS = [block_bf16, block_disabled_inside_enabled, block_reads_the_state, block_raising_caught_outside,
          block_with_a_break_inside, block_deprecated_spelling, block_of_a_global_object, block_of_a_decorated_function]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("fn", BLOCKS, ids=[f.__name__ for f in BLOCKS])
def test_an_autocast_block_in_the_compiled_code_equals_eager_and_torch_dynamo(fn):
    g = torch.Generator().manual_seed(0)
    calls = [(torch.randn(4, 8, generator=g), torch.randn(8, 8, generator=g)) for _ in range(3)]
    want = [fn(*c) for c in calls]
    assert not torch.is_autocast_enabled("cpu")
    compiled = dynview.compile(fn, backend="eager")
    dynview._C.take_records()
    for c, w in zip(calls, want):
        _same(compiled(*c), w)
        assert not torch.is_autocast_enabled("cpu"), "the block's state is left as eager leaves it"
    records = dynview._C.take_records()
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(ORACLE.get(fn, fn))(*calls[0])
    ours = dynview.explain(fn)(*calls[0])
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)), \
        ([str(b) for b in ours.break_reasons], [r["break_message"] for r in records])
    assert not torch.is_autocast_enabled("cpu")


# ---- Hugging Face models under the caller's autocast (a mixed-precision training or inference loop):
# the rotary embeddings' float32 block (autocast disabled inside), attention in bfloat16 ----
@pytest.mark.parametrize("name", ["llama", "gpt2", "bert", "t5"])
def test_hf_models_under_autocast_equal_eager_and_torch_dynamo(name):
    import test_hf_models as hf
    model, inputs = hf.build(name), hf.MODELS[name][2]
    with torch.no_grad():
        full = hf.tensors(model(**inputs(0)))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want = [hf.tensors(model(**inputs(seed))) for seed in (0, 1)]
        compiled = dynview.compile(model, backend="eager")
        got = [hf.tensors(compiled(**inputs(seed))) for seed in (0, 1)]
        assert not all(torch.equal(a, b) for a, b in zip(full, want[0])), "autocast changes what the model computes"
        for g, w in zip(got, want):
            assert [t.dtype for t in g] == [t.dtype for t in w]
            torch.testing.assert_close(g, w)
        ours = dynview.explain(model)(**inputs(0))
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(model)(**inputs(0))
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0), \
        [str(b) for b in ours.break_reasons]
