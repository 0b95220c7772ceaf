"""Frames split at graph breaks: cache soundness across closures, globals and defaults of one code
object; one compile per code object across threads; tracebacks through resume functions; the
recorded resume chain; fullgraph still raising."""
import contextlib
import io
import threading
import traceback

import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")
SINK = io.StringIO()


def make_adder(t):
    def f(x):
        return x + t
    return f


def make_adder_with_break(t):
    def f(x):
        y = x + t
        print("between", file=SINK)
        return y * t
    return f


def test_closure_of_another_function_object_is_not_reused():
    a = dynview.compile(make_adder(torch.ones(3)), backend="eager")
    b = dynview.compile(make_adder(torch.full((3,), 10.0)), backend="eager")
    torch.testing.assert_close(a(torch.zeros(3)), torch.ones(3))
    torch.testing.assert_close(b(torch.zeros(3)), torch.full((3,), 10.0))
    torch.testing.assert_close(a(torch.zeros(3)), torch.ones(3))


def test_closure_constant_and_split_frame():
    for k in (2.0, 5.0, 2.0):
        t = torch.full((3,), k)
        f = make_adder_with_break(t)
        torch.testing.assert_close(dynview.compile(f, backend="eager")(torch.ones(3)), f(torch.ones(3)))

    def make_scale(k):
        def g(x):
            return x * k
        return g
    for k in (2, 3, 2):
        torch.testing.assert_close(dynview.compile(make_scale(k), backend="eager")(torch.ones(2)), torch.full((2,), float(k)))


G = torch.ones(3)


def add_global(x):
    return x + G


def test_global_changed_between_calls():
    global G
    f = dynview.compile(add_global, backend="eager")
    torch.testing.assert_close(f(torch.zeros(3)), torch.ones(3))
    G = torch.full((3,), 10.0)
    try:
        torch.testing.assert_close(f(torch.zeros(3)), torch.full((3,), 10.0))
    finally:
        G = torch.ones(3)


def make_default(t):
    def f(x, s=t):
        return x + s
    return f


def test_default_argument_of_another_function_object():
    a = dynview.compile(make_default(torch.ones(3)), backend="eager")
    b = dynview.compile(make_default(torch.full((3,), 7.0)), backend="eager")
    torch.testing.assert_close(a(torch.zeros(3)), torch.ones(3))
    torch.testing.assert_close(b(torch.zeros(3)), torch.full((3,), 7.0))


def mlp_like(x):
    return torch.relu(x @ x.T).sum(0) + 1


def test_one_compile_across_threads():
    f = dynview.compile(mlp_like, backend="eager")
    x = torch.randn(8, 8)
    dynview._C.take_records()
    results, errors = [], []
    start = threading.Barrier(4)

    def worker():
        try:
            start.wait()
            results.append(f(x))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for r in results:
        torch.testing.assert_close(r, mlp_like(x))
    records = dynview._C.take_records()
    assert [r["compile_id"] for r in records] == ["[0/0]"], records
    assert len(dynview._C.cache_entries(mlp_like.__code__)) == 1


def raises_on_negative(t):
    if t < 0:
        raise ValueError("negative")
    return t


def split_then_raise(x):
    y = x.sum()
    print("checking", file=SINK)
    return raises_on_negative(y.item())


def test_traceback_through_resume_function_points_at_user_lines():
    f = dynview.compile(split_then_raise, backend="eager")
    assert f(torch.ones(2)) == 2.0
    with pytest.raises(ValueError) as info:
        f(-torch.ones(2))
    frames = traceback.extract_tb(info.value.__traceback__)
    mine = [(fs.name, fs.lineno) for fs in frames if fs.filename == __file__]
    call_line = split_then_raise.__code__.co_firstlineno + 3
    raise_line = raises_on_negative.__code__.co_firstlineno + 2
    assert ("raises_on_negative", raise_line) in mine
    assert any(line == call_line for _, line in mine), mine


