"""Graph breaks inside list, set and dict comprehensions.

CPython 3.12+ inlines comprehensions into the function (PEP 709), so a break inside one is a break
in the middle of a loop of the frame. As TorchDynamo's comprehension_graph_break, dynview splits the
frame at the comprehension: the graph before it, the comprehension run eagerly in a function of its
own, and a resume function after it (before: the whole frame ran eagerly). On 3.11 the comprehension
is a function of its own, and the break is at its call. Each function runs eagerly, under
torch._dynamo.explain and under dynview: results equal eager's, graphs and breaks TorchDynamo's."""
import sys

import pytest
import torch

import dynview
from test_engine_cases import close

pytestmark = pytest.mark.usefixtures("fresh_engine")


def values_as_python(x):
    y = x * 2
    vals = [int(v.item()) for v in y.flatten()]
    return y.sum() + sum(vals), vals


def explicit_break(x):
    y = x.exp()
    s = [torch._dynamo.graph_break() or d for d in range(2)]
    return y + 1, s


def nested(x):
    h = x + 1
    rows = [[float(v) for v in row] for row in h]
    return h.t(), rows


def inside_a_call(x):
    h = x.cos()
    return max([v.item() for v in h.flatten()]) + h


def helper_that_prints(x):
    def scale(v):
        print("", end="")
        return v * 2
    h = x.sin()
    out = [scale(r) for r in h]
    return torch.stack(out) + h


def two_comprehensions(x):
    a = [v.item() for v in x.flatten()]
    h = x * 2
    b = [v.item() for v in h.flatten()]
    return h + 1, a, b


def reads_locals(x):
    w = x.sum()
    scale = 3
    out = [float(v) * scale + w.item() for v in x.flatten()]
    return x * scale, out


def split_by_lengths(hidden, lengths):
    # sizes from a tensor of lengths, as sequence-packing helpers write it
    chunks = torch.split(hidden, [int(n) for n in lengths])
    return torch.stack([c.mean(0) for c in chunks]) * 2


CASES = [values_as_python, explicit_break, nested, inside_a_call, helper_that_prints, two_comprehensions, reads_locals]


def x_in():
    return torch.arange(6.0).reshape(2, 3) / 4


def dynview_run(fn, *args):
    dynview._C.take_records()
    out = dynview.compile(fn, backend="eager")(*args)
    records = dynview._C.take_records()
    return out, records


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_a_break_in_a_comprehension_splits_the_frame_as_torch_dynamo_does(fn):
    want = fn(x_in())
    got, records = dynview_run(fn, x_in())
    close(got, want)
    td = torch._dynamo.explain(fn)(x_in())
    dynview.reset()
    dv = dynview.explain(fn)(x_in())
    assert (dv.graph_count, len(dv.break_reasons)) == (td.graph_count, len(td.break_reasons)), \
        [(r["qualname"], r["break_id"], r["eager_why"]) for r in records]
    assert sum(r["graph"] is not None for r in records) == td.graph_count >= 2  # before the comprehension and after it


def test_packing_by_lengths_from_a_tensor():
    hidden, lengths = torch.randn(6, 4), torch.tensor([2, 1, 3])
    want = split_by_lengths(hidden, lengths)
    got, records = dynview_run(split_by_lengths, hidden, lengths)
    torch.testing.assert_close(got, want)
    td = torch._dynamo.explain(split_by_lengths)(hidden, lengths)
    assert sum(r["graph"] is not None for r in records) == td.graph_count


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 compiles a comprehension as a function of its own")
def test_the_comprehension_runs_eagerly_in_a_function_never_captured():
    _, records = dynview_run(values_as_python, x_in())
    names = [r["qualname"] for r in records]
    assert names[0] == "values_as_python" and names[1].startswith("__resume_at_")
    assert not any(n.startswith("__comprehension_at_") for n in names)  # skipped: the break is inside it
    assert records[0]["has_break"] and records[0]["eager_why"] == ""


def comprehension_variable_shadows_a_local(x):
    v = x * 3
    lst = [v.item() for v in x.flatten()]
    return v + 1, lst  # the outer v, put back after the comprehension


def caught_around_the_comprehension(x):
    h = x * 2
    try:
        return [1 / int(v.item() * 0) for v in h.flatten()]
    except ZeroDivisionError:
        return h


def raising_comprehension(x):
    h = x * 2
    r = [1 / int(v.item() * 0) for v in h.flatten()]
    return h, r


def set_and_dict(x):
    h = x.abs()
    s = {int(v.item()) for v in h.flatten()}
    d = {k: r.sum().item() for k, r in enumerate(h)}
    return h - len(s), sorted(s), d


def in_a_loop(x):
    for _ in range(3):
        x = x + sum([v.item() for v in x.flatten()]) * 0
    return x


@pytest.mark.parametrize("fn", [comprehension_variable_shadows_a_local, caught_around_the_comprehension, set_and_dict, in_a_loop],
                         ids=lambda f: f.__name__)
def test_results_equal_eager(fn):
    # (torch.compile 2.13 on 3.12+ raises UnboundLocalError for the first and lets the second's
    # ZeroDivisionError escape the try; dynview's equal eager's)
    want = fn(x_in())
    got, _ = dynview_run(fn, x_in())
    close(got, want)


def test_an_exception_from_the_comprehension_reaches_the_caller_from_its_line():
    with pytest.raises(ZeroDivisionError) as want:
        raising_comprehension(x_in())
    with pytest.raises(ZeroDivisionError) as got:
        dynview.compile(raising_comprehension, backend="eager")(x_in())
    assert str(got.value) == str(want.value)
    lines = [f.lineno for f in got.traceback if f.name in ("raising_comprehension",) or "comprehension" in f.name]
    assert raising_comprehension.__code__.co_firstlineno + 2 in [ln + 1 for ln in lines]
