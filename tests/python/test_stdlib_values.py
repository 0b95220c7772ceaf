"""Immutable values of the standard library inside the trace: regular expressions (the re module's
functions over constants, compiled patterns and their matches) and datetime's values. TorchDynamo
folds re.match/search/sub/... over constant arguments and reads a compiled pattern or a match as
a constant guarded by identity (ConstantLikeVariable); before, the first call to one of them broke
the frame (re's module cache, or a method of a live object). Each case is written the way model
code uses them (parameter names to layer indices, activation names, shape specs) and checked
against eager (values, arguments after the call) and torch.compile's per-call compile counts."""
import datetime
import re

import pytest
import torch

import dynview
from test_lazy_attributes import run_both
from test_lazy_sequences import _reset  # noqa: F401  (the engines reset around each test, autouse)

X = torch.ones(3)

_LAYER = re.compile(r"layers\.(\d+)\.")


def scale_by_layer(x, name, scales):
    # per-layer scaling keyed by a parameter's name, as layer-wise learning-rate decay code reads it
    m = _LAYER.search(name)
    idx = int(m.group(1)) if m is not None else 0
    return x * scales[idx]


def test_a_compiled_pattern_of_the_module_searches_at_trace_time():
    scales = [1.0, 2.0, 3.0]
    calls = [lambda: (X, "model.layers.1.attn.weight", scales), lambda: (X, "model.layers.1.attn.weight", scales),
             lambda: (X, "model.layers.2.mlp.bias", scales), lambda: (X, "embed.weight", scales)]
    dv, td, guards = run_both(scale_by_layer, calls)
    assert dv == td == [1, 1, 2, 3]
    # guarded by its value (TorchDynamo by identity): an equal pattern compiled again hits the cache
    assert any(g.startswith("G['_LAYER'] == re.compile(") for g in guards), guards
    assert not [g for g in guards if "G['re']" in g], guards


def activation(x, act):
    # an activation chosen by name, case-insensitive, as configs spell them
    if re.match(r"gelu", act, re.IGNORECASE):
        return torch.nn.functional.gelu(x)
    if re.fullmatch(r"relu\d*", act):
        return torch.relu(x)
    return x * 2


def test_re_match_with_flags_and_fullmatch_fold_over_the_name():
    calls = [lambda: (X, "GELU_new"), lambda: (X, "gelu"), lambda: (X, "relu6"), lambda: (X, "silu")]
    dv, td, _ = run_both(activation, calls)
    assert dv == td == [1, 2, 3, 4]


def reshape_by_spec(x, spec):
    # a layout given as a string ("2x3"), split into sizes
    dims = [int(d) for d in re.findall(r"\d+", spec)]
    return x.reshape(*dims), re.split(r"x", spec), re.sub(r"x", "*", spec), re.subn("x", "", spec)


def test_findall_split_sub_and_subn_over_a_spec():
    x = torch.arange(6.0)
    calls = [lambda: (x, "2x3"), lambda: (x, "2x3"), lambda: (x, "3x2")]
    dv, td, _ = run_both(reshape_by_spec, calls)
    assert dv == td == [1, 1, 2]


def rename(x, names):
    out = {}
    pattern = re.compile(r"^(encoder|decoder)\.")
    for i, n in enumerate(names):
        out[pattern.sub("", re.escape(n).replace("\\", ""))] = x * i
    return out, pattern.groups, pattern.pattern


def test_a_pattern_compiled_in_the_trace_and_its_attributes():
    calls = [lambda: (X, ["encoder.q", "decoder.k"]), lambda: (X, ["encoder.q", "decoder.k"])]
    dv, td, _ = run_both(rename, calls)
    assert dv == td == [1, 1]


PAT = re.compile(r"block(\d+)")


def groups_of_global(x):
    return x * PAT.groups + len(PAT.pattern)


def test_a_c_member_of_a_pattern_read_by_a_guard_holds_on_the_next_call():
    # PAT.groups is a C member holding a Py_ssize_t: the guard read it as missing, and every call
    # compiled again
    dv, td, guards = run_both(groups_of_global, [lambda: (X,), lambda: (X,), lambda: (X,)])
    assert dv == td == [1, 1, 1]


def group_of_match(x, m):
    return x * int(m.group(1)), m.span()


def test_a_match_passed_in_is_read_as_a_constant_guarded_by_identity():
    m1, m2 = PAT.match("block3"), PAT.match("block5")
    compiled = dynview.compile(group_of_match, backend="eager")
    for m in (m1, m1, m2):
        got, want = compiled(X, m), group_of_match(X, m)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    graphs = [e for e in dynview._C.cache_entries(group_of_match.__code__)]
    assert len(graphs) == 2  # one per match object


def bad_pattern(x, p):
    return x * len(re.findall(p, "aaa"))


def test_a_bad_pattern_raises_re_error_as_eager():
    with pytest.raises(re.error) as want:
        bad_pattern(X, "(a")
    with pytest.raises(re.error) as got:
        dynview.compile(bad_pattern, backend="eager")(X, "(a")
    assert str(got.value) == str(want.value)


TIMEOUT = datetime.timedelta(minutes=2)
EPOCH = datetime.date(2020, 1, 1)


def scaled_by_time(x):
    return x * TIMEOUT.total_seconds() + EPOCH.toordinal() % 7 + TIMEOUT.days


def test_datetime_values_are_read_as_constants():
    # torch.compile breaks once here (two graphs); dynview reads both values as constants: one
    dv, td, guards = run_both(scaled_by_time, [lambda: (X,), lambda: (X,)])
    assert dv == [1, 1] and td[0] >= dv[0] and td[1] == td[0]
    assert "G['TIMEOUT'] == datetime.timedelta(seconds=120)" in guards, guards
    assert not [g for g in guards if "G['TIMEOUT']." in g], guards  # its attributes need no guard of their own


def late_by(x, deadline, now):
    return x * (deadline - now).total_seconds()


def test_datetime_arguments_are_guarded_by_value():
    # an equal timestamp made again hits the cache; another one compiles again (torch.compile runs
    # this frame eagerly: its datetime arithmetic breaks)
    t0 = datetime.datetime(2024, 5, 1, 12, 0, 0)
    calls = [lambda: (X, t0 + datetime.timedelta(seconds=30), t0), lambda: (X, t0 + datetime.timedelta(seconds=30), t0),
             lambda: (X, t0 + datetime.timedelta(seconds=60), t0)]
    dv, td, _ = run_both(late_by, calls)
    assert dv == [1, 1, 2]


def now_in_trace(x):
    return x * datetime.datetime.now().microsecond


def test_datetime_now_still_breaks():
    # a C class method whose answer changes from call to call is not folded: a break with a reason
    dynview._C.take_records()
    compiled = dynview.compile(now_in_trace, backend="eager")
    compiled(X)
    breaks = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert len(breaks) == 1 and "datetime.now" in breaks[0], breaks
