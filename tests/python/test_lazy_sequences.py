"""Lists and tuples from the frame are read lazily, as TorchDynamo's LazyVariableTracker: one only
passed along (returned, kept in a local, handed to an inlined function) is rebuilt from where it
came from and adds no guard on its items; len(l) guards its length alone and l[k] its length and
item k alone; anything else reads all of it. Each case against eager (values, identity, mutated
arguments, exceptions) and torch.compile's compile counts on the same calls."""
import copy

import pytest
import torch

import dynview
from test_engine_behaviour import counting_dynamo


@pytest.fixture(autouse=True)
def _reset():
    dynview.reset()
    torch._dynamo.reset()
    yield
    dynview.reset()
    torch._dynamo.reset()


def same(a, b):
    """Equal as eager's: tensors by value, containers item by item, anything else by ==."""
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for p, q in zip(a, b):
            same(p, q)
    else:
        assert a == b, (a, b)


def run_with_records(fn, calls):
    """Each call through eager, torch.compile and dynview (fresh copies of its list arguments for
    each): values and mutated arguments equal eager's. Returns dynview's records of the calls and
    torch.compile's number of graphs."""
    td, n_td = counting_dynamo(fn)
    dv = dynview.compile(fn, backend="eager")
    dynview._C.take_records()
    for make in calls:
        want_args, td_args, dv_args = make(), make(), make()
        want = fn(*want_args)
        same(td(*td_args), want)
        same(dv(*dv_args), want)
        same(dv_args, want_args)  # arguments changed as eager changes them
    return dynview._C.take_records(), n_td[0]


def run_both(fn, calls):
    """run_with_records: the numbers of graphs compiled by dynview and torch.compile."""
    records, n_td = run_with_records(fn, calls)
    return len([r for r in records if r["graph"] is not None]), n_td


X = torch.ones(3)


def returned_with_the_result(x, sizes):
    return x + 1, sizes


def test_a_list_only_returned_adds_no_guard_on_its_items():
    calls = [lambda: (X, [1, 2]), lambda: (X, [3, 4]), lambda: (X, ["a", None])]
    assert run_both(returned_with_the_result, calls) == (1, 1)
    lst = [5, 6]
    out = dynview.compile(returned_with_the_result, backend="eager")(X, lst)
    assert out[1] is lst  # the caller's list itself, rebuilt from its source
    guards = dynview._C.cache_entries(returned_with_the_result.__code__)[0]["guards"]
    assert not [g for g in guards if "L['sizes'][" in g], guards


def routes(x):
    # a MoE gate's shape (transformers' JetMoE): counts per expert leave through tolist(), a graph
    # break, and the rest of the function only hands the list back
    counts = (x > 0).long().sum(0).tolist()
    order = x.sort(0).values
    return order * 2, counts


def test_a_tolist_result_handed_across_a_graph_break_does_not_recompile():
    calls = [lambda s=s: (torch.randn(6, 4, generator=torch.Generator().manual_seed(s)),) for s in range(4)]
    got, want = run_both(routes, calls)
    assert got == want == 2  # the graph before the break and the resume function's, once each


def first_item(x, lst):
    return x * lst[0]


def last_item(x, pair):
    return x * pair[-1]


def length(x, lst):
    return x * len(lst)


@pytest.mark.parametrize("fn,calls", [
    (first_item, [lambda: (X, [1, 2]), lambda: (X, [1, 3]), lambda: (X, [2, 3]), lambda: (X, [2, 3, 4])]),
    (last_item, [lambda: (X, (torch.ones(2), 2.0)), lambda: (X, (torch.ones(5, 5), 2.0)), lambda: (X, (None, 3.0))]),
    (length, [lambda: (X, [1, 2]), lambda: (X, [3, 4]), lambda: (X, [5])]),
], ids=["l[0]", "t[-1]", "len"])
def test_reading_one_item_or_the_length_guards_only_that(fn, calls):
    got, want = run_both(fn, calls)
    assert got == want


def out_of_range(x, lst):
    try:
        return x * lst[5]
    except IndexError:
        return x - 1


def test_an_index_past_the_end_raises_as_eager():
    assert run_both(out_of_range, [lambda: (X, [1, 2]), lambda: (X, [1, 2, 3, 4, 5, 6])])[0] >= 1

    def raises(x, lst):
        return x * lst[2]
    with pytest.raises(IndexError):
        dynview.compile(raises, backend="eager")(X, [1])


def read_then_extended(x, lst):
    a = lst[0]
    lst.append(a * 2)
    return x * a + len(lst)


def aliased(x, a, b):
    a.append(7)
    return x + len(b), b[-1]


def test_a_list_read_in_part_then_changed_is_written_back_whole():
    assert run_both(read_then_extended, [lambda: (X, [2, 9]), lambda: (X, [3, 9, 9])])[0] >= 1
    shared = [1]
    want_shared = [1]
    want = aliased(X, want_shared, want_shared)
    got = dynview.compile(aliased, backend="eager")(X, shared, shared)
    torch.testing.assert_close(got, want)
    assert shared == want_shared == [1, 7]


class Cfg:
    def __init__(self):
        self.tags = ["base"]
        self.sizes = (2, [3, 4])


def copies_config(x, cfg):
    c = copy.deepcopy(cfg)
    c.tags.append("copy")
    c.sizes[1].append(5)
    return x * len(c.tags), c.tags, c.sizes, cfg.tags, cfg.sizes


def test_deepcopy_of_an_object_holding_lists_copies_them_whole():
    cfg = Cfg()
    want = copies_config(X, Cfg())
    got = dynview.compile(copies_config, backend="eager")(X, cfg)
    assert got[1:] == want[1:] and cfg.tags == ["base"] and cfg.sizes == (2, [3, 4])
    torch.testing.assert_close(got[0], want[0])


def test_a_list_that_holds_itself_runs_as_eager_does():
    def inner_len(x, lst):
        return x * len(lst[1]), lst[0]
    lst = [3]
    lst.append(lst)
    got = dynview.compile(inner_len, backend="eager")(X, lst)
    want = inner_len(X, lst)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == 3
