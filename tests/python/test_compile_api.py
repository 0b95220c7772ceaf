"""dynview.compile's objects behave as torch.compile's: the module wrapper is a view of the module
it wraps (attributes read, written and deleted through it, `training`, dir(), len(), torch.save);
a callable with no Python frame of its own (torch.sin, a functools.partial) is still captured;
torch.compiler.disable(fn, recursive=False) leaves fn's frame eager and captures what it calls.
Each against torch.compile on the same code (TorchDynamo is the oracle), results against eager."""
import copy
import functools
import io

import pytest
import torch
import torch.nn as nn
from torch._dynamo.testing import CompileCounter

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


class Stepped(nn.Module):
    """A module whose forward reads a plain int attribute its training loop changes."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)
        self.step = 10

    def forward(self, x):
        return self.layer(x + 1) + self.step


def both(run):
    """(torch.compile's, dynview.compile's) results of run(compile_), each on fresh caches; dynview's
    compile records stay readable after it (test_weakrefs, test_state_and_profilers use it too)."""
    torch._dynamo.reset()
    theirs = run(torch.compile)
    torch._dynamo.reset()
    dynview.reset()
    dynview._C.take_records()
    ours = run(dynview.compile)
    return theirs, ours


def records_of(fn, *args):
    """dynview's compile records of one call of fn, compiled with the eager backend on fresh caches."""
    dynview.reset()
    dynview._C.take_records()
    dynview.compile(fn, backend="eager")(*args)
    return dynview._C.take_records()


def counts_of_seeded_module(compile_, make_module, x, cnt):
    """A module made under seed 0, compiled with `compile_` onto counter `cnt` and called once
    (its output equal to eager's): the counter's frame and op counts."""
    torch.manual_seed(0)
    m = make_module()
    torch.testing.assert_close(compile_(m, backend=cnt)(x), m(x))
    return cnt.frame_count, cnt.op_count


def test_an_attribute_written_through_the_wrapper_is_the_modules_and_the_compiled_forward_sees_it():
    def run(compile_):
        mod = Stepped()
        opt = compile_(mod, backend="eager")
        x = torch.zeros(3, 4)
        opt(x)
        opt.step += 1  # (a training loop's counter, written through the compiled model)
        out = opt(x)
        torch.testing.assert_close(out, mod(x))
        return mod.step, "step" in vars(opt), out - mod.layer(x + 1)

    theirs, ours = both(run)
    assert ours[:2] == theirs[:2] == (11, False)
    torch.testing.assert_close(ours[2], torch.full((3, 4), 11.0))


def test_training_dir_len_and_delattr_are_the_wrapped_modules():
    def run(compile_):
        mod = Stepped().eval()
        opt = compile_(mod, backend="eager")
        seen = [opt.training]
        opt.train()
        seen += [mod.training, opt.training]
        mod.eval()
        seen.append(opt.training)
        names = dir(opt)
        del opt.step
        seq = compile_(nn.Sequential(nn.ReLU(), nn.Tanh()), backend="eager")
        return seen, "layer" in names and "forward" in names, hasattr(mod, "step"), len(seq), list(opt.state_dict())

    theirs, ours = both(run)
    assert ours == theirs
    assert ours[0] == [False, True, True, False]