def two_breaks(x):
    a = x + 1
    print("one", file=SINK)
    b = a * 2
    print("two", file=SINK)
    return b - 1


def test_trace_holds_the_resume_chain(tmp_path):
    path = tmp_path / "chain.dyn"
    with dynview.record(path):
        f = dynview.compile(two_breaks, backend="eager")
        f(torch.ones(3))
        f(torch.ones(3))
    t = dynview.load_trace(path)
    ids = [c.id for c in t.compiles]
    assert ids == ["0/0", "1/0", "2/0"], ids
    assert t.compiles[1].reason.startswith("resume function of [0/0] after the graph break at " + __file__)
    assert t.compiles[2].reason.startswith("resume function of [1/0] after the graph break at " + __file__)
    assert all(len(c.graphs) == 1 for c in t.compiles)
    assert [len(c.breaks) for c in t.compiles] == [1, 1, 0]
    assert t.compiles[1].qualname.startswith("__resume_at_") and t.compiles[2].qualname.startswith("__resume_at_")
    hits = [e for e in t.runtime if e.get("kind") == "hit"]
    assert len(hits) >= 3, "the repeat call hits the frame and both resume functions"


def test_fullgraph_still_raises_at_the_first_break():
    f = dynview.compile(two_breaks, backend="eager", fullgraph=True)
    with pytest.raises(dynview.Unsupported) as info:
        f(torch.ones(3))
    assert info.value.break_id == "DV0015"
    assert info.value.lineno == two_breaks.__code__.co_firstlineno + 2


def test_resume_functions_hit_their_caches():
    f = dynview.compile(two_breaks, backend="eager")
    f(torch.ones(3))
    dynview._C.take_records()
    for _ in range(3):
        torch.testing.assert_close(f(torch.ones(3)), two_breaks(torch.ones(3)))
    assert dynview._C.take_records() == []
    (entry,) = dynview._C.cache_entries(two_breaks.__code__)
    assert entry["hits"] == 3


def test_viewer_shows_the_resume_chain(tmp_path):
    from test_viewer import script
    path = str(tmp_path / "viewer_chain.dyn")
    with dynview.record(path):
        dynview.compile(two_breaks, backend="eager")(torch.ones(3))
    t = dynview.load_trace(path)
    out = script(path, ["click compile 0", "click compile 1", "click compile 2"], tmp_path)
    first, second, third = (o["state"] for o in out)
    # the rewritten-bytecode pane of a split frame: its transformed code and the resume function it calls
    assert first["generated_code"][0] == "__transformed_code_two_breaks"
    assert first["generated_code"][1] == t.compiles[1].qualname
    assert any("graph break DV0015" in w for w in first["why"])
    assert any(w.startswith("[1/0] is a resume function of [0/0] after the graph break at") for w in second["why"])
    assert second["generated_code"][1] == t.compiles[2].qualname
    assert any(w.startswith("[2/0] is a resume function of [1/0]") for w in third["why"])


class WrapsAdaptiveSoftmax(torch.nn.Module):
    # (a GRU was the example once; RNN modules are now not traced at all, as under torch.compile)
    def __init__(self):
        super().__init__()
        self.head = torch.nn.AdaptiveLogSoftmaxWithLoss(4, 10, cutoffs=[4])

    def forward(self, x, target):
        out = self.head(x, target)  # its forward breaks inside torch: nonzero() has a data-dependent size
        return out.loss * 2


def test_break_inside_torch_code_is_reported_at_the_users_line():
    torch.manual_seed(0)
    m = WrapsAdaptiveSoftmax()
    x, target = torch.randn(6, 4), torch.tensor([0, 5, 2, 7, 9, 1])
    dynview._C.take_records()
    torch.testing.assert_close(dynview.compile(m, backend="eager")(x, target), m(x, target))
    r = next(r for r in dynview._C.take_records() if r["has_break"])
    assert r["break_line"] == WrapsAdaptiveSoftmax.forward.__code__.co_firstlineno + 1  # `out = self.head(x, target)`
    assert "torch/nn/modules/adaptive.py:" in r["break_message"]  # where in the library it broke
    assert r["break_stack"][0].startswith(__file__ + ":")


