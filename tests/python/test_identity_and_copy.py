"""id() and copy.deepcopy in the trace: a fake id (of a value made in the trace) never leaves it nor
becomes a number, and deep copies of objects from outside the frame are guarded by what they copy."""
import copy
import functools

import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def _breaks():
    return [(r["break_id"], r["break_message"]) for r in dynview._C.take_records() if r["break_id"]]


def id_used_as_number(x):
    a = [x]
    return x + 1, id(a) % 1, id(a) > 0


def id_returned(x):
    a = [x]
    return x * 2, id(a)


def test_fake_id_arithmetic_breaks_and_equals_eager():
    dynview._C.take_records()
    got = dynview.compile(id_used_as_number, backend="eager")(torch.ones(2))
    want = id_used_as_number(torch.ones(2))
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] == (0, True)
    assert any(b[0] == "DV0018" and "id()" in b[1] for b in _breaks())


def test_fake_id_never_leaves_the_trace():
    got = dynview.compile(id_returned, backend="eager")(torch.ones(2))
    torch.testing.assert_close(got[0], torch.ones(2) * 2)
    assert type(got[1]) is int and got[1] > 0  # a real id, taken by eager code


class Options:
    def __init__(self):
        self.depth = 2
        self.names = ["a"]


OPTS = Options()


def copy_options(x):
    o = copy.deepcopy(OPTS)
    o.names.append("b")
    return x * o.depth, o.names


def test_deepcopy_of_global_object_is_guarded_by_its_attributes():
    cf = dynview.compile(copy_options, backend="eager")
    try:
        for depth, names in ((2, ["a"]), (3, ["a"]), (3, ["a", "c"])):
            OPTS.depth, OPTS.names = depth, names
            got, want = cf(torch.ones(2)), copy_options(torch.ones(2))
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1] == names + ["b"]
            assert OPTS.names == names  # the original is untouched
        OPTS.extra = 1  # a new attribute: the copy has it too
        assert vars(copy.deepcopy(OPTS)) == {"depth": 3, "names": ["a", "c"], "extra": 1}
        got = cf(torch.ones(2))
        assert got[1] == ["a", "c", "b"]
    finally:
        OPTS.depth, OPTS.names = 2, ["a"]
        OPTS.__dict__.pop("extra", None)


def test_deepcopy_of_tensor_breaks_like_torch_dynamo():
    def f(x):
        return copy.deepcopy(x * 2) + 1

    dynview._C.take_records()
    torch.testing.assert_close(dynview.compile(f, backend="eager")(torch.ones(2)), torch.full((2,), 3.0))
    assert any(b[0] == "DV0004" and "deepcopy of a tensor" in b[1] for b in _breaks())


def make_scaler(x):
    scale = x.sum()
    return functools.partial(torch.mul, other=scale), x + 1


def test_partial_made_in_the_trace_escapes_and_calls_like_eager():
    cf = dynview.compile(make_scaler, backend="eager")
    x = torch.arange(3.0)
    got, want = cf(x), make_scaler(x)
    assert isinstance(got[0], functools.partial) and got[0].func is torch.mul
    torch.testing.assert_close(got[0](torch.ones(3)), want[0](torch.ones(3)))
    torch.testing.assert_close(got[1], want[1])
