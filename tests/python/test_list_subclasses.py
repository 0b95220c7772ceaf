"""Objects of list subclasses (a class of Python code whose one builtin base is list) inside captured
code: made in the trace or passed in, their own methods and list's, item writes replayed on the
caller's object past the class's overrides. Compared with eager and with torch.compile's compile
counts on the same calls."""
import copy

import pytest
import torch

import dynview
from counting import counting_backend


pytestmark = pytest.mark.usefixtures("fresh_engine")


class Recorder(list):
    """Refuses item assignment from outside: the replay of the trace's changes must not go through it."""

    def __setitem__(self, i, value):
        raise RuntimeError("Recorder items are append-only")

    def record(self, t):
        self.append(t.detach())
        self.seen = len(self)


def records_and_rewrites(x, rec):
    rec.record(x * 2)
    rec.insert(0, x.sum())
    del rec[-1]
    rec.extend([x + 1])
    return x * len(rec)


def _compiled_calls(compiler, fn, calls):
    backend, n = counting_backend()
    cf = compiler(fn, backend)
    results, counts = [], []
    for args in calls:
        results.append((cf(*args), args))
        counts.append(n[0])
    return results, counts


def test_a_list_subclass_argument_changed_in_the_trace_is_the_callers_object():
    def calls():
        return [(torch.ones(3) * i, Recorder([torch.zeros(3)] * (1 + i // 2))) for i in range(4)]

    eager = []
    for x, rec in calls():
        eager.append((records_and_rewrites(x, rec), rec))
    torch._dynamo.reset()
    _, td_counts = _compiled_calls(lambda f, b: torch.compile(f, backend=b), records_and_rewrites, calls())
    got, dv_counts = _compiled_calls(lambda f, b: dynview.compile(f, backend=b), records_and_rewrites, calls())
    for (out, (_, rec)), (want, want_rec) in zip(got, eager):
        torch.testing.assert_close(out, want)
        assert type(rec) is Recorder
        torch.testing.assert_close(list(rec), list(want_rec))
        assert rec.seen == want_rec.seen
    assert dv_counts == td_counts  # a new length is a new compile, as under torch.compile
    assert dynview.explain(records_and_rewrites)(*calls()[0]).graph_break_count == 0


class Stages(list):
    def __init__(self, items, name):
        super().__init__(items)
        self.name = name

    def total(self):
        return sum(self)


def builds_and_returns(x):
    s = Stages([x, x * 2], "enc")
    s.append(s.total())
    s.name = s.name + str(len(s))
    return s


def test_a_list_subclass_made_in_the_trace_escapes_with_its_items_and_attributes():
    x = torch.randn(3)
    want = builds_and_returns(x)
    backend, n = counting_backend()
    cf = dynview.compile(builds_and_returns, backend=backend)
    for _ in range(2):
        got = cf(x)
        assert type(got) is Stages and got.name == want.name == "enc3"
        torch.testing.assert_close(list(got), list(want))
    assert n[0] == 1
    assert dynview.explain(builds_and_returns)(x).graph_break_count == 0


class Lookup(list):  # its own item access: the guards could not read its items through it
    def __getitem__(self, i):
        return list.__getitem__(self, i) * 10


def reads_lookup(x, table):
    return x + table[1]


def test_a_list_subclass_with_its_own_item_access_is_read_as_eager_reads_it():
    calls = [(torch.ones(2), Lookup([1.0, 2.0])), (torch.ones(2), Lookup([1.0, 3.0]))]
    cf = dynview.compile(reads_lookup, backend="eager")
    for x, table in calls:
        torch.testing.assert_close(cf(x, copy.copy(table)), reads_lookup(x, table))


def repeats_in_place(x, frames, n):
    # a window of frames repeated in place (list.__imul__): the caller's object, its items the same
    # tensors n times; and one made in the trace, emptied by a count below one
    frames *= n
    made = Stages([x, x + 1], "tmp")
    made *= n - 2
    return x * len(frames) + len(made), made


def test_in_place_repetition_of_a_list_subclass():
    def calls():
        t = torch.ones(2)
        return [(t, Recorder([t, t * 2]), 2), (t, Recorder([t, t * 2]), 3), (t, Recorder([t]), 3)]

    eager = [(repeats_in_place(*args), args[1]) for args in calls()]
    torch._dynamo.reset()
    _, td_counts = _compiled_calls(lambda f, b: torch.compile(f, backend=b), repeats_in_place, calls())
    got, dv_counts = _compiled_calls(lambda f, b: dynview.compile(f, backend=b), repeats_in_place, calls())
    for ((out, made), (_, frames, _)), ((want, want_made), want_frames) in zip(got, eager):
        torch.testing.assert_close(out, want)
        assert type(made) is Stages and made.name == want_made.name
        torch.testing.assert_close(list(made), list(want_made))
        assert type(frames) is Recorder and len(frames) == len(want_frames)
        torch.testing.assert_close(list(frames), list(want_frames))
    first = got[0][1][1]  # Recorder([t, t * 2]) *= 2: the same two tensor objects twice, as list.__imul__
    assert first[0] is first[2] and first[1] is first[3] and first[0] is not first[1]
    assert dv_counts == td_counts
    assert dynview.explain(repeats_in_place)(*calls()[0]).graph_break_count == 0
