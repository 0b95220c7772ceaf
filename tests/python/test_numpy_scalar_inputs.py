"""numpy.float64 arguments (a mixup `lam` drawn with np.random.beta each step, an epsilon read from a
NumPy config), compiled as a Python float argument is: a constant on the first compile, a symbolic
float once it changes (the graph takes it as a 0-d float64 tensor read with item()), later values
reusing that graph -- while eager's NumPy types stay what the code sees: `lam * 2` returned is an
np.float64, `lam > 0.5` an np.bool_, and torch.tensor(lam) is float64 where torch.tensor(0.5) is
float32. Outputs (values, dtypes and Python types) equal eager; compile counts equal torch.compile's
for the same values given as Python floats. (torch.compile takes a NumPy scalar as a 0-d array and
compiles once, but computes some of these functions in float64 where eager computes float32.)
numpy.int64 arguments (a step, a timestep from np.random.randint) likewise, as an int argument is: a
SymInt input once it changed, NumPy's int64 and float64 where eager's results are."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dynview
from counting import counting_backend

pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)

X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 3, 5, 1])
LAMS = [np.float64(v) for v in (0.3, 0.7, 0.55, 0.91)]


# ---- written the way training code takes a NumPy scalar ---------------------------------------

def mixup(x, lam):
    index = torch.arange(x.shape[0] - 1, -1, -1)
    return lam * x + (1 - lam) * x[index, :]


def mixup_criterion(x, y, lam):  # the mixup paper's loss: lam * ce(a) + (1 - lam) * ce(b)
    logits = x.log_softmax(-1)
    return lam * F.nll_loss(logits, y) + (1 - lam) * F.nll_loss(logits, y.flip(0))


def mix_in_place(x, lam):  # timm's Mixup._mix_batch: x.mul_(lam).add_(x_flipped)
    x = x.clone()
    x_flipped = x.flip(0).mul_(1.0 - lam)
    x.mul_(lam).add_(x_flipped)
    return x


def cutmix_area(x, lam):
    ratio = np.float64(1.0) - lam
    return x * ratio, ratio


def label_smoothing(x, y, eps):
    n = x.shape[-1]
    target = torch.full_like(x, eps / n)
    target.scatter_(1, y.unsqueeze(1), 1.0 - eps + eps / n)
    return -(target * x.log_softmax(-1)).sum(-1).mean()


def blend_and_report(x, lam):
    mixed = x * lam + x.flip(0) * -lam
    return mixed, lam * 2, -lam, lam + 1, lam - lam * lam, [lam, lam * x.shape[0]], lam > 0.5


def branch_on_lam(x, lam):
    if lam > 0.5:
        return x * lam
    return x - lam


def types_of_lam(x, lam):
    return type(lam).__name__, isinstance(lam, np.floating), isinstance(lam, float), x * lam


def float_of_lam(x, lam):
    return x * float(lam), int(lam * 10)


def log_lam(x, lam):  # a training step's progress line: formatted after the graph, NumPy's __format__
    line = f"mixup lam={lam:.3f}"
    return x * lam, line, "{:.2e}|{}".format(lam, lam * 2)


def same(a, b, ulps=False):
    """Equal as eager's: values, dtypes and Python types (np.float64 is not float). `ulps`: floats
    to a few units in the last place (NumPy's vectorised sin and cos round differently from math's)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            same(p, q, ulps)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        torch.testing.assert_close(a, b)
    elif ulps and isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-14), (a, b)
    else:
        assert a == b, (a, b)


def run(compile_fn, fn, args_of, values, check=True, ulps=False):
    backend, n = counting_backend()
    c = compile_fn(fn, backend=backend)
    counts = []
    for v in values:
        got = c(*args_of(v))
        if check:
            same(got, fn(*args_of(v)), ulps)
        counts.append(n[0])
    return counts


def breaks():
    return [r["break_message"] for r in dynview._C.take_records() if r["has_break"]]


