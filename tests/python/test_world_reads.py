"""Calls that read the world outside the program (the clock, the OS's random bytes, the date) give
another answer on every call. dynview used to call such a C function once, at trace time, and keep
its answer as a constant of the compiled code: every later call returned the first call's time. Now
only the C functions of modules whose answers depend on the arguments alone (math, operator, str's
methods, torch, NumPy but its random module ...) fold over constants; any other breaks the graph, as
TorchDynamo skips C functions it does not know. Each case against eager and torch.compile."""
import datetime
import math
import os
import random
import time
import uuid

import pytest
import torch
import torch.nn as nn
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

import dynview
from test_compile_api import both

pytestmark = pytest.mark.usefixtures("fresh_engine")


def stamped(x):
    return x + time.monotonic_ns() % 1_000_003  # (a timestamp mixed into a result)


def elapsed_since_start(x):
    t0 = time.perf_counter()
    y = x * 2
    return y, time.perf_counter() - t0 + t0


def noise_from_os(x):
    return x + int.from_bytes(os.urandom(8), "little") % 1_000_003


def run_id(x):
    return x + uuid.uuid4().int % 1_000_003  # (uuid4 is Python code over os.urandom)


def time_of_day(x):
    now = datetime.datetime.now()
    return x + now.microsecond + now.second * 1_000_000


def scalar_of(out):
    return out[1] if isinstance(out, tuple) else float(out[0])


@pytest.mark.parametrize("fn", [stamped, elapsed_since_start, noise_from_os, run_id, time_of_day],
                         ids=lambda fn: fn.__name__)
def test_a_c_function_reading_the_world_breaks_and_answers_anew_on_every_call(fn):
    x = torch.zeros(1, dtype=torch.float64)

    def run(compile_):
        counters.clear()
        f = compile_(fn, backend="eager")
        seen = []
        for _ in range(3):
            seen.append(scalar_of(f(x)))
            time.sleep(0.002)
        return seen, sum(counters["graph_break"].values())

    (theirs, td_breaks), (ours, _) = both(run)
    records = dynview._C.take_records()
    assert td_breaks >= 1  # torch.compile does not trace these either
    assert any(r["has_break"] and "C function whose answer may change" in r["break_message"] for r in records)
    assert len(set(theirs)) == 3
    assert len(set(ours)) == 3  # a fresh answer on each call, as eager's (it was the first call's, 3 times)


def pure_c_functions(x):
    # C functions whose answers depend on their arguments alone still fold into the graph
    scale = math.sqrt(x.shape[-1]) * math.log2(8)
    n = int.from_bytes(b"\x02\x00", "little") + "a,b,c".count(",")
    return x * scale + n + sum(map(abs, (-1, 2)))


def test_pure_c_functions_over_constants_still_fold_into_one_graph():
    x = torch.randn(2, 4)

    def run(compile_):
        counters.clear()
        out = compile_(pure_c_functions, backend="eager")(x)
        torch.testing.assert_close(out, pure_c_functions(x))
        return sum(counters["graph_break"].values())

    theirs, _ = both(run)
    records = dynview._C.take_records()
    assert theirs == 0
    assert len(records) == 1 and not records[0]["has_break"]


def offset_by_timestamp(x, when):
    return x + when.microsecond + when.second * 1_000_000  # (a logged event's time mixed in)


def test_attributes_of_an_object_of_a_c_class_given_to_the_frame_are_guarded_as_read():
    # the object is guarded by its type alone: what is read of it has its own guard, so a later
    # call's datetime gets its own answer (it got the first call's)
    x = torch.zeros(1, dtype=torch.float64)
    whens = [datetime.datetime(2026, 1, 1, 0, 0, s, us) for s, us in ((1, 5), (1, 7), (2, 7), (1, 5))]

    def run(compile_):
        f = compile_(offset_by_timestamp, backend="eager")
        out = [f(x, w) for w in whens]
        for o, w in zip(out, whens):
            torch.testing.assert_close(o, offset_by_timestamp(x, w))
        return [float(o[0]) for o in out]

    theirs, ours = both(run)
    assert ours == theirs == [1_000_005.0, 1_000_007.0, 2_000_007.0, 1_000_005.0]


# Python's random module: a draw over constants (random.uniform(0, 1), randint, randrange, random())
# is made by the compiled code before its graph, as torch.compile makes it (its random_calls); the
# trace may move it, store it and return it. Code that computes with it gets it as a graph input, as
# torch.compile passes its random values: unguarded (its value is known only when the compiled code
# runs), so code that branches on it or makes a size of it breaks there. The generator's state after
# each call is eager's.
class LayerDropStack(nn.Module):
    """Layers skipped at random in training (LayerDrop, as musicgen's and fairseq's decoders write it)."""

    def __init__(self, layerdrop=0.5):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.layerdrop = layerdrop

    def forward(self, x):
        for layer in self.layers:
            dropout_probability = random.uniform(0, 1)
            if self.training and dropout_probability < self.layerdrop:
                continue
            x = layer(x)
        return x


def draws_returned(x):
    k = random.randint(0, 1000)
    picks = [random.randrange(10), random.random()]
    return x * 2, k, picks


def run_seeded(fn, x, calls=3):
    outs = []
    random.seed(1234)
    for _ in range(calls):
        outs.append(fn(x))
    return outs, random.random()  # (the generator's state after the calls)


