"""Closure cells of functions from outside the compiled frame, as TorchDynamo treats them: a nonlocal
write inside one (a decorator's call counter, a context manager's depth) is replayed on the real
cell after the graph, so the counter moves exactly as in eager (it was a break); an int a closure
holds is a local source, made symbolic once it changes between calls (it was a constant per value,
a compile per call). Results and counters against eager, compile counts against torch.compile."""
import contextlib

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import dynview
from test_compile_api import both

pytestmark = pytest.mark.usefixtures("fresh_engine")


def make_counted(fn):
    calls = 0

    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        return fn(*args, **kwargs) * calls

    wrapper.count = lambda: calls
    return wrapper


def make_tracker():
    depth = 0

    @contextlib.contextmanager
    def track():
        nonlocal depth
        depth += 1
        yield depth

    return track, lambda: depth


def run_counted(compile_):
    scaled = make_counted(lambda t: t * 2)

    def step(x):
        return scaled(x) + scaled(x + 1)

    cnt = CompileCounter()
    f = compile_(step, backend=cnt)
    eager_scaled = make_counted(lambda t: t * 2)
    outs = []
    for i in range(3):
        x = torch.full((3,), float(i))
        got = f(x)
        want = eager_scaled(x) + eager_scaled(x + 1)
        torch.testing.assert_close(got, want)
        outs.append((scaled.count(), eager_scaled.count()))
    return outs, cnt.frame_count


def run_tracked(compile_):
    track, depth = make_tracker()

    def step(x):
        with track() as n:
            y = x * n
        return y + 1

    cnt = CompileCounter()
    f = compile_(step, backend=cnt)
    got = [f(torch.ones(2)) for _ in range(3)]
    for i, g in enumerate(got, 1):
        torch.testing.assert_close(g, torch.ones(2) * i + 1)
    return depth(), cnt.frame_count


@pytest.mark.parametrize("run", [run_counted, run_tracked], ids=["decorator_counter", "contextmanager_depth"])
def test_a_nonlocal_counter_of_an_outside_function_moves_as_in_eager(run):
    theirs, ours = both(run)
    assert ours == theirs
    breaks = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert not breaks, breaks


def _adder(i):
    return lambda y: y + i


def test_an_int_a_closure_holds_becomes_symbolic_once_it_changes():
    # automatic dynamic shapes on a local source: the int a lambda closes over changes on every call
    # (a step count, an offset); after the first change it is a graph input, not a constant per value
    x = torch.randn(5)

    def run(compile_):
        cnt = CompileCounter()
        h = compile_(lambda t, g: g(t), backend=cnt)
        for i in range(6):
            torch.testing.assert_close(h(x, _adder(i)), x + i)
        return cnt.frame_count

    theirs, ours = both(run)
    assert ours == theirs == 2
