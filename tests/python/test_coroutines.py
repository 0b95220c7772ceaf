"""Coroutines: `async def` frames are not traced (they run eagerly), but code that runs in them still
is where it asks to be: an `async def` that calls a compiled function gets that
function captured and cached, a compiled coroutine function gives eager's results, and calling a
coroutine function inside a captured frame is a graph break (DV0004) that still hands back a
coroutine to await."""
import asyncio

import pytest
import torch

import dynview


def body(x):
    return torch.relu(x) * 2 + 1


async def add_later(x, k):
    await asyncio.sleep(0)  # a real suspension: the event loop runs something else here
    return x + k


def test_async_def_that_calls_a_compiled_function():
    dynview.reset()
    cf = dynview.compile(body, backend="eager")

    async def caller(x):
        a = cf(x)
        b = await add_later(a, 1)  # suspended and resumed between the two compiled calls
        return cf(b)

    async def both(x):  # two callers interleaved on one loop
        return await asyncio.gather(caller(x), caller(-x))

    x = torch.randn(4, 5)
    got = asyncio.run(both(x))
    want = [body(body(x) + 1), body(body(-x) + 1)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    (entry,) = dynview._C.cache_entries(body.__code__)  # one capture, then cache hits
    assert entry["hits"] == 3
    dynview.reset()


async def scaled(x, k):
    y = torch.sin(x) * k
    y = await add_later(y, 2)
    if k > 1:
        y = y.cos()
    return y.sum(0)


# explain runs the function and drops what it returns: here a coroutine nobody awaits.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
def test_compiled_coroutine_function_gives_eagers_results():
    dynview.reset()
    x = torch.randn(3, 4)
    cf = dynview.compile(scaled, backend="eager")
    coro = cf(x, 3)
    assert asyncio.iscoroutine(coro)
    torch.testing.assert_close(asyncio.run(coro), asyncio.run(scaled(x, 3)))
    torch.testing.assert_close(asyncio.run(cf(x, 1)), asyncio.run(scaled(x, 1)))
    # The coroutine's frame runs eagerly: nothing is cached for it and explain counts nothing.
    # (torch 2.13's TorchDynamo does capture it, and crashes when the coroutine is awaited:
    # eager is the oracle here.)
    assert dynview._C.cache_entries(scaled.__code__) == []
    ours = dynview.explain(scaled)(x, 3)
    assert (ours.graph_count, ours.graph_break_count) == (0, 0)
    dynview.reset()


def starts(x):
    y = x * 2
    c = add_later(y, 1)  # a coroutine made in the frame: not traced, the frame splits here
    return c, y + 1


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
def test_calling_a_coroutine_function_in_a_captured_frame_breaks():
    dynview.reset()
    x = torch.randn(5)
    e = dynview.explain(starts)(x)
    assert [b.break_id for b in e.break_reasons] == ["DV0004"]
    dynview.reset()
    c, y = dynview.compile(starts, backend="eager")(x)
    torch.testing.assert_close(asyncio.run(c), x * 2 + 1)
    torch.testing.assert_close(y, x * 2 + 1)
    dynview.reset()


def runs_a_loop(x):
    y = x + 1
    z = asyncio.run(scaled(y, 3))  # the coroutine's frames run while the frame hook is on
    return body(z)


def test_coroutine_run_inside_a_compiled_frame():
    dynview.reset()
    x = torch.randn(3, 4)
    cf = dynview.compile(runs_a_loop, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(cf(x), runs_a_loop(x))
    # The coroutine's own frame is skipped, the frames around it are captured.
    assert dynview._C.cache_entries(scaled.__code__) == []
    assert dynview._C.cache_entries(runs_a_loop.__code__)
    dynview.reset()
    e = dynview.explain(runs_a_loop)(x)  # split at the coroutine function's call: a graph each side
    assert (e.graph_count, [b.break_id for b in e.break_reasons]) == (2, ["DV0004"])
    dynview.reset()