def scaled(x):
    return x * 2


def test_recompile_reason_lists_every_cache_entry():
    f = dynview.compile(scaled, backend="eager")
    for dt in (torch.float32, torch.float64, torch.float16):
        f(torch.ones(2, dtype=dt))
    reason = dynview._C.take_records()[-1]["reason"]
    assert "- 0/1: " in reason and "- 0/0: " in reason, reason
    assert reason.index("- 0/1: ") < reason.index("- 0/0: ")  # most recently used first


def keeps_kwargs(func):
    def wrapper(self, *args, **kwargs):  # self and kwargs are cells (the comprehension), func is free
        kwargs.pop("return_dict", True)
        print("first", file=SINK)
        keys = {k: kwargs.get(k, self) for k in ("scale",)}
        print("second", file=SINK)
        try:
            out = func(self, *args, **kwargs)
        finally:
            keys.clear()
        return out
    return wrapper


@keeps_kwargs
def scaled_relu(self, x, scale=1.0):
    return torch.relu(x) * scale


def test_decorator_wrapper_with_cells_free_variables_and_two_breaks():
    """Arguments that are cells, a free variable and a resume function that breaks again (its own
    stack arguments stay distinct): the shape of transformers' output-capturing wrappers (a crash
    before the free variable was kept out of the cells passed across the break)."""
    f = dynview.compile(scaled_relu, backend="eager")
    x = torch.randn(5)
    for _ in range(2):
        torch.testing.assert_close(f(1, x, return_dict=False, scale=2.0), scaled_relu(1, x, return_dict=False, scale=2.0))
    assert len(dynview._C.cache_entries(scaled_relu.__code__)) == 1  # the wrapper frame: one entry, hit


class _Scale:
    factor = 2.0


SCALE = _Scale()


def _scaled_then_print(y):
    z = y * SCALE.factor
    print("inside", file=SINK)
    return z


def break_in_helper(x):
    y = x + 1
    return _scaled_then_print(y)


def test_recorded_guards_of_a_split_compile_are_the_entrys(tmp_path):
    # The first trace inlines the helper (reading SCALE.factor) before it meets the break; the
    # compile that splits the frame stops at the call of the helper, so its entry does not guard
    # SCALE, and the trace must show the guards the entry keeps, not the first trace's.
    path = tmp_path / "split_guards.dyn"
    with dynview.record(path):
        f = dynview.compile(break_in_helper, backend="eager")
        torch.testing.assert_close(f(torch.ones(3)), break_in_helper(torch.ones(3)))
    (entry,) = dynview._C.cache_entries(break_in_helper.__code__)
    t = dynview.load_trace(path)
    recorded = [g["text"] for g in t.compiles[0].guards]
    assert recorded == entry["guards"]
    assert not any("SCALE" in g for g in recorded)
    assert any("SCALE" in g for c in t.compiles[1:] for g in (x["text"] for x in c.guards)), \
        "the helper's own frame, captured by the hook, guards SCALE"


def add_into_first(a, b):
    a.add_(1)
    return b * 2


@pytest.mark.parametrize("first,second", [("same", "distinct"), ("distinct", "same")])
def test_tensor_aliasing_between_arguments_is_guarded(first, second):
    # A capture made with f(x, x) sees one tensor; one made with f(x, y) two. Reusing either for
    # the other call would give a wrong result: the guards tell them apart (TorchDynamo's
    # DUPLICATE_INPUT and NO_TENSOR_ALIASING), so each call compiles once and equals eager.
    def args(kind):
        x = torch.zeros(3)
        return (x, x) if kind == "same" else (x, torch.zeros(3))

    f = dynview.compile(add_into_first, backend="eager")
    for kind in (first, second, first, second):
        got_args, want_args = args(kind), args(kind)
        torch.testing.assert_close(f(*got_args), add_into_first(*want_args))
        torch.testing.assert_close(got_args[0], want_args[0])
    entries = dynview._C.cache_entries(add_into_first.__code__)
    assert len(entries) == 2
    texts = [g for e in entries for g in e["guards"]]
    assert "L['b'] is L['a']" in texts
    assert "___check_no_aliasing(L['a'], L['b'])" in texts


