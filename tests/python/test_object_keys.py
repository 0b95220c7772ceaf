"""Dicts keyed by objects that compare by identity: instances of Python classes without __eq__, an
operator table keyed by OpOverloadPackets (torch.ops.aten.add), functools.partial objects, and
objects made in the trace. Read from a global table, built in the trace, iterated, mutated and
returned, each against eager (results, the dict's keys by identity, globals written) and against
torch.compile's per-call compile counts where torch.compile is right. Where a lookup's answer
depends on which object a call gives (an argument looked up in a table, two arguments that may be
one object), the objects are guarded by identity: torch.compile guards neither, and reuses a graph
whose answer eager's dict no longer gives."""
import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynview
from counting import counting_backend

pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)


class Tag:
    def __init__(self, n):
        self.n = n


T1, T2, T3 = Tag(1), Tag(2), Tag(3)
TAGS = [T1, T2, T3]
SCALES = {T1: 2.0, T2: 3.0}
HANDLERS = {torch.ops.aten.add: lambda a, b: a + b, torch.ops.aten.mul: lambda a, b: a * b}
GELU_TANH = functools.partial(F.gelu, approximate="tanh")
ACT_GAIN = {GELU_TANH: 0.5, F.relu: 1.0}
X = torch.randn(3, generator=torch.Generator().manual_seed(0))


def counts(compile_fn, fn, calls):
    backend, n = counting_backend()
    c = compile_fn(fn, backend=backend)
    out = []
    for args in calls:
        torch.testing.assert_close(c(*args), fn(*args))
        out.append(n[0])
    return out


def breaks():
    return [r["break_message"] for r in dynview._C.take_records() if r["has_break"]]


# ---- written the way libraries key dicts by objects --------------------------------------------

def scale_by_tag(x, i):  # a table of per-object settings, looked up by the object an index picks
    return x * SCALES.get(TAGS[i], 5.0)


def dispatch_ops(x, y):  # an operator table (masked tensors' _MASKEDTENSOR_FUNCTION_TABLE)
    out = x
    for op in (torch.ops.aten.add, torch.ops.aten.mul):
        if op in HANDLERS:
            out = HANDLERS[op](out, y)
    return out


def gain_of_partial(x):  # an activation's gain, keyed by the partial that is the activation
    return GELU_TANH(x) * ACT_GAIN[GELU_TANH] + F.relu(x) * ACT_GAIN[F.relu]


class Node:
    def __init__(self, name, parents=()):
        self.name, self.parents = name, parents


A = Node("a")
B = Node("b", (A,))
C = Node("c", (A, B))
ORDER = [A, B, C]


def evaluate_dag(x):  # a memo keyed by graph nodes, as torch.fx passes and autograd walks write it
    values = {}
    for node in ORDER:
        values[node] = x if not node.parents else sum(values[p] for p in node.parents) * 2
    return values[C], len(values)


class Slot:
    pass


def memo_of_made_objects(x):
    a, b = Slot(), Slot()
    cache = {a: x, b: x * 2}
    cache[a] = cache[a] + cache[b]
    cache.setdefault(b, None)
    cache.setdefault(Slot(), x * 3)
    return [v for v in cache.values()], a in cache, Slot() in cache


def keyed_by_argument(x, cfg):
    d = {cfg: x + 1}
    d[cfg] = d[cfg] * 2
    return d[cfg], cfg in d


