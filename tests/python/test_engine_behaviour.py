"""Cache, guards and recompiles, limits, reset, fullgraph, threads, exceptions, refcounts, memory
and DYNVIEW_LOGS -- each checked against eager and, where it is about recompiling, against
torch.compile counted with a backend that counts its calls."""
import functools
import os
import subprocess
import sys
import threading
import traceback
import warnings

import pytest
import torch

import dynview

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(autouse=True)
def _reset():
    dynview.reset()
    dynview.config.recompile_limit = 8
    dynview.config.fail_on_recompile_limit = False
    yield
    dynview.reset()
    dynview.config.recompile_limit = 8
    dynview.config.fail_on_recompile_limit = False


def run_child(script, **env):
    """The script run by a new interpreter with this checkout's dynview (its crash is its exit code)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)


def fn(x, k):
    return torch.sin(x) * k + x.sum(dim=-1, keepdim=True)


def counting_dynamo(f):
    torch._dynamo.reset()
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward
    return torch.compile(f, backend=backend), n


def dynview_compiles():
    return len([r for r in dynview._C.take_records() if r["graph"] is not None])


SEQUENCES = {
    "repeat": [(torch.randn(3, 4), 2), (torch.randn(3, 4), 2), (torch.randn(3, 4), 2)],
    "dtype": [(torch.randn(3, 4), 2), (torch.randn(3, 4, dtype=torch.float64), 2)],
    "shape_once": [(torch.randn(3, 4), 2), (torch.randn(5, 4), 2)],
    "requires_grad": [(torch.randn(3, 4), 2), (torch.randn(3, 4, requires_grad=True), 2)],
    "constant": [(torch.randn(3, 4), 2), (torch.randn(3, 4), 3)],
    "grad_mode": None,
}


@pytest.mark.parametrize("kind", [k for k, v in SEQUENCES.items() if v is not None])
def test_recompiles_exactly_when_torch_compile_does(kind):
    calls = SEQUENCES[kind]
    td, n_td = counting_dynamo(fn)
    dv = dynview.compile(fn, backend="eager")
    dynview._C.take_records()
    for x, k in calls:
        torch.testing.assert_close(dv(x, k), fn(x, k))
        torch.testing.assert_close(td(x, k), fn(x, k))
    assert dynview_compiles() == n_td[0], kind
    entries = dynview._C.cache_entries(fn.__code__)
    assert sum(e["hits"] for e in entries) == len(calls) - len(entries)


def _apply_act(x, act):
    return act(x) + 1


def _read_act(x, act):
    return x * 2 if act.keywords.get("approximate") == "tanh" else x * 3


def _call_act_parts(x, act):
    return act.func(x, *act.args, **act.keywords)


class _GatedLayer(torch.nn.Module):
    # each layer holds its own partial, as transformers' activations do (gelu_pytorch_tanh)
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.act_fn = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def forward(self, x):
        return self.act_fn(self.proj(x))


@pytest.mark.parametrize("f", [_apply_act, _read_act, _call_act_parts], ids=lambda f: f.__name__)
def test_a_partial_is_guarded_by_what_it_holds_not_its_identity(f):
    # equal partials (one per layer) share a compile; another keyword or function recompiles, as torch.compile
    acts = [functools.partial(torch.nn.functional.gelu, approximate="tanh"),
            functools.partial(torch.nn.functional.gelu, approximate="tanh"),
            functools.partial(torch.nn.functional.gelu, approximate="none"), functools.partial(torch.sigmoid)]
    td, n_td = counting_dynamo(f)
    dv = dynview.compile(f, backend="eager")
    dynview._C.take_records()
    for act in acts + acts:
        x = torch.randn(4)
        torch.testing.assert_close(dv(x, act), f(x, act))
        torch.testing.assert_close(td(x, act), f(x, act))
    assert dynview_compiles() == n_td[0] == 3


def test_layers_with_their_own_partials_share_one_compile():
    torch.manual_seed(0)
    layers = [_GatedLayer(), _GatedLayer()]
    td_n = counting_dynamo(lambda x: x)[1]
    dynview._C.take_records()
    x = torch.randn(2, 4)
    for layer in layers:
        torch.testing.assert_close(dynview.compile(layer, backend="eager")(x), layer(x))
    torch._dynamo.reset()

    def backend(gm, example_inputs):
        td_n[0] += 1
        return gm.forward
    for layer in layers:
        torch.testing.assert_close(torch.compile(layer, backend=backend)(x), layer(x))
    assert dynview_compiles() == td_n[0] == 1


def test_grad_mode_is_guarded():
    x = torch.randn(3, requires_grad=True)
    dv = dynview.compile(lambda t: t * 2, backend="eager")
    dynview._C.take_records()
    a = dv(x)
    with torch.no_grad():
        b = dv(x)
    assert a.requires_grad and not b.requires_grad
    recs = dynview._C.take_records()
    assert len(recs) == 2 and "GLOBAL_STATE" in recs[1]["reason"] and "grad_mode" in recs[1]["reason"]


def _no_grad_then_grad(x):
    with torch.no_grad():
        a = x.sin()
    with torch.enable_grad():
        b = x.cos()
    return a + b, a.requires_grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_grad_mode_blocks_are_in_the_graph(backend):
    # the ops of a no_grad block inside the graph record no gradient (the graph switches grad mode
    # where the code does): x.grad equals eager's
    dv = dynview.compile(_no_grad_then_grad, backend=backend)
    x, y = torch.randn(4, requires_grad=True), None
    y = x.detach().clone().requires_grad_()
    (got, got_rg), (want, want_rg) = dv(x), _no_grad_then_grad(y)
    torch.testing.assert_close(got, want)
    assert got_rg == want_rg is False and torch.is_grad_enabled()
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(x.grad, y.grad)
    gm = dynview.explain(_no_grad_then_grad)(x).graphs[0]
    assert [n.args for n in gm.graph.nodes if n.target is torch._C._set_grad_enabled] == [(False,), (True,), (True,), (True,)]


def test_recompile_message_names_the_failing_guard():
    dv = dynview.compile(fn, backend="eager")
    dv(torch.randn(3, 4), 2)
    dv(torch.randn(3, 4, dtype=torch.float64), 2)
    dv(torch.randn(3, 4, dtype=torch.float64), 5)
    recs = dynview._C.take_records()
    assert recs[0]["reason"] == "first call"
    r1 = recs[1]["reason"].splitlines()
    assert r1[0] == f"Recompiling function fn in {__file__}:{fn.__code__.co_firstlineno}"
    assert r1[1].strip() == "triggered by the following guard failure(s):"
    assert r1[2].strip() == "- 0/0: tensor 'L['x']' dtype mismatch. expected Float, actual Double"
    assert "L['k'] == 2" in recs[2]["reason"]
    assert recs[2]["compile_id"] == "[0/2]"


def test_recompile_limit_warns_once_and_runs_eagerly():
    dynview.config.recompile_limit = 2
    # dynamic=False: every new size is a recompile (with automatic dynamic shapes the second size
    # would make the batch dimension symbolic and the limit would never be reached).
    dv = dynview.compile(fn, backend="eager", dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, 7):
            x = torch.randn(n, 4)
            torch.testing.assert_close(dv(x, 2), fn(x, 2))
    limit = [x for x in w if "recompile_limit" in str(x.message)]
    assert len(limit) == 1
    assert "size mismatch" in str(limit[0].message)
    assert len(dynview._C.cache_entries(fn.__code__)) == 2
    # the entries compiled before the limit still serve the calls whose guards pass (TorchDynamo's RUN_ONLY)
    hits = sum(e["hits"] for e in dynview._C.cache_entries(fn.__code__))
    for n in (2, 3, 9):
        x = torch.randn(n, 4)
        torch.testing.assert_close(dv(x, 2), fn(x, 2))
    assert sum(e["hits"] for e in dynview._C.cache_entries(fn.__code__)) == hits + 2
    assert dynview._C.take_records()[-1]["compile_id"] == "[0/1]"  # nothing compiled after the limit


def _scaled(x):
    return torch.cos(x) + 1


class _Layer(torch.nn.Module):
    """A layer whose index is read by its forward, as a decoder layer reads its layer_idx: each layer
    is a new compile of the same code."""
    def __init__(self, idx):
        super().__init__()
        self.idx = idx

    def forward(self, x):
        y = _scaled(x) * self.idx
        print(end="")  # a graph break: the rest is a resume function that calls _scaled again
        return _scaled(y) + self.idx


class _Stack(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer(i) for i in range(n))

    def forward(self, x):
        x = x + 1
        print(end="")
        for layer in self.layers:
            x = layer(x)
        return x


def test_frames_called_past_the_recompile_limit_compile_nothing_as_torch_compile():
    # Past the limit, a call that no entry fits runs eagerly and so does everything it calls, using
    # only entries compiled before (TorchDynamo's RUN_ONLY for the frame and its callees): its
    # resume functions and callees are not compiled one by one, and a repeat call compiles nothing.
    dynview.config.recompile_limit = 3
    torch._dynamo.reset()
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 3
    try:
        torch.manual_seed(0)
        m = _Stack(6)
        x = torch.randn(4)
        want = m(x)
        td, n_td = counting_dynamo(m)
        torch.testing.assert_close(td(x), want)
        dv = dynview.compile(m, backend="eager")
        dynview._C.take_records()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.testing.assert_close(dv(x), want)
        assert len([x for x in w if "recompile_limit" in str(x.message)]) == 1
        assert dynview_compiles() == n_td[0]
        assert dynview._C.cache_entries(_scaled.__code__) == []  # inlined, never a frame of its own
        before = n_td[0]
        torch.testing.assert_close(td(x), want)
        torch.testing.assert_close(dv(x), want)
        assert n_td[0] == before and dynview_compiles() == 0  # the repeat call compiles nothing
        layer_code = _Layer.forward.__code__
        assert sum(e["hits"] for e in dynview._C.cache_entries(layer_code)) == 3  # layers 0-2 use their entries
    finally:
        torch._dynamo.config.recompile_limit = old
        torch._dynamo.reset()


def test_fail_on_recompile_limit_raises():
    dynview.config.recompile_limit = 1
    dynview.config.fail_on_recompile_limit = True
    dv = dynview.compile(fn, backend="eager")
    dv(torch.randn(2, 4), 2)
    with pytest.raises(RuntimeError, match="recompile_limit"):
        dv(torch.randn(3, 4), 2)


def _backend_sequence(compile_fn, module):
    """Compiles fn (or a module) with b1, b2, b1, "eager", "eager", "aot_eager" in turn, one call
    each; returns the names of the custom backends in the order they were asked to compile."""
    calls = []

    def b1(gm, example_inputs):
        calls.append("b1")
        return gm.forward

    def b2(gm, example_inputs):
        calls.append("b2")
        return gm.forward
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    target = m if module else fn
    args = (torch.randn(3, 4),) if module else (torch.randn(3, 4), 2)
    want = target(*args)
    for b in (b1, b2, b1, "eager", "eager", "aot_eager"):
        torch.testing.assert_close(compile_fn(target, backend=b)(*args), want)
    return calls


@pytest.mark.parametrize("module", [False, True], ids=["function", "module"])
def test_code_compiled_for_one_backend_is_not_run_for_another_as_torch_compile(module):
    # TorchDynamo keeps a cache entry per backend (BACKEND_MATCH): compiling the same code again
    # with another backend compiles again, with the first one again hits its entry; a backend name
    # is the same backend each time.
    torch._dynamo.reset()
    want = _backend_sequence(torch.compile, module)
    torch._dynamo.reset()
    dynview._C.take_records()
    got = _backend_sequence(dynview.compile, module)
    assert got == want == ["b1", "b2"]
    code = (torch.nn.Sequential.forward if module else fn).__code__
    # b1, b2, the eager backend, aot_eager: one entry each, b1's hit on its second call
    entries = dynview._C.cache_entries(code)
    assert len(entries) == 4 and sum(e["hits"] for e in entries) == 2
    recs = dynview._C.take_records()
    assert "BACKEND_MATCH: compiled for backend" in recs[1]["reason"]
    assert "called with " in recs[1]["reason"] and "b2" in recs[1]["reason"]


def _limit_with_two_backends(compile_fn):
    runs = []

    def b1(gm, example_inputs):
        def run(*args):
            runs.append(1)
            return gm.forward(*args)
        return run
    x = torch.randn(3, 4)
    compile_fn(fn, backend=b1)(x, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(compile_fn(fn, backend="eager")(x, 2), fn(x, 2))
    return len(runs), len([x for x in w if "recompile_limit" in str(x.message) or "recompile_limit" in str(x)])


def test_past_the_recompile_limit_another_backends_entry_does_not_serve():
    # Past the limit a call under another backend runs eagerly, as TorchDynamo's does: the entry
    # compiled for b1 runs only for its own (first) call
    torch._dynamo.reset()
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 1
    try:
        td_runs, _ = _limit_with_two_backends(torch.compile)
    finally:
        torch._dynamo.config.recompile_limit = old
        torch._dynamo.reset()
    dynview.config.recompile_limit = 1
    dv_runs, warned = _limit_with_two_backends(dynview.compile)
    assert dv_runs == td_runs == 1
    assert warned == 1
    assert [e["hits"] for e in dynview._C.cache_entries(fn.__code__)] == [0]


def test_reset_drops_every_cache():
    dv = dynview.compile(fn, backend="eager")
    dv(torch.randn(3, 4), 2)
    assert len(dynview._C.cache_entries(fn.__code__)) == 1
    dynview.reset()
    assert dynview._C.cache_entries(fn.__code__) == []
    dynview._C.take_records()
    dv(torch.randn(3, 4), 2)
    assert dynview_compiles() == 1


def breaking(x):
    y = x * 2
    if y.sum() > 0:
        return y
    return -y


def test_fullgraph_raises_unsupported_with_location():
    dv = dynview.compile(breaking, backend="eager", fullgraph=True)
    with pytest.raises(dynview.Unsupported) as ei:
        dv(torch.ones(3))
    e = ei.value
    assert e.break_id == "DV0002"
    assert "data-dependent" in e.message and e.hint
    assert e.lineno == breaking.__code__.co_firstlineno + 2
    assert f"{__file__}:{e.lineno}" in str(e)
    # Without fullgraph the same function runs eagerly and gives eager's result.
    torch.testing.assert_close(dynview.compile(breaking, backend="eager")(torch.ones(3)), breaking(torch.ones(3)))


def test_fullgraph_does_not_raise_on_clean_code():
    dv = dynview.compile(fn, backend="eager", fullgraph=True)
    torch.testing.assert_close(dv(torch.ones(2, 2), 3), fn(torch.ones(2, 2), 3))


def test_four_threads_with_different_dtypes():
    dv = dynview.compile(fn, backend="eager")
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
    errors = []

    def work(dt):
        try:
            for i in range(50):
                x = torch.randn(4, 3).to(dt)
                torch.testing.assert_close(dv(x, i % 3), fn(x, i % 3))
        except Exception as e:  # collected and re-raised in the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(dt,)) for dt in dtypes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(dynview._C.cache_entries(fn.__code__)) >= 4


def gather_rows(x, idx):
    return x[idx] * 2


def test_exception_inside_captured_code_propagates_like_eager():
    x = torch.randn(3, 2)
    bad = torch.tensor([0, 7])
    dv = dynview.compile(gather_rows, backend="eager")
    torch.testing.assert_close(dv(x, torch.tensor([0, 2])), gather_rows(x, torch.tensor([0, 2])))
    with pytest.raises(IndexError) as eager_err:
        gather_rows(x, bad)
    with pytest.raises(IndexError) as ours:
        dv(x, bad)
    assert str(ours.value) == str(eager_err.value)
    frames = traceback.extract_tb(ours.value.__traceback__)
    assert any(f.filename == __file__ for f in frames)


def test_input_refcounts_unchanged_after_many_calls():
    x, y = torch.randn(4), torch.randn(4)
    dv = dynview.compile(lambda a, b: a * b + 1, backend="eager")
    dv(x, y)
    before = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(10000):
        dv(x, y)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_cache_hits_at_every_stack_depth_keep_results_errors_and_refcounts():
    # A hit pops the frame it replaced: at every depth of Python recursion (so at every position in
    # the interpreter's frame stack, including the first frame of a fresh stack chunk), results and
    # raised errors equal eager's and no reference is leaked or dropped.
    x = torch.randn(4)
    fn = dynview.compile(lambda a, k: a * k if k >= 0 else a[99], backend="eager")
    fn(x, 1)
    before = sys.getrefcount(x)

    def down(depth, pad0=0, pad1=1, pad2=2, pad3=3, pad4=4, pad5=5, pad6=6, pad7=7):
        if depth:
            return down(depth - 1)
        out = fn(x, 2)
        with pytest.raises(IndexError):
            fn(x, -1)
        return out

    for depth in range(0, 600, 3):
        torch.testing.assert_close(down(depth), x * 2)
    assert sys.getrefcount(x) == before


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_rss_flat_over_100k_calls():
    x = torch.randn(8)
    dv = dynview.compile(lambda a: a + 1, backend="eager")
    # Warm-up long enough for the allocator to settle after earlier tests' large allocations (after
    # the trace tests it keeps growing ~3 MB over the first 100k calls, then not at all).
    for _ in range(100000):
        dv(x)
    start = rss_kb()
    for _ in range(100000):
        dv(x)
    grown = rss_kb() - start
    assert grown < 2048, f"RSS grew by {grown} KiB over 100k calls"


def test_dynview_logs_print_events_in_order():
    script = (
        "import torch, dynview\n"
        "def f(x, k):\n"
        "    y = torch.relu(x) * k\n"
        "    if y.sum() > 0:\n"
        "        return y\n"
        "    return -y\n"
        "def g(x):\n"
        "    return x.cos() + 1\n"
        "dynview.compile(f, backend='eager')(torch.ones(2), 2)\n"
        "cg = dynview.compile(g, backend='eager')\n"
        "cg(torch.ones(2)); cg(torch.ones(3))\n"
    )
    out = run_child(script, DYNVIEW_LOGS="graph_breaks,recompiles,guards,graph_code,bytecode")
    log = out.stderr
    assert out.returncode == 0, log
    assert "Graph break DV0002 in [0/0]" in log and "<string>:4" in log
    assert "TRACED GRAPH [2/0]" in log and "cos" in log  # [1/0]: f's resume function after the branch
    assert "check_tensor(L['x'], Float, cpu, size=[2]" in log
    assert "Recompiling function g" in log and "size mismatch at index 0. expected 2, actual 3" in log
    assert log.index("Graph break DV0002") < log.index("TRACED GRAPH [2/0]") < log.index("Recompiling function g")


def test_torch_functions_answered_while_tracing_are_found_when_their_module_is_imported_later():
    # torch._dynamo is imported lazily: its graph_break and is_compiling are still recognised when the
    # first capture ran before anything imported it. A torch function that merely shares a name with
    # one of them (torch.fx.traceback.annotate is not torch.jit.annotate) is not mistaken for it.
    script = (
        "import sys, torch, dynview\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "def f(x):\n"
        "    return x + 1 if torch.jit.is_scripting() else x - 1\n"
        "torch.testing.assert_close(dynview.compile(f, backend='eager')(torch.ones(2)), torch.zeros(2))\n"
        "import torch._dynamo\n"
        "def g(x):\n"
        "    y = x * 2\n"
        "    torch._dynamo.graph_break()\n"
        "    return y + 1 if torch._dynamo.is_compiling() else y\n"
        "e = dynview.explain(g)(torch.ones(2))\n"
        "print('graphs', e.graph_count, 'breaks', e.graph_break_count, e.break_reasons[0].break_id)\n"
        "torch.testing.assert_close(dynview.compile(g, backend='eager')(torch.ones(2)), torch.full((2,), 3.0))\n"
        "import torch.fx.traceback as tb\n"
        "def h(x):\n"
        "    with tb.annotate({'k': 1}):\n"
        "        return x + 1\n"
        "torch.testing.assert_close(dynview.compile(h, backend='eager')(torch.ones(2)), torch.full((2,), 2.0))\n"
        "print('ok')\n"
    )
    out = run_child(script)
    assert out.returncode == 0, out.stderr
    assert "graphs 2 breaks 1 DV0026" in out.stdout and "ok" in out.stdout, out.stdout + out.stderr


def test_hook_installed_only_while_capturing():
    assert not dynview._C._hook_active()
    seen = []

    def f(x):
        seen.append(dynview._C._hook_active())  # a graph break: runs eagerly, with capture on
        return x + 1
    torch.testing.assert_close(dynview.compile(f, backend="eager")(torch.ones(2)), torch.ones(2) + 1)
    assert seen == [True]
    assert not dynview._C._hook_active()
    with dynview.optimize("eager"):
        assert dynview._C._hook_active()
        with dynview.disable():
            assert not dynview._C._hook_active()
        assert dynview._C._hook_active()
    assert not dynview._C._hook_active()


def _ev_helper(a):
    return a.sin() * 2


def _ev_fn(x, y):
    z = x + y
    for i in range(3):
        z = z * (i + 1)
    if z.shape[0] == 2:
        z = _ev_helper(z)
    return z.sum(0), z.shape[0]


def test_observer_events_are_complete_and_in_order():
    dynview._C._collect_events(True)
    try:
        dynview.compile(_ev_fn, backend="eager")(torch.ones(2, 3), torch.ones(2, 3))
        events = dynview._C._take_events()
    finally:
        dynview._C._collect_events(False)
    kinds = [e[0] for e in events]
    assert kinds[0] == "cache" and kinds[1] == "compile_start" and kinds[-1] == "compile_end"
    assert kinds.index("graph") < kinds.index("code") < len(kinds) - 1
    steps = [e for e in events if e[0] == "step"]
    # One event per step, none missing, and in step order (a step that inlines a call is reported
    # when the callee starts, before the callee's own steps).
    assert [e[2] for e in steps] == list(range(len(steps)))
    # Independently: the instructions CPython itself executes for the same call (sys.settrace
    # opcode events), which are the symbolic steps minus the RESUME at each frame entry.
    codes = {_ev_fn.__code__: 0, _ev_helper.__code__: 1}
    seen = []

    def tracer(frame, event, arg):
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            if event == "opcode":
                seen.append((codes[frame.f_code], frame.f_lasti))
            return tracer
        return None
    # CPython 3.12.1 turns on opcode events only if some frame asked for them before settrace.
    me = sys._getframe()
    me.f_trace_opcodes = True
    sys.settrace(tracer)
    me.f_trace_opcodes = False
    try:
        _ev_fn(torch.ones(2, 3), torch.ones(2, 3))
    finally:
        sys.settrace(None)
    ours = [(e[3], e[4]) for e in steps if e[4] != 0]
    assert ours == seen
    assert sum(1 for e in steps if e[4] == 0) == 2  # RESUME of _ev_fn and of the inlined helper
    # Guards and graph nodes name the step that created them, within the trace.
    for e in events:
        if e[0] in ("guard", "node") and e[2] >= 0:
            assert e[2] < len(steps)
    node_steps = [e[2] for e in events if e[0] == "node" and e[5].startswith("call")]
    assert node_steps == sorted(node_steps) and len(node_steps) >= 5


def _monitored(x, y):
    z = x * 2 + y
    if z.sum() > 0:
        z = z + 1
    return z.cos()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in CPython 3.12")
def test_code_instrumented_by_sys_monitoring_compiles_and_splits_like_plain_code():
    # A tool watching LINE and INSTRUCTION events rewrites the code's instructions in place
    # (INSTRUMENTED_*): the engine must read the same bytecode, and the tool keeps its events.
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    lines = []
    mon.use_tool_id(tool, "dynview-test")
    try:
        mon.register_callback(tool, mon.events.LINE, lambda code, line: lines.append(line))
        mon.register_callback(tool, mon.events.INSTRUCTION, lambda code, offset: None)
        mon.set_local_events(tool, _monitored.__code__, mon.events.LINE | mon.events.INSTRUCTION)
        x, y = torch.randn(3), torch.randn(3)
        _monitored(x, y)
        dynview.reset()
        cf = dynview.compile(_monitored, backend="eager")
        for _ in range(2):
            torch.testing.assert_close(cf(x, y), _monitored(x, y))
            torch.testing.assert_close(cf(-x.abs(), -y.abs()), _monitored(-x.abs(), -y.abs()))
        e = dynview.explain(_monitored)(x, y)
        assert (e.graph_count, e.graph_break_count) == (2, 1)
        assert lines
    finally:
        mon.set_local_events(tool, _monitored.__code__, 0)
        mon.free_tool_id(tool)
        dynview.reset()


def _hit_fn(x, y):
    return (x * 2 + y).cos()


def _hit_split(x, y):
    z = x.sin() + y
    print(end="")  # a graph break: the transformed code calls a resume function, itself a cache hit
    return z * 2


_EXC_EVENTS = ("RAISE", "PY_THROW", "PY_UNWIND", "RERAISE", "EXCEPTION_HANDLED")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in CPython 3.12")
@pytest.mark.parametrize("f", [_hit_fn, _hit_split], ids=["one_graph", "graph_break"])
def test_cache_hit_raises_no_exception_event(f):
    # A cache hit must not look, to sys.monitoring (debuggers, coverage, profilers) or sys.settrace,
    # as if the original function had raised: eager gives no exception event, so must a hit.
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    seen = []
    x, y = torch.randn(3), torch.randn(3)
    cf = dynview.compile(f, backend="eager")
    cf(x, y)  # compiles (its own exceptions, caught inside torch, are not counted)
    cf(x, y)
    mon.use_tool_id(tool, "dynview-test")
    try:
        for name in _EXC_EVENTS:
            ev = getattr(mon.events, name)
            mon.register_callback(tool, ev, lambda *a, _n=name: seen.append((_n, getattr(a[0], "co_qualname", a[0]))))
        mon.set_events(tool, sum(getattr(mon.events, n) for n in _EXC_EVENTS))
        f(x, y)
        eager = list(seen)
        del seen[:]
        out = cf(x, y)  # hits
        hit = list(seen)
        del seen[:]
    finally:
        mon.set_events(tool, 0)
        mon.free_tool_id(tool)
    torch.testing.assert_close(out, f(x, y))
    assert eager == []
    assert hit == eager
    # Legacy tracing (sys.settrace, implemented over sys.monitoring on 3.12+) sees no exception either.
    traced = []

    def tracer(frame, event, arg):
        if event == "exception":
            traced.append(frame.f_code.co_qualname)
        return tracer
    sys.settrace(tracer)
    try:
        cf(x, y)
    finally:
        sys.settrace(None)
    assert traced == []


def _covered(x, n):
    acc = x
    for i in range(n):
        acc = acc * 2 + i
    return acc.sum()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in CPython 3.12")
def test_coverage_style_monitoring_tool_and_dynview_do_not_disturb_each_other():
    # A coverage-like tool: global PY_START and LINE callbacks that return DISABLE after the first
    # event of each (code, line), which rewrites instructions in place. dynview compiles, splits and
    # hits as without it; the tool keeps seeing the lines the program runs outside captured frames.
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    starts, lines = set(), set()

    def on_start(code, offset):
        starts.add(code.co_qualname)
        return mon.DISABLE

    def on_line(code, line):
        lines.add((code.co_qualname, line))
        return mon.DISABLE
    x = torch.randn(4)
    want = [_covered(x, 3), _monitored(x, x), _hit_split(x, x)]
    mon.use_tool_id(tool, "dynview-coverage-test")
    try:
        mon.register_callback(tool, mon.events.PY_START, on_start)
        mon.register_callback(tool, mon.events.LINE, on_line)
        mon.set_events(tool, mon.events.PY_START | mon.events.LINE)
        got = []
        for _ in range(3):  # compile, then hits
            got = [dynview.compile(_covered, backend="eager")(x, 3),
                   dynview.compile(_monitored, backend="eager")(x, x),
                   dynview.compile(_hit_split, backend="eager")(x, x)]
        e = dynview.explain(_monitored)(x, x)
        probe_line = sys._getframe().f_lineno + 1
        after = _covered(torch.ones(1), 1)  # eager code run after the compiled calls is still covered
    finally:
        mon.set_events(tool, 0)
        mon.free_tool_id(tool)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(after, torch.tensor(2.0))
    assert (e.graph_count, e.graph_break_count) == (2, 1)
    me = sys._getframe().f_code.co_qualname
    assert (me, probe_line) in lines  # (this function started before the tool: no PY_START of it)
    assert "_covered" in starts and any(q == "_covered" for q, _ in lines)


def test_a_graph_of_more_than_255_inputs_keeps_running_once_the_interpreter_specializes_its_call():
    # A graph with hundreds of inputs (every parameter of a deep model is one: MobileViT's has 314).
    # CPython 3.11 quickens a code object on its 8th run and then specializes each call site; a call
    # of more than 255 arguments written as PRECALL/CALL behind EXTENDED_ARG sent its specialized form
    # onto a cache entry (a segfault). Run in a child process, so a crash is this test's failure.
    script = (
        "import torch, dynview\n"
        "torch.manual_seed(0)\n"
        "m = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(150)])\n"
        "c = dynview.compile(m, backend='eager')\n"
        "x = torch.randn(2, 4)\n"
        "with torch.no_grad():\n"
        "    want = m(x)\n"
        "    for _ in range(30):\n"
        "        torch.testing.assert_close(c(x), want)\n"
        "g = dynview._C.take_records()[0]['graph']\n"
        "print('inputs', sum(n.op == 'placeholder' for n in g.graph.nodes))\n"
    )
    out = run_child(script)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split("inputs")[1]) > 255, out.stdout


def _clipping_step(model, optimizer, foreach):
    def step(x, y):  # a training step as people write it
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=foreach)
        optimizer.step()
        optimizer.zero_grad()
        return loss, total_norm
    return step


def _clip_after_backward(model):
    def clip(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss, torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    return clip


@pytest.mark.parametrize("foreach", [None, False, True])
def test_gradient_clipping_after_backward_is_traced_and_equals_eager_step_after_step(foreach):
    # clip_grad_norm_ is inlined as TorchDynamo inlines it: module.parameters() is a generator to
    # isinstance, each p.grad a guarded input, torch._C._group_tensors_by_device_and_dtype groups them
    # in eager's order, the foreach norm and in-place scaling are graph nodes.
    def make():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        return model, torch.optim.SGD(model.parameters(), lr=0.1)
    (m1, o1), (m2, o2) = make(), make()
    compiled, eager = dynview.compile(_clipping_step(m1, o1, foreach), backend="eager"), _clipping_step(m2, o2, foreach)
    g = torch.Generator().manual_seed(0)
    records = []
    for step in range(4):
        x, y = torch.randn(3, 4, generator=g), torch.randn(3, 2, generator=g)
        torch.testing.assert_close(compiled(x, y), eager(x, y))
        for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
            torch.testing.assert_close(p, q)
        if step == 0:
            records = dynview._C.take_records()
    assert dynview._C.take_records() == [], "the later steps are cache hits"
    clip_graphs = [r["graph"] for r in records if r["graph"] is not None and "clip_grad" not in r["qualname"]
                   and ("_foreach_norm" in r["graph"].code or "vector_norm" in r["graph"].code)]
    assert clip_graphs, [r["break_message"] for r in records]
    assert not any("clip_grad" in (r["break_message"] or "") or "_group_tensors" in (r["break_message"] or "") for r in records)
    # optimizer.step() is inlined to where TorchDynamo breaks too: the graph_break() of its
    # _use_grad_for_differentiable wrapper (its profiler range ignored on the way, as TorchDynamo does);
    # the optimizer's own step (torch.optim's frames) is then captured in a graph of its own
    assert any(r["break_id"] == "DV0026" and "optim" in r["break_message"] for r in records), \
        [r["break_message"] for r in records]
    assert any(r["qualname"] == "SGD.step" and r["graph"] is not None for r in records), [r["qualname"] for r in records]
    model, opt = make()
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    torch._dynamo.reset()
    want = torch._dynamo.explain(_clipping_step(model, opt, foreach))(x, y)
    model, opt = make()
    got = dynview.explain(_clipping_step(model, opt, foreach))(x, y)
    assert (got.graph_count, len(got.break_reasons)) == (want.graph_count, len(want.break_reasons)) == (3, 2)
    model, _ = make()
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    torch._dynamo.reset()
    want = torch._dynamo.explain(_clip_after_backward(model))(x, y)
    got = dynview.explain(_clip_after_backward(model))(x, y)
    assert (got.graph_count, got.graph_break_count) == (want.graph_count, want.graph_break_count) == (2, 1)


def test_saved_tensor_hooks_never_see_the_trace_examples():
    # torch.autograd.graph.saved_tensors_hooks around a compiling call: its pack hook sees what eager
    # saves, real tensors only (TorchDynamo leaves the hooks out while it traces, too)
    lin = torch.nn.Linear(4, 4)

    def f(x):
        return torch.tanh(lin(x)).exp().sum()

    def packed(fn, x):
        seen = []

        def pack(t):
            seen.append(t.device.type)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(x).backward()
        return seen

    x = torch.randn(3, 4)
    want = packed(f, x)
    got = packed(dynview.compile(f, backend="eager"), x)
    assert "meta" not in got and got == want


def _rows(x, row, rows):
    # a 0-d index tensor: AOTAutograd's fake tensors cannot say which row (data-dependent output)
    return x[row] * 2, x[rows]


def test_a_fake_tensor_failure_of_the_backend_runs_the_frame_eagerly_as_torch_compile():
    x, row, rows = torch.randn(5, 2), torch.tensor(3), torch.tensor([0, 2])
    torch._dynamo.reset()
    want = _rows(x, row, rows)
    torch.testing.assert_close(torch.compile(_rows, backend="aot_eager")(x, row, rows), want)  # (the oracle falls back too)
    dynview._C.take_records()
    with pytest.warns(UserWarning, match="runs eagerly: backend aot_eager failed with DataDependentOutputException"):
        got = dynview.compile(_rows, backend="aot_eager")(x, row, rows)
    torch.testing.assert_close(got, want)
    records = dynview._C.take_records()
    assert [(r["break_id"], r["graph"]) for r in records] == [("DV0027", None)]
    torch.testing.assert_close(dynview.compile(_rows, backend="aot_eager")(x, torch.tensor(1), rows), _rows(x, torch.tensor(1), rows))
    assert dynview._C.take_records() == []  # the frame runs eagerly from then on


def test_any_other_backend_failure_is_raised():
    def broken(gm, example_inputs):
        raise ValueError("the backend is broken")
    with pytest.raises(ValueError, match="the backend is broken"):
        dynview.compile(fn, backend=broken)(torch.randn(3, 4), 2)


class _Config:
    return_tuple = False


class _Encoder(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.proj(x).tanh()
        return (h,) if self.config.return_tuple else {"hidden": h}


class _Classifier(torch.nn.Module):
    # reads its encoder's output by key: raises when the shared config switches the encoder to tuples,
    # as a transformers head does once `config.return_dict` is turned off
    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.encoder = _Encoder(self.config)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.encoder(x)["hidden"])


def test_a_model_whose_call_raises_in_the_trace_recompiles_as_torch_compile():
    # A model compiled, then called once in a way that raises (a tuple read by key): the error is
    # raised in the trace, as TorchDynamo observes it, and no frame of the trace catches it, so the
    # frame runs eagerly (eager's error), and from then on its frames below are compiled on their
    # own. The counts of compiles after each call equal torch.compile's.
    steps = ["plain", "tuple", "plain", "grad", "tuple", "plain"]

    def drive(compiled, model, count):
        out = []
        for step in steps:
            model.config.return_tuple = step == "tuple"
            with torch.set_grad_enabled(step == "grad"):
                try:
                    got = ("ok", compiled(torch.ones(3, 4)))
                except TypeError as e:
                    got = ("raise", str(e))
            out.append((step, count(), got[0]))
        return out

    torch.manual_seed(0)
    model = _Classifier()
    td, n_td = counting_dynamo(model)
    theirs = drive(td, model, lambda: n_td[0])
    dv = dynview.compile(model, backend="eager")
    dynview._C.take_records()
    n = [0]

    def count():
        n[0] += dynview_compiles()
        return n[0]
    ours = drive(dv, model, count)
    assert [s for s in ours if s[2] == "raise"] == [("tuple", ours[1][1], "raise"), ("tuple", ours[4][1], "raise")]
    assert ours == theirs
    model.config.return_tuple = False
    with torch.no_grad():
        torch.testing.assert_close(dv(torch.ones(3, 4)), model(torch.ones(3, 4)))


# ---- a range from outside the frame is guarded by its value: the trace iterates it, takes its length
# and tests `in` as constants (each later call unrolled the first call's range, a wrong result, before) ----
def _steps_passed_in(x, steps):
    return [x[:, i] * i for i in steps], len(steps), 1 in steps


def _range_of_a_tensor(x, n):
    # range(n) of a tensor breaks; the comprehension after the break gets the range on its stack
    return [x[:, i] + 1 for i in range(n)]


def _rows_with_a_step(x, rows):
    return torch.stack([x[i] for i in rows]), list(reversed(rows))


@pytest.mark.parametrize("f,args", [
    (_steps_passed_in, [range(3), range(3), range(2), range(1, 4), range(0)]),
    (_range_of_a_tensor, [torch.tensor(3), torch.tensor(3), torch.tensor(2), torch.tensor(4)]),
    (_rows_with_a_step, [range(0, 4, 1), range(0, 4, 2), range(1, 4, 2), range(0, 4, 1)]),
], ids=["passed_in", "made_before_a_break", "with_a_step"])
def test_a_range_from_outside_is_guarded_by_its_value(f, args):
    x = torch.randn(4, 5, 3)
    dv = dynview.compile(f, backend="eager")
    for a in args:
        torch.testing.assert_close(dv(x, a), f(x, a))
    # each range seen before is a cache hit (torch.compile's counts here differ between Python
    # versions: on 3.12 it inlines the comprehension and runs the frame eagerly after a recompile)
    dynview._C.take_records()
    for a in args:
        torch.testing.assert_close(dv(x, a), f(x, a))
    assert dynview_compiles() == 0


# ---- torch._check of a size that fails on a later call: the guard on the condition sends that call to
# a new compile, which breaks at the check, and eager raises the check's error with its message ----
def _needs_rows(x):
    y = x * 2
    torch._check(x.shape[0] > 4, lambda: f"needs more than 4 rows, got {x.shape[0]}")
    return y


def test_a_failing_torch_check_raises_its_message():
    c = dynview.compile(_needs_rows, backend="eager")
    for n in (5, 6, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(c(x), _needs_rows(x))
    with pytest.raises(RuntimeError, match="needs more than 4 rows, got 3"):
        c(torch.randn(3, 2))
    with pytest.raises(RuntimeError, match="needs more than 4 rows, got 2"):
        c(torch.randn(2, 2))
    torch.testing.assert_close(c(torch.ones(7, 2)), torch.full((7, 2), 2.0))


# ---- a builtin method bound to an object is made anew at each attribute read: guarded by what it is
# bound to and its name, not its identity (each call compiled again, up to the recompile limit, before) ----
_SHAPE = torch.Tensor.shape
_TABLE = {"scale": 3.0}


def _shape_through_its_descriptor(x):  # test_misc's test_getset_descriptor
    y = torch.sin(x)
    return y, _SHAPE.__get__(x)


def _lookup_passed_in(x, get):
    return x * 2, get


@pytest.mark.parametrize("f,make", [
    (_shape_through_its_descriptor, lambda x: (x,)),
    (_lookup_passed_in, lambda x: (x, _TABLE.get)),
], ids=["descriptor_get", "bound_dict_get"])
def test_bound_builtin_methods_hit_the_cache(f, make):
    dynview._C.take_records()
    c = dynview.compile(f, backend="eager")
    x = torch.randn(3)
    for _ in range(4):
        got, want = c(*make(x)), f(*make(x))
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert dynview_compiles() == 1
    if f is _lookup_passed_in:  # another dict's get is another value: compiled again, eager's result
        other = {"scale": 4.0}
        assert c(x, other.get)[1] == other.get
        assert dynview_compiles() == 1


# ---- guards run no frame of the program's under capture ----
class _Forwarding(torch.nn.Module):
    """Forwards the names it lacks to the model it wraps, as peft's PeftModel does (a Python __getattr__)."""

    def __init__(self, inner, prompt=None):
        super().__init__()
        self.inner = inner
        if prompt is not None:
            self.prompt_tokens = {"default": prompt}  # a plain attribute (peft's prompt_tokens)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "inner":
                raise
            return getattr(self.inner, name)