# ---- closures made in the frame across a split (issue 14) ----

def shared_cell_after_split(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count
    y = bump(x)
    print("split", file=SINK)
    count += 10  # the resumed code writes the cell: bump sees it
    y = bump(y)  # bump writes it: the resumed code sees it
    return y, count, bump


def test_cell_shared_by_inner_function_and_resumed_code():
    x = torch.zeros(3)
    cf = dynview.compile(shared_cell_after_split, backend="eager")
    for _ in range(2):
        got_y, got_count, got_bump = cf(x)
        want_y, want_count, want_bump = shared_cell_after_split(x)
        torch.testing.assert_close(got_y, want_y)
        assert got_count == want_count == 12
        # the returned closure holds the one cell both sides wrote
        assert got_bump.__closure__[0].cell_contents == 12
        torch.testing.assert_close(got_bump(x), want_bump(x))
        assert got_bump.__closure__[0].cell_contents == 13
    e = dynview.explain(shared_cell_after_split)(x)
    assert (e.graph_count, len(e.break_reasons)) == (2, 1)


def make_counter():
    calls = 0

    def step(x):
        nonlocal calls
        calls += 1
        return x * calls

    def step_with_break(x):
        nonlocal calls
        calls += 1
        y = x * calls
        print("counted", file=SINK)
        calls += 1
        return y + calls

    def get():
        return calls
    return step, step_with_break, get


@pytest.mark.parametrize("which", [0, 1])
def test_nonlocal_write_to_the_frames_free_variable_is_replayed(which):
    fns, eager = make_counter(), make_counter()
    cf = dynview.compile(fns[which], backend="eager")
    x = torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(cf(x), eager[which](x))
        assert fns[2]() == eager[2]()


_outside_step, _, _outside_get = make_counter()


def calls_a_closure_defined_outside(x):
    return _outside_step(x) + 1


def test_nonlocal_write_of_an_outside_closure_is_replayed_on_its_cell():
    # the inlined closure's write goes to its own real cell (not the frame's) after the graph, as
    # TorchDynamo replays it: the counter moves once per call, and no break
    before = _outside_get()
    cf = dynview.compile(calls_a_closure_defined_outside, backend="eager")
    x = torch.ones(2)
    dynview._C.take_records()
    for k in range(1, 4):
        torch.testing.assert_close(cf(x), x * (before + k) + 1)
        assert _outside_get() == before + k
    recs = dynview._C.take_records()
    assert recs and not [r["break_message"] for r in recs if r["break_id"]], recs


def closure_returned_after_rebind(x):
    n = 1

    def get():
        return n * x
    y = get()
    print("rebind", file=SINK)
    n = 7
    return y, get


def test_closure_returned_sees_the_rebound_cell():
    cf = dynview.compile(closure_returned_after_rebind, backend="eager")
    x = torch.ones(2)
    for _ in range(2):
        y, get = cf(x)
        torch.testing.assert_close(y, x)
        torch.testing.assert_close(get(), x * 7)


def returns_closure_without_break(x):
    bias = x.sum()

    def add(t):
        return t + bias
    return add


def test_closure_made_in_the_trace_is_returned():
    cf = dynview.compile(returns_closure_without_break, backend="eager")
    x = torch.ones(2)
    for _ in range(2):
        torch.testing.assert_close(cf(x)(x), returns_closure_without_break(x)(x))
    e = dynview.explain(returns_closure_without_break)(x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0)


def test_closure_across_a_split_compiles_once():
    # the closure passed to the resume function is new on every call: guarded by its code and by
    # its cell being the resume function's own (TorchDynamo's CLOSURE_MATCH), not by its identity
    cf = dynview.compile(shared_cell_after_split, backend="eager")
    x = torch.zeros(3)
    cf(x)
    dynview._C.take_records()
    for _ in range(3):
        cf(x)
    assert dynview._C.take_records() == [], "repeat calls compile nothing"


def make_pair(t):
    n = t

    def g(x, fn):
        nonlocal n
        n = n + 1  # the frame writes its free variable ...
        return fn(x)  # ... which fn reads when fn closes over the same cell

    def inner(x):
        return x * n
    return g, inner


def test_closure_sharing_the_frames_cell_is_guarded():
    g1, inner1 = make_pair(torch.ones(2))
    _, inner2 = make_pair(torch.ones(2))
    e1, e_inner1 = make_pair(torch.ones(2))
    _, e_inner2 = make_pair(torch.ones(2))
    cg = dynview.compile(g1, backend="eager")
    x = torch.ones(2)
    for fn, efn in ((inner1, e_inner1), (inner2, e_inner2), (inner1, e_inner1), (inner2, e_inner2)):
        torch.testing.assert_close(cg(x, fn), e1(x, efn))


def take_two_around_a_print(x, ws):
    it = iter(ws)
    a = x * next(it)
    print("one taken")
    return a * next(it), it


def test_an_iterator_living_across_a_break_is_rebuilt_and_taken_from_in_the_resume_function(capsys):
    # As TorchDynamo: iter((the items not taken,)) crosses into the resume function, whose graph takes
    # the next item through ___tuple_iterator_getitem, guarded by how many remain; the iterator
    # handed back has given exactly what eager's has.
    c = dynview.compile(take_two_around_a_print)
    for ws in ([torch.ones(3), torch.full((3,), 2.0), torch.zeros(3)], [torch.ones(3), torch.full((3,), 3.0)]):
        for _ in range(2):
            x = torch.randn(3)
            (got, got_it), (want, want_it) = c(x, list(ws)), take_two_around_a_print(x, list(ws))
            torch.testing.assert_close(got, want)
            rest, want_rest = list(got_it), list(want_it)
            assert len(rest) == len(want_rest) == len(ws) - 2
            for a, b in zip(rest, want_rest):
                torch.testing.assert_close(a, b)
    records = dynview._C.take_records()
    resumed = [r for r in records if r["qualname"].startswith("__resume")]
    assert resumed and all(r["break_id"] == "" and r["graph"] is not None for r in resumed)
    # a second call with the same lengths hit the cache: one compile of each frame per list length
    assert len([r for r in records if r["qualname"] == "take_two_around_a_print"]) == 2
    guards = [g for r in resumed for g in r["guards"]]
    assert any("___tuple_iterator_len(L['it']) == 2" in g for g in guards), guards


def optional_no_grad(x, frozen):
    # an inference helper's optional context: a torch.no_grad() entered on an ExitStack (the stack, and
    # the no_grad object eager makes on each call, reach the resume function after the break)
    with contextlib.ExitStack() as stack:
        if frozen:
            stack.enter_context(torch.no_grad())
        y = x * 2
    return y + x, y.requires_grad, torch.is_grad_enabled()


def test_a_no_grad_object_made_on_each_call_does_not_recompile_the_resume_function():
    compiled = dynview.compile(optional_no_grad, backend="eager")
    dynview._C.take_records()
    for call in range(4):
        x = torch.randn(3, requires_grad=True)
        got, want = compiled(x, True), optional_no_grad(x, True)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] == (False, True)
        if call == 0:
            first = dynview._C.take_records()
            assert any(r["has_break"] for r in first), "the frame breaks inside the with-block"
    # after the first call, every call hits the caches (the no_grad object is guarded by its type,
    # not by the identity of the first call's)
    assert dynview._C.take_records() == []
