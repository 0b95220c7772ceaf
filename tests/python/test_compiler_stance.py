"""torch.compiler.set_stance and the switches that turn compiling off (TORCHDYNAMO_DISABLE=1,
torch._dynamo.config.disable), as torch.compile obeys them: each case is run through torch.compile
and dynview.compile on fresh caches, and what the backend was given, how often the compiled graphs
ran, the results and the errors are compared."""
import os
import subprocess
import sys

import pytest
import torch
import torch._dynamo

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


class Backend:
    """A backend that notes the example-input shapes of each graph it is given and counts the runs
    of the graphs it returns (a cache hit runs one; an eager call none)."""

    def __init__(self):
        self.compiles = []
        self.runs = 0

    def __call__(self, gm, example_inputs):
        self.compiles.append([tuple(e.shape) if isinstance(e, torch.Tensor) else "sym" for e in example_inputs])

        def run(*args):
            self.runs += 1
            return gm.forward(*args)
        return run

    @property
    def dynamic(self):
        """Per compile: whether it took a symbolic size (as an input of its own or in a shape)."""
        return [any(s == "sym" or any(not isinstance(d, int) for d in s) for s in c) for c in self.compiles]


def both(run):
    """run(compile_) with torch.compile, then with dynview.compile, each on fresh caches (and torch's
    record of each code's first call under eager_then_compile, which its reset keeps, emptied)."""
    torch._dynamo.reset()
    torch._dynamo.eval_frame._EXAMPLE_INPUTS = None
    theirs = run(torch.compile)
    torch._dynamo.reset()
    dynview.reset()
    ours = run(dynview.compile)
    return theirs, ours


def scaled_sin(x):
    return x.sin() * 2 + 1


def tally(be, calls):
    """What a Backend saw after the calls: per call, (compiles so far, graph runs so far)."""
    out = []
    for call in calls:
        call()
        out.append((len(be.compiles), be.runs))
    return out


def test_force_eager_runs_every_call_as_it_is_hits_included():
    def run(compile_):
        be = Backend()
        f = compile_(scaled_sin, backend=be)
        x = torch.randn(4)
        steps = []
        with torch.compiler.set_stance("force_eager"):
            torch.testing.assert_close(f(x), scaled_sin(x))
            steps.append((len(be.compiles), be.runs))
        f(x)  # compiled now
        steps.append((len(be.compiles), be.runs))
        with torch.compiler.set_stance("force_eager"):
            f(x)  # the cached graph is not used
            steps.append((len(be.compiles), be.runs))
        f(x)  # a cache hit again
        steps.append((len(be.compiles), be.runs))
        return steps

    theirs, ours = both(run)
    assert ours == theirs == [(0, 0), (1, 1), (1, 1), (1, 2)]


def test_force_eager_set_as_a_function_and_as_a_decorator():
    def run(compile_):
        be = Backend()
        f = compile_(scaled_sin, backend=be)

        @torch.compiler.set_stance("force_eager")
        def evaluate(x):
            return f(x) + f(x * 2)

        x = torch.randn(3)
        torch.testing.assert_close(evaluate(x), scaled_sin(x) + scaled_sin(x * 2))
        seen = [len(be.compiles)]
        torch.compiler.set_stance("force_eager")
        try:
            f(x)
            seen.append(len(be.compiles))
        finally:
            torch.compiler.set_stance("default")
        f(x)
        seen.append(len(be.compiles))
        return seen

    theirs, ours = both(run)
    assert ours == theirs == [0, 0, 1]


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, hidden):
        return self.norm(torch.nn.functional.gelu(self.proj(hidden)) + hidden)


def test_force_eager_on_a_compiled_module_and_the_functions_it_calls():
    # an evaluation loop that turns compiling off around a model whose helper is compiled too
    def run(compile_):
        torch.manual_seed(0)
        block = Block()
        be, helper_be = Backend(), Backend()
        model = compile_(block, backend=be)
        helper = compile_(lambda t: t.softmax(-1), backend=helper_be)
        x = torch.randn(2, 8)
        with torch.compiler.set_stance("force_eager"):
            out = helper(model(x))
        torch.testing.assert_close(out, block(x).softmax(-1))
        eager_counts = (len(be.compiles), len(helper_be.compiles))
        torch.testing.assert_close(helper(model(x)), out)
        return eager_counts, (len(be.compiles), len(helper_be.compiles))

    theirs, ours = both(run)
    assert ours == theirs == ((0, 0), (1, 1))


def test_eager_on_recompile_uses_what_is_compiled_and_compiles_nothing_new():
    def run(compile_):
        be = Backend()
        f = compile_(scaled_sin, backend=be)
        small, large = torch.randn(3), torch.randn(5, 2)
        f(small)
        steps = []
        with torch.compiler.set_stance("eager_on_recompile"):
            steps += tally(be, [lambda: f(small), lambda: f(large), lambda: f(large)])
            torch.testing.assert_close(f(large), scaled_sin(large))
        steps += tally(be, [lambda: f(large)])  # compiled once the stance is back to default
        return steps

    theirs, ours = both(run)
    assert ours == theirs == [(1, 2), (1, 2), (1, 2), (2, 3)]