CASES = {
    "mixup": (mixup, lambda v: (X, v)),
    "mixup_criterion": (mixup_criterion, lambda v: (X, Y, v)),
    "mix_in_place": (mix_in_place, lambda v: (X, v)),
    "cutmix_area": (cutmix_area, lambda v: (X, v)),
    "label_smoothing": (label_smoothing, lambda v: (X, Y, v)),
    "blend_and_report": (blend_and_report, lambda v: (X, v)),
    "branch_on_lam": (branch_on_lam, lambda v: (X, v)),
    "types_of_lam": (types_of_lam, lambda v: (X, v)),
    "float_of_lam": (float_of_lam, lambda v: (X, v)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_changing_numpy_float_compiles_as_a_float_does(name):
    fn, args_of = CASES[name]
    got = run(dynview.compile, fn, args_of, LAMS)
    assert breaks() == []
    torch._dynamo.reset()
    try:  # torch.compile's counts for the same values as Python floats (its np.float64(1.0) - lam is a 0-d array)
        want = run(torch.compile, fn, lambda v: args_of(float(v)), LAMS, check=False)
    finally:
        torch._dynamo.reset()
    assert got == want
    assert got[-1] <= 3, got  # (not a compile per value, as before)


def test_the_graph_takes_it_as_a_float_tensor_and_guards_its_type():
    c = dynview.compile(mixup, backend="eager")
    for v in LAMS:
        same(c(X, v), mixup(X, v))
    graphs = [r["graph"].code for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(graphs) == 2
    assert ".item()" in graphs[1] and "0.7" not in graphs[1], graphs[1]
    entries = dynview._C.cache_entries(mixup.__code__)
    symbolic = next(e for e in entries if e["hits"])
    assert "___check_type_id(L['lam'], numpy.float64)" in symbolic["guards"]
    assert symbolic["hits"] == 2
    # a Python float is another type: its own compile, eager's result
    same(c(X, 0.25), mixup(X, 0.25))
    assert len(dynview._C.cache_entries(mixup.__code__)) == 3


def tensors_of_lam(x, lam):
    return (torch.tensor(lam), torch.as_tensor(lam), torch.tensor([lam, 1.0]), torch.tensor([[lam], [2]]),
            torch.asarray([lam]), x.new_tensor(lam), torch.full((2,), lam), x * lam)


@pytest.mark.parametrize("dynamic", [None, True])
def test_tensors_made_of_it_have_numpys_dtype(dynamic):
    # torch.tensor(np.float64(0.3)) is float64, torch.tensor(0.3) float32: the factories that read
    # NumPy's dtype are given its constant (a compile per value, as torch.compile: same results)
    c = dynview.compile(tensors_of_lam, backend="eager", dynamic=dynamic)
    for v in LAMS:
        same(c(X, v), tensors_of_lam(X, v))
    assert breaks() == []


def numpy_reads_it(x, lam):
    return np.exp(lam), np.clip(lam, 0.2, 0.4), lam.item(), x * lam


def test_numpy_and_methods_read_its_value():
    c = dynview.compile(numpy_reads_it, backend="eager")
    for v in LAMS:
        same(c(X, v), numpy_reads_it(X, v))


# ---- NumPy's own functions of it: written as mixup / cutmix / augmentation code writes them --------

def cutmix_box(x, lam):  # CutMix's rand_bbox: the cut ratio of the area kept
    cut_rat = np.sqrt(1. - lam)
    h = x.shape[0] * cut_rat
    return x * cut_rat, h, np.add(cut_rat, 1), np.multiply(2, lam) - np.subtract(lam, 0.5)


def cutmix_box_math(x, lam):  # the same with math's functions and Python floats (torch.compile's oracle)
    cut_rat = math.sqrt(1. - lam)
    h = x.shape[0] * cut_rat
    return x * cut_rat, h, cut_rat + 1, 2 * lam - (lam - 0.5)


def rotate(x, theta):  # a rotation by an angle drawn with np.random.uniform
    c, s = np.cos(theta), np.sin(theta)
    rot = torch.stack([x[:, 0] * c - x[:, 1] * s, x[:, 0] * s + x[:, 1] * c], 1)
    return rot, np.tan(theta / 2), np.tanh(theta), np.arctan(theta), np.arcsin(theta / 4), np.log2(theta + 2)


def rotate_math(x, theta):
    c, s = math.cos(theta), math.sin(theta)
    rot = torch.stack([x[:, 0] * c - x[:, 1] * s, x[:, 0] * s + x[:, 1] * c], 1)
    return rot, math.tan(theta / 2), math.tanh(theta), math.atan(theta), math.asin(theta / 4), math.log2(theta + 2)


@pytest.mark.parametrize("fn, oracle", [(cutmix_box, cutmix_box_math), (rotate, rotate_math)])
def test_numpy_functions_of_it_keep_it_symbolic(fn, oracle):
    # np.sqrt(1. - lam) of a changing np.float64 is computed on its float in the graph (before, it
    # broke the graph on its first value and was specialised per value after): the compiles a
    # Python float gets under torch.compile with math's functions, eager's np.float64 results
    got = run(dynview.compile, fn, lambda v: (X, v), LAMS, ulps=True)
    assert breaks() == []
    torch._dynamo.reset()
    try:
        want = run(torch.compile, oracle, lambda v: (X, float(v)), LAMS, check=False)
    finally:
        torch._dynamo.reset()
    assert got == want == [1, 2, 2, 2]


def clipped(x, lam):  # lam = np.clip(lam, lo, hi), np.maximum(lam, floor): each bound a guard
    lam = np.clip(lam, 0.2, 0.8)
    return x * lam, lam, np.maximum(lam, 0.4), np.minimum(0.6, lam)


def test_clip_maximum_and_minimum_of_it_compile_per_side_not_per_value():
    values = [np.float64(v) for v in (0.3, 0.5, 0.9, 0.1, 0.55, 0.95, 0.7)]
    # 0.3 a constant; 0.5 symbolic, inside every bound; 0.9 above 0.8 (a float64 0.8 on); 0.1 below
    # 0.2 and 0.4; 0.55 as 0.5; 0.95 as 0.9; 0.7 above 0.6
    assert run(dynview.compile, clipped, lambda v: (X, v), values) == [1, 2, 3, 4, 4, 4, 5]
    assert breaks() == []


def nan_stays(x, lam):  # NumPy propagates a NaN through maximum, minimum and clip
    return np.maximum(0.5, lam), np.minimum(lam, 0.5), np.clip(lam, 0.0, 1.0), x + 1


def test_a_nan_scalar_stays_nan_as_numpy_keeps_it():
    c = dynview.compile(nan_stays, backend="eager")
    for v in (0.3, 0.7, float("nan"), 0.2):
        got, want = c(X, np.float64(v)), nan_stays(X, np.float64(v))
        assert [type(g) for g in got] == [type(w) for w in want]
        np.testing.assert_equal(got[:3], want[:3])


def augment_constants(x, lam):  # the functions of its constant (the first value) that NumPy computes
    return (x * np.exp(lam), np.log(lam), np.power(lam, 2), np.floor(lam * 10), np.round(lam, 1), np.abs(-lam),
            np.float32(lam) * np.float32(2), np.isfinite(lam), np.sign(lam - 0.5))


def test_numpy_functions_of_its_constant_are_computed_in_the_trace():
    c = dynview.compile(augment_constants, backend="eager")
    for v in LAMS[:1] + LAMS[:1]:
        same(c(X, v), augment_constants(X, v))
    assert breaks() == []
    assert len(dynview._C.cache_entries(augment_constants.__code__)) == 1
    for v in LAMS[1:]:  # (of a symbolic one, np.exp and np.log are of its value: a compile per value, no break)
        same(c(X, v), augment_constants(X, v))
    assert breaks() == []


def sqrt_of(x, lam):
    return x * np.sqrt(lam - 0.5)


def test_where_numpy_warns_eager_computes_it():
    # np.sqrt of a negative float64 is nan with a RuntimeWarning, each call: computed in the trace it
    # would warn once at compile time, and math.sqrt raises -- so it is a graph break, eager's call
    backend, n = counting_backend()
    c = dynview.compile(sqrt_of, backend=backend)
    counts = []
    for v in (0.25, 0.3, 0.2, 0.1):
        with pytest.warns(RuntimeWarning, match="invalid value"):
            got = c(X, np.float64(v))
        assert torch.isnan(got).all()
        counts.append(n[0])
    msgs = breaks()
    assert msgs and all("numpy.sqrt" in m for m in msgs), msgs
    # the nan handed on after the break is guarded as a NaN (NaN != NaN sent each call to a new compile)
    assert counts[1] == counts[-1], counts
    same(c(X, np.float64(0.75)), sqrt_of(X, np.float64(0.75)))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiling_backends(backend):
    for fn, args_of in (CASES["mixup_criterion"], CASES["mix_in_place"], (cutmix_box, None), (rotate, None), (clipped, None)):
        args_of = args_of or (lambda v: (X, v))  # (NumPy's functions of it: torch._sym_sqrt ... nodes, guarded bounds)
        c = dynview.compile(fn, backend=backend)
        for v in LAMS:
            same(c(*args_of(v)), fn(*args_of(v)), ulps=True)
    assert breaks() == []


def test_a_numpy_scalar_formatted_in_the_trace_is_formatted_after_the_graph():
    # the text is made by the transformed code, by np.float64's own __format__ (a symbolic one rebuilt
    # as NumPy's type): no break, and the compiles a Python float there gets. (torch.compile compiles
    # once for either: it guards a float only formatted by its type, which dynview does not mirror)
    got = run(dynview.compile, log_lam, lambda v: (X, v), LAMS)
    assert breaks() == []
    dynview.reset()
    as_floats = run(dynview.compile, log_lam, lambda v: (X, float(v)), LAMS)
    assert got == as_floats == [1, 2, 2, 2]
    dynview.reset()
    assert run(dynview.compile, log_step, lambda v: (X, v), STEPS) == [1, 2, 2, 2]  # (torch.compile: eager after its first compile)
    assert breaks() == []


# ---- numpy.int64: a step or an index taken from np.arange / np.random.randint -------------------

def window_of(x, start):  # a sliding window whose start comes from an np.arange
    return x[start:start + 2].sum(0), torch.roll(x, int(start), 0)


def warmup(x, step):  # a schedule read from a NumPy step counter
    return x * (step / 10), torch.full((2,), step) + 1


def step_report(x, step):
    return x + step, [step + 1, step * 2, step // 3, step % 5, -step, abs(step), step / 4, step > 4]


def log_step(x, step):
    return x + step, f"step {step:04d}", "{}/{}".format(step, step * 2)


def timestep_tensor(x, t):  # a diffusion step drawn with np.random.randint, made a tensor
    tt = torch.tensor([t])
    return x * tt, tt, x.narrow(1, t % 3, 2)


def pick_scale(x, i):  # a list indexed by it: the item (specialised, as for an int)
    scales = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    return x * scales[i]


STEPS = [np.int64(v) for v in (3, 4, 7, 9)]
INT_CASES = {
    "window_of": window_of,
    "warmup": warmup,
    "step_report": step_report,
    "timestep_tensor": timestep_tensor,
    "pick_scale": pick_scale,
}


@pytest.mark.parametrize("name", list(INT_CASES))
def test_a_changing_numpy_int_compiles_as_an_int_does(name):
    # an int that changed is a SymInt input (given int(step)), the value a NumPy int64 where eager
    # can tell: arithmetic with ints, //, %, -, abs are np.int64, / and a float among them np.float64
    fn = INT_CASES[name]
    got = run(dynview.compile, fn, lambda v: (X, v), STEPS)
    assert breaks() == []
    torch._dynamo.reset()
    try:  # torch.compile's counts for the same values as Python ints (it takes an np.int64 as a 0-d array)
        want = run(torch.compile, fn, lambda v: (X, int(v)), STEPS, check=False)
    finally:
        torch._dynamo.reset()
    assert got == want


def test_a_numpy_int_guard_reads_the_argument():
    # once symbolic, a later value that would take the other branch recompiles (the guard reads the
    # np.int64 itself), and a Python int is not the same entry
    def branch(x, k):
        return x * 2 if k > 5 else x - 1, k

    c = dynview.compile(branch, backend="eager")
    for v in (np.int64(1), np.int64(2), np.int64(3), np.int64(8), 8, np.int64(2)):
        same(c(X, v), branch(X, v))
    entries = dynview._C.cache_entries(branch.__code__)
    assert len(entries) == 4, entries  # 1 (constant), 2 (k <= 5 symbolic), 8 (k > 5), the int 8


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_numpy_ints_through_compiling_backends(backend):
    for fn in (step_report, timestep_tensor):
        c = dynview.compile(fn, backend=backend)
        for v in STEPS:
            same(c(X, v), fn(X, v))
    assert breaks() == []


def clamped(x, lam):  # min/max of a NumPy scalar and Python numbers: the winner keeps its own type
    a = min(1.0, lam)
    b = max(lam, 0.1)
    c = min(lam, 2, 0.8)
    return x * a + b, a, b, c, type(a).__name__


def capped_step(x, step):  # a warmup cap of a NumPy step: min(step, 8), max(step, 2)
    return x * min(step, 8) - max(2, step), min(step, 8), max(2, step)


def test_min_and_max_of_a_numpy_scalar_compile_per_side_not_per_value():
    # each comparison Python makes is a guard: a value on the same side of every one reuses the
    # graph (before, the scalar was specialised: a compile per value). torch.compile takes the
    # scalar as a 0-d array and compiles once, but its min(1.0, lam) is then an array, not eager's
    # np.float64 or float.
    values = [np.float64(v) for v in (0.3, 0.5, 1.5, 0.7, 2.5)]
    # 0.3 a constant; 0.5 symbolic, below every bound; 1.5 above 1.0 and 0.8; 0.7 as 0.5; 2.5 above 2
    assert run(dynview.compile, clamped, lambda v: (X, v), values) == [1, 2, 3, 3, 4]
    steps = [np.int64(v) for v in (1, 4, 5, 12, 3, 9)]
    # 1 a constant; 4 and 5 between the bounds; 12 and 9 above 8; 3 as 4
    assert run(dynview.compile, capped_step, lambda v: (X, v), steps) == [1, 2, 2, 3, 3, 3]
    assert breaks() == []


def masked_by_comparison(x, lam):  # a NumPy bool from a comparison, read by torch and returned
    keep = lam > 0.5
    return x * keep, torch.where(x > 0, x, x * (lam < 0.9)), keep, keep + 1, int(keep), f"{keep}", type(keep).__name__


def negated_comparison(x, lam):  # NumPy refuses -np.bool_ (TypeError), as eager raises
    return x + 1, -(lam > 0.5)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_comparison_of_a_numpy_scalar_is_a_numpy_bool(backend):
    # the constant first compile gave the graph np.False_, whose code could not name `np`
    # (NameError under the eager backend); once symbolic, the comparison is a symbolic np.bool_
    c = dynview.compile(masked_by_comparison, backend=backend)
    for v in LAMS:
        same(c(X, v), masked_by_comparison(X, v))
    c = dynview.compile(negated_comparison, backend=backend)
    for v in LAMS[:2]:
        with pytest.raises(TypeError, match="numpy boolean"):
            c(X, v)


def test_a_trace_shows_a_symbolic_numpy_scalar_as_numpys(tmp_path):
    # the viewer's and reports' value rows: NumPy's type and the symbol it holds
    c = dynview.compile(step_report, backend="eager")
    with dynview.record(str(tmp_path / "steps.dyn")):
        for v in STEPS[:2]:
            c(X, v)
    rows = [v for v in dynview.load_trace(str(tmp_path / "steps.dyn")).values.values() if v["kind"] == "NumPy scalar"]
    assert rows and all(r["type"] == "numpy.int64" or r["type"] == "numpy.float64" or r["type"] == "numpy.bool" for r in rows)
    assert any(r["type"] == "numpy.int64" and r["repr"].startswith("np.int64(s") for r in rows), rows[:3]
