"""dynview.compile against eager and against TorchDynamo on the corpus in engine_cases.py.

For every case: outputs equal eager on two different inputs (aot_eager too); a repeated call hits
the cache; the number of graphs equals torch._dynamo.explain's, and dynview breaks exactly when
TorchDynamo breaks (frames are split at breaks, so graph and break counts are compared exactly).
"""
import warnings

import pytest
import torch

import dynview
from engine_cases import CASES

warnings.filterwarnings("ignore")


def run(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # exceptions must match too
        return ("raise", type(e), str(e))


def close(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        torch.testing.assert_close(a, b, equal_nan=True)
        assert a.requires_grad == b.requires_grad
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a.keys()) == list(b.keys())
        for k in a:
            close(a[k], b[k])
        if type(a) is not dict and hasattr(a, "__dict__"):  # a dict subclass's attributes (ModelOutput's fields)
            close(vars(a), vars(b))
    else:
        assert a == b


def same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "raise":
        return a[1] is b[1]
    close(a[1], b[1])
    return True


def code_of(fn):
    return (fn.forward.__func__ if isinstance(fn, torch.nn.Module) else fn).__code__


_dynamo_cache = {}


def dynamo_explain(name, fn, args):
    if name not in _dynamo_cache:
        torch._dynamo.reset()
        e = torch._dynamo.explain(fn)(*args)
        _dynamo_cache[name] = (e.graph_count, len(e.break_reasons))
        torch._dynamo.reset()
    return _dynamo_cache[name]


@pytest.fixture(autouse=True)
def _reset():
    dynview.reset()
    yield
    dynview.reset()


@pytest.mark.parametrize("name,fn,make,inductor", CASES, ids=[c[0] for c in CASES])
def test_matches_eager_and_caches(name, fn, make, inductor):
    args0, args1 = make(0), make(1)
    cf = dynview.compile(fn, backend="eager")
    for args in (args0, args1, args0):
        assert same(run(cf, args), run(fn, args))
    entries = dynview._C.cache_entries(code_of(fn))
    e = dynview.explain(fn)(*args0)
    if e.graph_break_count == 0 and e.graph_count:
        assert len(entries) == 1, "same shapes must not recompile"
        assert entries[0]["hits"] == 2, "second and third calls are cache hits"


@pytest.mark.shared_by_versions  # (conftest.py)
@pytest.mark.parametrize("name,fn,make,inductor", CASES, ids=[c[0] for c in CASES])
def test_graphs_and_breaks_match_torch_dynamo(name, fn, make, inductor):
    args = make(0)
    ours = dynview.explain(fn)(*args)
    graphs, breaks = dynamo_explain(name, fn, args)
    if name == "print_call":
        pytest.xfail("TorchDynamo 2.13 reorders print() after the graph; dynview breaks there")
    if name == "tolist_call":
        pytest.xfail("TorchDynamo 2.13 turns .tolist() into Python values without a break; dynview breaks "
                     "there as the issue specifies")
    assert (ours.graph_count, len(ours.break_reasons)) == (graphs, breaks), [str(b) for b in ours.break_reasons]
    assert all(b.break_id.startswith("DV") and b.reason for b in ours.break_reasons)


@pytest.mark.shared_by_versions  # (conftest.py)
@pytest.mark.parametrize("name,fn,make,inductor", CASES, ids=[c[0] for c in CASES])
def test_aot_eager(name, fn, make, inductor):
    cf = dynview.compile(fn, backend="aot_eager")
    for args in (make(0), make(1)):
        assert same(run(cf, args), run(fn, args))


INDUCTOR = [c for c in CASES if c[3]]


@pytest.mark.shared_by_versions  # (conftest.py)
@pytest.mark.parametrize("name,fn,make,inductor", INDUCTOR, ids=[c[0] for c in INDUCTOR])
def test_inductor(name, fn, make, inductor):
    cf = dynview.compile(fn, backend="inductor")
    for args in (make(0), make(1)):
        r, want = run(cf, args), run(fn, args)
        assert r[0] == want[0] == "ok"
        torch.testing.assert_close(r[1], want[1], rtol=1e-4, atol=1e-4)
    assert len(INDUCTOR) >= 10