def test_fail_on_recompile_raises_where_a_frame_would_be_compiled():
    def run(compile_):
        be = Backend()
        f = compile_(scaled_sin, backend=be)
        g = compile_(lambda x: x.cos(), backend=be)
        x = torch.randn(3)
        f(x)
        errors = []
        with torch.compiler.set_stance("fail_on_recompile"):
            torch.testing.assert_close(f(x), scaled_sin(x))  # a cache hit is fine
            for call in (lambda: f(torch.randn(2, 2)), lambda: g(x)):  # a recompile, a first compile
                with pytest.raises(RuntimeError) as info:
                    call()
                errors.append(str(info.value))
        return errors, len(be.compiles)

    (theirs, n_theirs), (ours, n_ours) = both(run)
    assert n_ours == n_theirs == 1
    for t, o in zip(theirs, ours):
        assert o.startswith("Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: '" + __file__)
        assert o.split("\n")[0].split("function name:")[1] == t.split("\n")[0].split("function name:")[1]
        assert ("triggered by the following guard failure(s):" in o) == ("triggered by the following guard failure(s):" in t)
    assert "rank mismatch" in ours[0] and "rank mismatch" in theirs[0]


@pytest.mark.parametrize("sizes", [(3, 4, 5), (3, 3, 5), (3, 4, 4, 6)])
def test_eager_then_compile_runs_the_first_call_eagerly_and_compiles_what_changed_as_dynamic(sizes):
    def run(compile_):
        be = Backend()
        f = compile_(lambda x, k: (x.tan() * k).sum(0), backend=be)
        steps = []
        with torch.compiler.set_stance("eager_then_compile"):
            for n in sizes:
                x = torch.randn(n, 2)
                torch.testing.assert_close(f(x, 3), (x.tan() * 3).sum(0))
                steps.append((len(be.compiles), be.runs))
        return steps, be.dynamic

    theirs, ours = both(run)
    assert ours == theirs


def test_eager_then_compile_delays_each_function_once_the_ones_called_inside_too():
    def inner(x):
        return x.relu() + 1

    def outer(x):
        y = inner(x) * 2
        torch._dynamo.graph_break()
        return inner(y)

    def run(compile_):
        be = Backend()
        f = compile_(outer, backend=be)
        steps = []
        with torch.compiler.set_stance("eager_then_compile"):
            for n in (4, 6, 8):
                x = torch.randn(n)
                torch.testing.assert_close(f(x), outer(x))
                steps.append((len(be.compiles), be.runs))
        return steps, be.dynamic

    theirs, ours = both(run)
    assert ours == theirs


def test_force_backend_compiles_with_the_backend_given_and_keeps_its_graph_apart():
    def run(compile_):
        be, forced = Backend(), Backend()
        f = compile_(scaled_sin, backend=be)
        x = torch.randn(3)
        with torch.compiler.set_stance(force_backend=forced):
            f(x)
            f(x)
        f(x)
        return (len(be.compiles), be.runs), (len(forced.compiles), forced.runs)

    theirs, ours = both(run)
    assert ours == theirs == ((1, 1), (1, 2))


def test_a_stance_torch_does_not_know_raises_at_the_call():
    def run(compile_):
        f = compile_(scaled_sin, backend=Backend())
        torch._dynamo.eval_frame._set_stance(torch._dynamo.eval_frame.DynamoStance("sometimes"))
        try:
            with pytest.raises(RuntimeError, match="invalid torch.compile stance") as info:
                f(torch.randn(2))
        finally:
            torch._dynamo.eval_frame._set_stance(torch._dynamo.eval_frame.DynamoStance())
        return f(torch.ones(2)).tolist()

    theirs, ours = both(run)
    assert ours == theirs


def test_config_disable_skips_a_function_missed_while_it_is_set_until_reset():
    def run(compile_, reset):
        be = Backend()
        f = compile_(scaled_sin, backend=be)
        x, y = torch.randn(3), torch.randn(5, 2)
        steps = tally(be, [lambda: f(x)])
        torch._dynamo.config.disable = True
        try:
            steps += tally(be, [lambda: f(x), lambda: f(y)])  # a hit still served; the miss runs as it is
            torch.testing.assert_close(f(y), scaled_sin(y))
        finally:
            torch._dynamo.config.disable = False
        steps += tally(be, [lambda: f(x), lambda: f(y)])  # skipped from the miss on, hits too
        reset()
        steps += tally(be, [lambda: f(y)])
        return steps

    def resets(compile_):
        return run(compile_, torch._dynamo.reset if compile_ is torch.compile else dynview.reset)

    theirs, ours = both(resets)
    assert ours == theirs == [(1, 1), (1, 2), (1, 2), (1, 2), (1, 2), (2, 3)]


ENV_SCRIPT = """
import sys, torch
import dynview
n = [0]
def backend(gm, example_inputs):
    n[0] += 1
    return gm.forward
def f(x):
    return x.sin() + 1
for compile_ in (torch.compile, dynview.compile):
    n[0] = 0
    c = compile_(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(c(x), f(x))
    print(compile_.__module__, c is f, n[0])
"""


@pytest.mark.parametrize("variable", ["TORCHDYNAMO_DISABLE", "TORCH_COMPILE_DISABLE"])
def test_the_environment_variables_that_turn_compiling_off(variable):
    env = dict(os.environ, **{variable: "1"})
    out = subprocess.run([sys.executable, "-c", ENV_SCRIPT], env=env, capture_output=True, text=True, check=True).stdout
    (torch_line, dv_line) = out.strip().splitlines()
    # TORCHDYNAMO_DISABLE: compile returns the function itself; TORCH_COMPILE_DISABLE: a wrapper that
    # compiles nothing. Either way no graph.
    assert torch_line.split()[1:] == dv_line.split()[1:]
    assert dv_line.split()[2] == "0"
    assert dv_line.split()[1] == str(variable == "TORCHDYNAMO_DISABLE")