def _forward_with_a_prompt_if_any(wrapper, x):
    if hasattr(wrapper, "prompt_tokens"):
        x = torch.cat([wrapper.prompt_tokens["default"].expand(x.shape[0], -1), x], dim=1)
    return wrapper.inner(x)


def test_a_guard_reading_through_a_python_getattr_is_not_captured():
    # The second wrapper has no `prompt_tokens`: the first entry's guards read it through _Forwarding's
    # __getattr__, which raises AttributeError. That call is the guard's, not the program's: it is
    # neither compiled nor recorded, and the counts are torch.compile's.
    from counting import counting_backend
    torch.manual_seed(0)
    with_prompt = _Forwarding(torch.nn.Linear(6, 3), torch.randn(1, 2))
    without = _Forwarding(torch.nn.Linear(4, 3))
    x = torch.randn(2, 4)
    counts = {}
    for engine, compile_ in (("torch.compile", torch.compile), ("dynview", dynview.compile)):
        torch._dynamo.reset()
        dynview.reset()
        dynview._C.take_records()
        backend, n = counting_backend()
        cf = compile_(_forward_with_a_prompt_if_any, backend=backend)
        for w in (with_prompt, without, with_prompt, without):
            torch.testing.assert_close(cf(w, x), _forward_with_a_prompt_if_any(w, x))
        counts[engine] = n[0]
    compiled = [r["qualname"] for r in dynview._C.take_records()]
    assert compiled == ["_forward_with_a_prompt_if_any"] * 2, compiled
    assert counts["dynview"] == counts["torch.compile"] == 2
    torch._dynamo.reset()
