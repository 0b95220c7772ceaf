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
from test_compile_api import both

pytestmark = pytest.mark.usefixtures("fresh_engine")


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


class _Setting:
    """A torch setting a model reads (to choose a kernel, a precision, a fallback) and its two values."""

    def __init__(self, read, turn_on, turn_off):
        self.read, self.turn_on, self.turn_off = read, turn_on, turn_off


def _set_attr(owner, name, value):
    return lambda: setattr(owner, name, value)


SETTINGS = {
    "float32_matmul_precision": _Setting(lambda: torch.get_float32_matmul_precision() == "high",
                                         lambda: torch.set_float32_matmul_precision("high"),
                                         lambda: torch.set_float32_matmul_precision("highest")),
    "warn_always": _Setting(torch.is_warn_always_enabled, lambda: torch.set_warn_always(True),
                            lambda: torch.set_warn_always(False)),
    "cudnn_enabled": _Setting(lambda: not torch.backends.cudnn.enabled,
                              _set_attr(torch.backends.cudnn, "enabled", False), _set_attr(torch.backends.cudnn, "enabled", True)),
    "fill_uninitialized_memory": _Setting(lambda: not torch.utils.deterministic.fill_uninitialized_memory,
                                          _set_attr(torch.utils.deterministic, "fill_uninitialized_memory", False),
                                          _set_attr(torch.utils.deterministic, "fill_uninitialized_memory", True)),
    "cublas_allow_tf32": _Setting(lambda: torch.backends.cuda.matmul.allow_tf32,
                                  _set_attr(torch.backends.cuda.matmul, "allow_tf32", True),
                                  _set_attr(torch.backends.cuda.matmul, "allow_tf32", False)),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_torch_setting_read_in_compiled_code_is_never_a_stale_constant(name):
    # the answer is read on every call (a break, or a guard that compiles again), never the value
    # the first call saw: a wrong branch is the worst outcome
    setting = SETTINGS[name]
    setting.turn_off()

    def pick(x):
        if setting.read():
            return x + 1
        return x - 1

    f = dynview.compile(pick, backend="eager")
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(f(x), x - 1)
        setting.turn_on()
        torch.testing.assert_close(f(x), x + 1)
    finally:
        setting.turn_off()
    torch.testing.assert_close(f(x), x - 1)


def deterministic_conv_path(x):
    # model code that picks a path by the cuDNN and cuBLAS flags (LayoutLMv2-style determinism
    # switches, TF32 checks before a matmul)
    if torch.backends.cudnn.deterministic or not torch.backends.cudnn.enabled:
        y = x.cumsum(0)
    else:
        y = x * 2
    if torch.backends.cuda.matmul.allow_tf32:
        return y + 1
    return y - 1


BACKEND_FLAGS = [(torch.backends.cudnn, "deterministic"), (torch.backends.cudnn, "enabled"),
                 (torch.backends.cuda.matmul, "allow_tf32")]


def test_backend_flags_read_in_compiled_code_are_guarded_constants():
    # a read of torch.backends.cudnn.* / torch.backends.cuda.matmul.allow_tf32 is a constant of the
    # capture that the global-state guard checks (it was a break, and the frame ran eagerly): one
    # graph per combination of the flags, no break, each call's branch eager's
    saved = [getattr(owner, name) for owner, name in BACKEND_FLAGS]
    x = torch.arange(4.0)
    settings = [(False, True, False), (True, True, False), (False, True, True), (False, True, False), (True, True, False)]
    f = dynview.compile(deterministic_conv_path, backend="eager")
    dynview._C.take_records()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch warns about the TF32 setters' deprecation)
            for values in settings:
                for (owner, name), v in zip(BACKEND_FLAGS, values):
                    setattr(owner, name, v)
                torch.testing.assert_close(f(x), deterministic_conv_path(x))
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for (owner, name), v in zip(BACKEND_FLAGS, saved):
                setattr(owner, name, v)
    records = dynview._C.take_records()
    assert not any(r["has_break"] for r in records)
    assert len(records) == 3, [r["reason"] for r in records]  # three distinct settings, the others hit
    assert "torch.backends.cudnn.deterministic: expected False" in records[1]["reason"]
    assert "torch.backends.cuda.matmul.allow_tf32: expected False" in records[2]["reason"]