CALLS = {
    "scale_by_tag": (scale_by_tag, [(X, 0), (X, 1), (X, 2), (X, 0)]),
    "dispatch_ops": (dispatch_ops, [(X, X + 1), (X + 2, X)]),
    "gain_of_partial": (gain_of_partial, [(X,), (X + 1,)]),
    "evaluate_dag": (evaluate_dag, [(X,), (X * 2,)]),
    "memo_of_made_objects": (memo_of_made_objects, [(X,), (X - 1,)]),
    "keyed_by_argument": (keyed_by_argument, [(X, T1), (X, T2), (X, Tag(4))]),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_dicts_keyed_by_objects_capture_as_torch_compile_does(name):
    fn, calls = CALLS[name]
    got = counts(dynview.compile, fn, calls)
    assert breaks() == []
    torch._dynamo.reset()
    try:
        want = counts(torch.compile, fn, calls)
    finally:
        torch._dynamo.reset()
    assert got == want


def make_and_return(x):
    a = Slot()
    d = {a: x + 1}
    d[a] = d[a] * 2
    return d, a


def test_an_object_made_in_the_trace_is_the_key_of_the_dict_returned():
    c = dynview.compile(make_and_return, backend="eager")
    seen = []
    for _ in range(2):
        d, a = c(X)
        assert type(a) is Slot and list(d) == [a] and next(iter(d)) is a
        torch.testing.assert_close(d[a], (X + 1) * 2)
        seen.append(a)
    assert seen[0] is not seen[1]  # a new object per call, as eager makes
    assert breaks() == []


RECORDED = {}


def record_per_tag(x, i):
    RECORDED[TAGS[i]] = x.sum()
    return x + len(RECORDED)


def test_a_global_dict_written_with_an_object_key_is_written_back():
    c = dynview.compile(record_per_tag, backend="eager")
    RECORDED.clear()
    torch.testing.assert_close(c(X, 0), X + 1)
    torch.testing.assert_close(c(X * 2, 1), X * 2 + 2)
    torch.testing.assert_close(c(X * 3, 0), X * 3 + 2)
    assert list(RECORDED) == [T1, T2] and all(a is b for a, b in zip(RECORDED, [T1, T2]))
    torch.testing.assert_close(RECORDED[T1], (X * 3).sum())
    assert breaks() == []


def same_object(x, a, b):
    d = {a: 1}
    return x + (1 if b in d else 2)


def test_two_arguments_told_apart_by_identity_are_guarded():
    # torch.compile reuses the first graph when the two arguments become one object, and answers 2
    # where eager's dict finds the key and answers 1; the objects are guarded here
    c = dynview.compile(same_object, backend="eager")
    for a, b in [(T1, T2), (T1, T1), (T2, T3), (T3, T3)]:
        torch.testing.assert_close(c(X, a, b), same_object(X, a, b))


def in_table(x, t):
    return x * SCALES.get(t, 7.0) + (1 if t in SCALES else 0)


def test_an_argument_looked_up_in_a_global_table_is_guarded_by_identity():
    c = dynview.compile(in_table, backend="eager")
    for t in [T1, T3, T2, Tag(1), T1]:
        torch.testing.assert_close(c(X, t), in_table(X, t))


KEY = T1


def lookup_global_key(x):
    return x * SCALES[KEY]


def test_a_global_rebound_to_another_key_recompiles():
    global KEY
    c = dynview.compile(lookup_global_key, backend="eager")
    try:
        torch.testing.assert_close(c(X), X * 2.0)
        KEY = T2
        torch.testing.assert_close(c(X), X * 3.0)
        SCALES[T2] = 4.0  # the table's value changes too
        torch.testing.assert_close(c(X), X * 4.0)
    finally:
        KEY = T1
        SCALES[T2] = 3.0


def test_an_operator_table_changed_between_calls_is_seen():
    c = dynview.compile(dispatch_ops, backend="eager")
    torch.testing.assert_close(c(X, X), (X + X) * X)
    old = HANDLERS.pop(torch.ops.aten.mul)
    try:
        torch.testing.assert_close(c(X, X), X + X)
        HANDLERS[torch.ops.aten.mul] = lambda a, b: a - b
        torch.testing.assert_close(c(X, X), (X + X) - X)
    finally:
        HANDLERS[torch.ops.aten.mul] = old


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.acts = {T1: nn.ReLU(), T2: nn.Tanh()}

    def forward(self, x, i):
        return self.acts[TAGS[i]](self.lin(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_module_holding_a_table_keyed_by_objects(backend):
    m = Gated()
    c = dynview.compile(m, backend=backend)
    for i in (0, 1, 0):
        torch.testing.assert_close(c(X, i), m(X, i))
    assert breaks() == []