@pytest.mark.parametrize("case", ["layer_drop_in_eval", "draws_returned"])
def test_random_module_draws_are_made_by_the_compiled_code_as_eager_makes_them(case):
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    fn = LayerDropStack().eval() if case == "layer_drop_in_eval" else draws_returned
    want, want_next = run_seeded(fn, x)

    def run(compile_):
        cnt = CompileCounter()
        got, got_next = run_seeded(compile_(fn, backend=cnt), x)
        torch.testing.assert_close(got, want)
        assert got_next == want_next  # the generator advanced exactly as eager advanced it
        return cnt.frame_count

    theirs, ours = both(run)
    records = dynview._C.take_records()
    assert not any(r["has_break"] for r in records)
    # one graph, hit on the later calls: the draws are not guarded (torch.compile breaks at
    # random.random(), whose builtin method its list of draws does not match, and compiles twice)
    assert ours == 1 and theirs == (1 if case == "layer_drop_in_eval" else 2)


def reads_a_draw(x):
    if random.random() < 0.5:  # (the value decides the path: a break)
        return x + 1
    return x - 1


class ScaleJitter(nn.Module):
    """A random rescaling of the input, as augmentation layers write it."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        scale = random.uniform(0.9, 1.1)
        return self.proj(x * scale)


def noise_and_shift(x):
    s = random.uniform(0.5, 1.5)
    return x * s + random.randint(0, 10)


def draw_in_arithmetic_returned(x):
    a = random.uniform(1, 2)
    b = a * 2 + 1
    return x * b, b, a, random.randrange(3) * 2


def branch_after_tensor_work(x):
    s = random.uniform(0, 1)
    y = x * s
    if s < 0.5:  # (a guard on the draw: the break, after the graph that made y)
        return y + 1
    return y - 1


def _seeded_calls(fn, x, calls):
    random.seed(7)
    outs = [fn(x) for _ in range(calls)]
    return outs, random.random()


@pytest.mark.parametrize("case", ["scale_jitter", "noise_and_shift", "draw_in_arithmetic_returned", "branch_after_tensor_work"])
def test_a_draw_the_code_computes_with_is_a_graph_input_drawn_on_every_call(case):
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    fn = {"scale_jitter": ScaleJitter(), "noise_and_shift": noise_and_shift,
          "draw_in_arithmetic_returned": draw_in_arithmetic_returned, "branch_after_tensor_work": branch_after_tensor_work}[case]
    want, want_next = _seeded_calls(fn, x, 6)

    def run(compile_):
        cnt = CompileCounter()
        got, got_next = _seeded_calls(compile_(fn, backend=cnt), x, 6)
        if compile_ is dynview.compile or case != "draw_in_arithmetic_returned":  # (torch.compile runs this one eagerly)
            torch.testing.assert_close(got, want)
            assert got_next == want_next
        return cnt.frame_count

    theirs, ours = both(run)
    records = dynview._C.take_records()
    breaks = [r["break_message"] for r in records if r["has_break"]]
    if case == "branch_after_tensor_work":
        # the graph before the branch, then one per side of it: torch.compile's count
        assert ours == theirs and len(breaks) == 1 and "a guard on a number drawn by Python's random module" in breaks[0]
    else:
        # one graph, whatever the draws: the later calls hit (no guard reads a draw)
        assert breaks == [] and ours == 1
        assert theirs == (0 if case == "draw_in_arithmetic_returned" else 1)  # (torch.compile fails to capture that one)
    if case == "noise_and_shift":
        graph = next(r["graph"] for r in records if r["graph"] is not None)
        assert [n.name for n in graph.graph.nodes if n.op == "placeholder"][1:] == ["_as_tensor_random_value_0_", "_random_value_1_"]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_draws_given_to_a_backend_that_compiles_are_the_values_drawn_on_each_call(backend):
    x = torch.randn(3, 4)
    want, want_next = _seeded_calls(noise_and_shift, x, 4)
    dynview.reset()
    got, got_next = _seeded_calls(dynview.compile(noise_and_shift, backend=backend), x, 4)
    torch.testing.assert_close(got, want)
    assert got_next == want_next and len(dynview._C.cache_entries(noise_and_shift.__code__)) == 1


def test_with_dynamic_false_a_draw_the_code_reads_breaks():
    x = torch.randn(2, 4)
    want, _ = _seeded_calls(noise_and_shift, x, 3)
    dynview.reset()
    dynview._C.take_records()
    got, _ = _seeded_calls(dynview.compile(noise_and_shift, backend="eager", dynamic=False), x, 3)
    torch.testing.assert_close(got, want)
    assert any(r["has_break"] and "drawn by Python's random module" in r["break_message"] for r in dynview._C.take_records())


def test_code_reading_a_draw_breaks_and_answers_as_eager():
    x = torch.zeros(2)
    want, want_next = run_seeded(reads_a_draw, x, calls=6)
    dynview.reset()
    got, got_next = run_seeded(dynview.compile(reads_a_draw, backend="eager"), x, calls=6)
    torch.testing.assert_close(got, want)
    assert got_next == want_next
    records = dynview._C.take_records()
    assert any(r["has_break"] and "drawn by Python's random module" in r["break_message"] for r in records)