def test_a_compiled_module_saved_with_torch_save_loads_and_runs():
    mod = Stepped()
    opt = dynview.compile(copy.deepcopy(mod), backend="eager")
    x = torch.randn(2, 4)
    opt(x)
    buf = io.BytesIO()
    torch.save(opt, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert type(loaded) is type(opt) and loaded.step == 10
    hits = sum(e["hits"] for e in dynview._C.cache_entries(Stepped.forward.__code__))
    torch.testing.assert_close(loaded(x), mod(x))
    assert sum(e["hits"] for e in dynview._C.cache_entries(Stepped.forward.__code__)) == hits + 1, "it runs compiled"


@pytest.mark.parametrize("fn, nargs", [(torch.sin, 1), (functools.partial(torch.add, alpha=2), 2), (torch.Tensor.cos, 1)],
                         ids=["torch.sin", "partial", "Tensor.cos"])
def test_a_callable_without_a_frame_of_its_own_is_captured_as_torch_compile_captures_it(fn, nargs):
    x = torch.randn(3)

    def run(compile_):
        cnt = CompileCounter()
        f = compile_(fn, backend=cnt, fullgraph=True)
        out = f(*[x] * nargs)
        f(*[x] * nargs)
        torch.testing.assert_close(out, fn(*[x] * nargs))
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs == (1, 1)


def _inner(x):
    return x.sin() * 2


class SkippedForward(nn.Module):
    @torch.compiler.disable(recursive=False)
    def forward(self, x):
        return _inner(x.cos() + 1)


@torch._dynamo.disable(recursive=False)
def _skipped_helper(x):
    return _inner(x + 1)


def _calls_skipped_helper(x):
    return _skipped_helper(x * 2) - 1


def test_disable_without_recursion_runs_the_frame_eagerly_and_captures_what_it_calls():
    x = torch.randn(3)

    def run(compile_):
        cnt = CompileCounter()
        m = compile_(SkippedForward(), backend=cnt)
        torch.testing.assert_close(m(x), _inner(x.cos() + 1))
        m(x)
        f = compile_(_calls_skipped_helper, backend=cnt)
        torch.testing.assert_close(f(x), _calls_skipped_helper(x))
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs
    assert [r["qualname"] for r in records_of(SkippedForward(), x)] == ["_inner"], "forward itself is not captured"


class CosineSum(nn.Module):
    """PyTorch's test_listcomp: a forward disabled without recursion, called by a compiled function;
    its list comprehension (a frame of its own on 3.11) is captured, not the forward."""

    def __init__(self):
        super().__init__()
        self._num = 4

    @torch._dynamo.disable(recursive=False)
    def forward(self, x):
        values = [i * torch.cos(x) for i in range(self._num)]
        return sum(values)


class FullyDisabled(nn.Module):
    @torch.compiler.disable
    def forward(self, x):
        return _inner(x - 1)


def test_a_list_comprehension_frame_over_a_range_is_captured_and_guarded_by_it():
    # On 3.11 the comprehension is a frame of its own, given iter(range(n)) as `.0`: its ints are
    # constants of the graph, guarded by the iterator's next value, step and count
    x = torch.randn(3)
    mod = CosineSum()

    def run(compile_):
        cnt = CompileCounter()
        f = compile_(lambda x: mod(x), backend=cnt)
        counts = []
        for num in (4, 4, 2, 4):
            mod._num = num
            torch.testing.assert_close(f(x), sum(i * torch.cos(x) for i in range(num)))
            counts.append(cnt.frame_count)
        return counts, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs


class WithDisabledForwards(nn.Module):
    """A model whose submodules' forwards are disabled, called from its own (compiled) forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.skipped, self.off = SkippedForward(), FullyDisabled()

    def forward(self, x):
        h = self.lin(x).relu()
        return self.off(self.skipped(h)) * 2


def test_a_disabled_forward_of_a_called_module_breaks_there():
    x = torch.randn(3)
    mod = CosineSum()

    def calls_mod(x):
        return mod(x)

    def run(compile_):
        cnt = CompileCounter()
        torch.testing.assert_close(compile_(calls_mod, backend=cnt)(x), calls_mod(x))
        return counts_of_seeded_module(compile_, WithDisabledForwards, x, cnt)

    theirs, ours = both(run)
    assert ours == theirs
    records = records_of(WithDisabledForwards(), x)
    names = [r["qualname"] for r in records]
    assert "SkippedForward.forward" not in names and "FullyDisabled.forward" not in names, names
    assert sum("marked torch.compiler.disable" in r["break_message"] for r in records) == 2, records


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) + x


class CompiledBlocksNet(nn.Module):
    """Blocks compiled one by one (a user's first try), then the whole model compiled too."""

    def __init__(self, compile_):
        super().__init__()
        self.blocks = nn.ModuleList([compile_(Block(), backend="eager") for _ in range(2)])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _sin_plus_one(x):
    return x.sin() + 1


def _calls_given(x, fn):
    return fn(x) * 2


def test_a_compiled_module_or_function_called_in_a_compiled_frame_is_inlined():
    x = torch.randn(3, 4)

    def run(compile_):
        cnt = CompileCounter()
        torch.manual_seed(0)
        net = CompiledBlocksNet(compile_)
        torch.testing.assert_close(compile_(net, backend=cnt)(x), net(x))
        inner = compile_(_sin_plus_one, backend="eager")
        torch.testing.assert_close(compile_(_calls_given, backend=cnt)(x, inner), _calls_given(x, _sin_plus_one))
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs == (2, 10)


def test_libraries_see_the_wrapper_as_a_compiled_module_and_unwrap_it():
    # diffusers' pipelines ask isinstance(unet, torch._dynamo.eval_frame.OptimizedModule) and take
    # its _orig_mod (is_compiled_module / unwrap_module), as for torch.compile's wrapper
    from diffusers.utils.torch_utils import is_compiled_module, unwrap_module

    def run(compile_):
        mod = Stepped()
        opt = compile_(mod, backend="eager")
        return (isinstance(opt, torch._dynamo.eval_frame.OptimizedModule), is_compiled_module(opt),
                unwrap_module(opt) is mod, is_compiled_module(mod))

    theirs, ours = both(run)
    assert ours == theirs == (True, True, True, False)


class Inner(nn.Module):
    def forward(self, x):
        return _inner(x) + 1


class WithDisabledPart(nn.Module):
    """A model one of whose submodules the user excluded with torch.compiler.disable(submodule)."""

    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.part = torch.compiler.disable(Inner())
        self.post = nn.Linear(4, 4)

    def forward(self, x):
        return self.post(self.part(self.pre(x).cos()))


def test_a_submodule_wrapped_by_torch_compiler_disable_is_not_captured():
    x = torch.randn(2, 4)

    def run(compile_):
        return counts_of_seeded_module(compile_, WithDisabledPart, x, CompileCounter())

    theirs, ours = both(run)
    assert ours == theirs
    records = records_of(WithDisabledPart(), x)
    assert "Inner.forward" not in [r["qualname"] for r in records] and "_inner" not in [r["qualname"] for r in records]
    assert any("marked torch.compiler.disable" in r["break_message"] for r in records)


def test_compiling_a_module_class_compiles_its_instances_calls():
    x = torch.randn(2, 4)

    def run(compile_):
        cls = type("Scaled", (nn.Module,), {"forward": lambda self, x: torch.relu(x) * 2})
        cnt = CompileCounter()
        made = compile_(cls, backend=cnt)
        a, b = made(), made()
        torch.testing.assert_close(a(x), torch.relu(x) * 2)
        b(x)
        return made is cls, isinstance(a, cls), cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs == (True, True, 1, 2)


def with_an_op_kept_out_of_the_graph(x):
    a = x * 2
    y = torch.sub(a, 1)  # (disallowed below: run eagerly between two graphs)
    return torch.add(y, 2)


def test_a_torch_function_disallowed_in_graph_breaks_and_runs_eagerly_as_under_torch_compile():
    from torch._dynamo import trace_rules
    from torch._dynamo.utils import counters
    x = torch.randn(3)
    torch._dynamo.disallow_in_graph(torch.sub)
    try:
        def run(compile_):
            counters.clear()
            cnt = CompileCounter()
            out = compile_(with_an_op_kept_out_of_the_graph, backend=cnt)(x)
            torch.testing.assert_close(out, x * 2 - 1 + 2)
            return cnt.frame_count, cnt.op_count, sum(counters["graph_break"].values())

        theirs, ours = both(run)
        records = dynview._C.take_records()
    finally:
        trace_rules._disallowed_callable_ids.remove(id(torch.sub))
    assert theirs[:2] == (2, 2) and theirs[2] >= 1  # x * 2 | torch.sub eagerly | add
    assert ours[:2] == theirs[:2]
    assert any(r["has_break"] and "disallow_in_graph" in r["break_message"] for r in records)
    # once allowed again, one graph
    assert records_of(with_an_op_kept_out_of_the_graph, x)[0]["has_break"] is False


def test_fullgraph_break_is_caught_as_torch_dynamo_unsupported():
    # PyTorch's test_issue111522: code written for torch.compile catches torch._dynamo.exc.Unsupported
    # at a fullgraph break; dynview's exception is one (and a dynview.Unsupported, with its fields)
    class A:
        a = 2

    def f(x, y):
        return x + y.a

    cf = dynview.compile(f, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(torch.zeros(2), A()), torch.full([2], 2.0))
    del A.a
    with pytest.raises(torch._dynamo.exc.Unsupported) as info:
        cf(torch.zeros(2), A())
    assert isinstance(info.value, dynview.Unsupported) and isinstance(info.value, RuntimeError)
    assert info.value.break_id == "DV0022" and "no attribute a" in info.value.message


def test_dynview_compile_called_inside_compiled_code_is_its_function():
    # PyTorch's test_torch_compile_in_compile_frame, with dynview.compile as the inner compile too:
    # the function it is given is captured with the rest (before, the trace went into
    # dynview.compile's own Python and broke in inspect), as torch.compile treats a nested torch.compile
    def gn(x, c=None):
        if c is None:
            c = 2
        return c * x

    def outer_func(x):
        return dynview.compile(gn, backend="eager")(x)

    x = torch.randn(4)
    records = records_of(outer_func, x)
    assert [r["qualname"].rsplit(".", 1)[-1] for r in records if r["graph"] is not None] == ["outer_func"], records
    assert not [r for r in records if r["break_message"]], records
    dynview.reset()
    torch.testing.assert_close(dynview.compile(outer_func, backend="eager", fullgraph=True)(x), 2 * x)
