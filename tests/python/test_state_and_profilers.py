"""Process state that compiled code reads, and profilers around it, as torch.compile handles them:
torch.autograd._profiler_enabled() and torch.is_anomaly_enabled() are constants of a capture that a
call under the other state compiles again (they were constants with no guard: a profiled or
anomaly-checked call ran the other branch); a torch.profiler.profile() block inside compiled code is
ignored while capturing, as TorchDynamo ignores it. Results against eager, counts against torch.compile."""
import warnings

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def both(run):
    torch._dynamo.reset()
    theirs = run(torch.compile)
    torch._dynamo.reset()
    dynview.reset()
    ours = run(dynview.compile)
    return theirs, ours


def shift_when_profiled(x):
    if torch.autograd._profiler_enabled():  # (model code that adds profiler annotations only then)
        return x + 1
    return x - 1


def shift_when_anomaly_checked(x):
    if torch.is_anomaly_enabled():
        return x + 1
    return x - 1


@pytest.mark.parametrize("fn, block", [
    (shift_when_profiled, lambda: torch.autograd.profiler.profile()),
    (shift_when_anomaly_checked, lambda: torch.autograd.detect_anomaly()),
], ids=["profiler_enabled", "anomaly_enabled"])
def test_a_state_read_as_a_constant_compiles_again_under_the_other_state(fn, block):
    x = torch.zeros(2)

    def run(compile_):
        cnt = CompileCounter()
        f = compile_(fn, backend=cnt)
        got = [f(x)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (detect_anomaly warns that it is slow)
            with block():
                got.append(f(x))
        got.append(f(x))
        for g, want in zip(got, (x - 1, x + 1, x - 1)):
            torch.testing.assert_close(g, want)
        return cnt.frame_count

    theirs, ours = both(run)
    assert ours == theirs == 2


def profiled_step(x, w):
    with torch.profiler.profile():  # (a profiling block left in a training step)
        y = torch.relu(x @ w)
    with torch.autograd.profiler.profile():
        z = y.sum(-1)
    return z * 2


def test_a_profiler_block_inside_compiled_code_is_ignored_as_torch_compile_ignores_it():
    x, w = torch.randn(3, 4), torch.randn(4, 5)

    def run(compile_):
        cnt = CompileCounter()
        out = compile_(profiled_step, backend=cnt)(x, w)
        torch.testing.assert_close(out, torch.relu(x @ w).sum(-1) * 2)
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs
    records = dynview._C.take_records()
    assert not [r["break_message"] for r in records if r["break_id"]]
