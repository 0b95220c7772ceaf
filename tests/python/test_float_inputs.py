"""Float inputs, as torch.compile takes them (specialize_float=False): a float argument is a constant
on the first compile; once it changes it becomes symbolic, the graph takes it as a 0-d float64
tensor read with item(), and later values reuse that graph. Compile counts equal torch.compile's,
outputs equal eager, and the guards on the float (its type, not NaN, the comparisons the code made)
are evaluated in C++ on the hit path."""
import math

import pytest
import torch
import torch.nn.functional as F

import dynview
from counting import counting_backend

pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)

X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))


# ---- functions written the way model and training code takes a float --------------------------

def temperature_softmax(x, temperature):
    return torch.softmax(x / temperature, dim=-1)


def cosine_lr(x, progress):
    lr = 0.1 * 0.5 * (1.0 + math.cos(math.pi * progress))
    return x * lr


def normalize_eps(x, eps):
    return x / (x.norm(dim=-1, keepdim=True) + eps)


def layer_norm_eps(x, eps):
    return F.layer_norm(x, (x.shape[-1],), eps=eps)


def leaky(x, slope):
    return F.leaky_relu(x, negative_slope=slope)


def ema_update(x, decay):
    shadow = torch.zeros_like(x)
    return shadow.mul(decay).add(x, alpha=1.0 - decay)


def clip_to(x, limit):
    return torch.clamp(x, min=-limit, max=limit)


def root_scaled(x, dim_scale):
    return x * math.sqrt(dim_scale) + dim_scale ** 2


def branch_on_threshold(x, p):
    if p > 0.5:
        return x + p
    return x - p


def scaled_and_returned(x, scale):
    return x * scale, scale * 2.0


def top_p_mask(x, top_p):
    probs, _ = torch.sort(torch.softmax(x, -1), descending=True)
    return probs.masked_fill(probs.cumsum(-1) > top_p, 0.0)


def keep_fraction(x, frac):
    return x[: int(frac * x.shape[0])]


def rounded_scale(x, scale):
    return x * round(scale, 2), round(scale, 1)


def described(x, lr):
    return x * 2, f"lr={lr}"


FUNCTIONS = [temperature_softmax, cosine_lr, normalize_eps, layer_norm_eps, leaky, ema_update, clip_to,
             root_scaled, branch_on_threshold, scaled_and_returned, top_p_mask, keep_fraction, rounded_scale]
SEQUENCES = {
    "changing": [0.7, 0.9, 0.3, 0.55, 0.8],
    "repeated": [0.7, 0.7, 0.25, 0.25, 0.6],
}


def counts_of(compile_fn, fn, values, **kw):
    backend, n = counting_backend()
    c = compile_fn(fn, backend=backend, **kw)
    out = []
    for v in values:
        torch.testing.assert_close(c(X, v), fn(X, v))
        out.append(n[0])
    return out


def dynamo_counts(fn, values, **kw):
    torch._dynamo.reset()
    try:
        return counts_of(torch.compile, fn, values, **kw)
    finally:
        torch._dynamo.reset()


def breaks():
    return [r["break_message"] for r in dynview._C.take_records() if r["has_break"]]


@pytest.mark.parametrize("seq", list(SEQUENCES))
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_float_arguments_recompile_when_torch_compile_does(fn, seq):
    values = SEQUENCES[seq]
    got = counts_of(dynview.compile, fn, values)
    assert breaks() == []
    assert got == dynamo_counts(fn, values)


def test_a_changed_float_is_a_graph_input_read_with_item():
    c = dynview.compile(temperature_softmax, backend="eager")
    for t in (0.7, 0.9, 1.3, 0.5):
        torch.testing.assert_close(c(X, t), temperature_softmax(X, t))
    recs = [r for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(recs) == 2
    assert "0.7" in recs[0]["graph"].code  # the first compile: a constant
    code = recs[1]["graph"].code
    assert ".item()" in code and "0.9" not in code, code
    entries = dynview._C.cache_entries(temperature_softmax.__code__)
    guards = next(e["guards"] for e in entries if e["hits"])
    assert "___check_type_id(L['temperature'], float)" in guards
    assert "not math.isnan(L['temperature'])" in guards
    assert sorted(e["hits"] for e in entries) == [0, 2]  # the symbolic graph served the last two calls


def test_float_guards_are_checked_on_the_hit_path():
    # p > 0.5 is a guard on the symbolic float: each branch is one graph, reused by later values
    c = dynview.compile(branch_on_threshold, backend="eager")
    for p in (0.1, 0.2, 0.9, 0.3, 0.8, 0.75, 0.05):
        torch.testing.assert_close(c(X, p), branch_on_threshold(X, p))
    entries = dynview._C.cache_entries(branch_on_threshold.__code__)
    assert len(entries) == 3
    texts = [g for e in entries for g in e["guards"]]
    assert any("L['p']" in g and "0.5" in g and "<" in g for g in texts), texts
    assert sum(e["hits"] for e in entries) == 4


def test_int_of_a_float_expression_is_guarded_in_float_arithmetic():
    # int(frac * 4) slices: TruncToInt(4.0*frac) is a guard computed in doubles, as Python computes it
    c = dynview.compile(keep_fraction, backend="eager")
    for frac in (0.5, 0.6, 0.7, 0.74, 0.75, 0.99, 0.26):
        torch.testing.assert_close(c(X, frac), keep_fraction(X, frac))
    assert breaks() == []
    assert len(dynview._C.cache_entries(keep_fraction.__code__)) <= 5


def test_nan_infinity_and_an_int_are_not_taken_for_the_symbolic_float():
    values = [1.5, 2.5, float("nan"), 3.5, float("inf"), 4, 0.5]
    c = dynview.compile(scaled_and_returned, backend="eager")
    for v in values:
        got, want = c(X, v), scaled_and_returned(X, v)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert type(got[1]) is type(want[1])
    assert counts_of(dynview.compile, scaled_and_returned, [1.5, 2.5, 3.5]) == [1, 2, 2]


def nan_as_a_default(x, v):
    return x * (0.5 if math.isnan(v) else v)


def test_a_nan_passed_again_hits_its_compile():
    # a NaN is a constant of its compile; NaN != NaN, so its guard compares NaN with NaN as equal (and
    # the sign): a later NaN is a cache hit, as under torch.compile, not a compile per call
    values = [float("nan"), 1.5, float("nan"), float("nan")]
    theirs = dynamo_counts(nan_as_a_default, values)
    assert theirs[1] == theirs[2] == theirs[3]  # (no compile for a NaN seen before)
    dynview.reset()
    assert counts_of(dynview.compile, nan_as_a_default, values) == [1, 2, 2, 2]
    dynview.reset()
    backend, n = counting_backend()
    c = dynview.compile(nan_as_a_default, backend=backend)
    for v in (float("nan"), float("nan"), -float("nan")):  # -nan: another sign (math.copysign tells them apart)
        torch.testing.assert_close(c(X, v), nan_as_a_default(X, v))
    assert n[0] == 2


@pytest.mark.parametrize("dynamic", [True, False])
def test_dynamic_true_and_false(dynamic):
    values = [0.7, 0.9, 0.3]
    dynview.reset()
    assert counts_of(dynview.compile, temperature_softmax, values, dynamic=dynamic) == \
        dynamo_counts(temperature_softmax, values, dynamic=dynamic)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backends_return_the_symbolic_float(backend):
    # The float leaves the graph as a 0-d float64 tensor. (torch.compile with Inductor returns 5.0 for
    # every later scale here: Inductor bakes torch.scalar_tensor(2.0 * s) at compile time.)
    c = dynview.compile(scaled_and_returned, backend=backend)
    for s in (1.5, 2.5, 0.25, 0.75):
        got = c(X, s)
        torch.testing.assert_close(got, scaled_and_returned(X, s))
        assert type(got[1]) is float
    assert len(dynview._C.cache_entries(scaled_and_returned.__code__)) == 2


# AOTAutograd cannot give some ops a float as a tensor (layer_norm's eps, leaky_relu's slope, clamp's
# bounds, int(frac * n)): its pass asks for the analysis to restart with the float specialized, as
# TorchDynamo does; dynview compiles the frame again with its floats constant. (ema_update is left
# out of Inductor's: Inductor 2.13 bakes its add's alpha = 1.0 - decay, under torch.compile too.)
BACKEND_CASES = [(b, fn) for b in ("aot_eager", "inductor") for fn in FUNCTIONS
                 if not (b == "inductor" and fn is ema_update)]


@pytest.mark.parametrize("backend,fn", BACKEND_CASES, ids=[f"{b}-{fn.__name__}" for b, fn in BACKEND_CASES])
def test_compiling_backends_take_each_float_function_as_eager_computes_it(backend, fn):
    from torch._inductor.utils import fresh_cache
    values = SEQUENCES["changing"]
    with fresh_cache():
        for _ in range(2):  # (the second time on Inductor's warm caches)
            dynview.reset()
            c = dynview.compile(fn, backend=backend)
            for v in values:
                torch.testing.assert_close(c(X, v), fn(X, v))
    assert len(dynview._C.cache_entries(fn.__code__)) <= len(values)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_round_to_digits_of_a_symbolic_float_is_pythons_rounding(backend):
    # round(a, 2) stays symbolic (a graph node): values where the float's binary value sits just
    # below the decimal half (2.675 -> 2.67, 1.005 -> 1.0) round as Python rounds them. (AOTAutograd
    # has no tensor op for it: one compile per value there, the float constant, as in torch.compile.)
    from torch._inductor.utils import fresh_cache
    c = dynview.compile(rounded_scale, backend=backend)
    values = (1.5, 2.675, 1.005, 0.125, -3.14159, 0.25, 2.5)
    with fresh_cache():
        for s in values:
            got, want = c(X, s), rounded_scale(X, s)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1] and type(got[1]) is float
    entries = dynview._C.cache_entries(rounded_scale.__code__)
    assert breaks() == [] and len(entries) == (2 if backend == "eager" else len(values))


def test_a_float_in_an_f_string_is_formatted_after_the_graph():
    c = dynview.compile(described, backend="eager")
    for lr in (0.1, 0.01, 0.001):
        assert c(X, lr)[1] == f"lr={lr}"
    assert breaks() == []
    assert len(dynview._C.cache_entries(described.__code__)) == 2


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x, temperature=1.0, scale=None):
        q = self.proj(x).view(1, 1, 4, 6)
        att = F.scaled_dot_product_attention(q, q, q, scale=scale)
        return torch.softmax(att.flatten(0, 2) / temperature, dim=-1)


def test_module_called_with_float_keywords():
    torch.manual_seed(0)
    m = Head()
    calls = [(1.0, 0.5), (0.7, 0.25), (1.3, 0.125), (0.5, 0.2)]

    def run(c):
        return [c(X, temperature=t, scale=s) for t, s in calls]
    want = run(m)
    backend, n = counting_backend()
    torch.testing.assert_close(run(dynview.compile(m, backend=backend)), want)
    torch._dynamo.reset()
    td_backend, td = counting_backend()
    torch.testing.assert_close(run(torch.compile(m, backend=td_backend)), want)
    torch._dynamo.reset()
    assert n[0] == td[0]
    assert breaks() == []


SCHEDULES = {
    "sgd_exponential": lambda params: (lambda o: (o, torch.optim.lr_scheduler.ExponentialLR(o, 0.9)))(
        torch.optim.SGD(params, lr=0.1, momentum=0.9)),
    # OneCycleLR also cycles Adam's betas[0]: a float inside the group's betas tuple changes too
    "adamw_one_cycle": lambda params: (lambda o: (o, torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20)))(
        torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)),
    "adam_cosine": lambda params: (lambda o: (o, torch.optim.lr_scheduler.CosineAnnealingLR(o, 10)))(
        torch.optim.Adam(params, lr=0.01)),
}


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_optimizer_step_under_a_learning_rate_schedule(schedule):
    # The scheduler changes param_groups[0]['lr'] (and betas) every step: after one recompile the
    # step's graph takes them as inputs, as under torch.compile
    def train(compile_fn):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        opt, sched = SCHEDULES[schedule](m.parameters())
        backend, n = counting_backend()
        step = compile_fn(opt.step, backend=backend) if compile_fn else opt.step
        counts = []
        for _ in range(6):
            F.mse_loss(m(torch.randn(3, 4)), torch.randn(3, 2)).backward()
            step()
            opt.zero_grad()
            sched.step()
            counts.append(n[0])
        return [p.detach().clone() for p in m.parameters()], counts

    want, _ = train(None)
    got, counts = train(dynview.compile)
    torch._dynamo.reset()
    _, td_counts = train(torch.compile)
    torch._dynamo.reset()
    torch.testing.assert_close(got, want)
    assert counts == td_counts
    assert counts[-1] == 2


GAIN = 1.0


def times_gain(x):
    return x * GAIN


class Tempered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.temperature = 1.0

    def forward(self, x):
        return torch.softmax(x / self.temperature, dim=-1)


def test_floats_of_a_global_and_of_a_module_attribute_become_symbolic():
    # torch.compile unspecializes every float it reads (it keeps the ints of globals and modules
    # static): a global gain or a module's temperature changed between calls compiles twice
    global GAIN
    m = Tempered()

    def drive(compile_fn, fn, set_value):
        backend, n = counting_backend()
        c = compile_fn(fn, backend=backend)
        counts = []
        for v in (1.0, 1.1, 0.7, 1.3):
            set_value(v)
            torch.testing.assert_close(c(X), fn(X))
            counts.append(n[0])
        return counts

    def set_gain(v):
        global GAIN
        GAIN = v

    for fn, setter in ((times_gain, set_gain), (m, lambda v: setattr(m, "temperature", v))):
        dynview.reset()
        got = drive(dynview.compile, fn, setter)
        torch._dynamo.reset()
        want = drive(torch.compile, fn, setter)
        torch._dynamo.reset()
        assert got == want == [1, 2, 2, 2]
    assert breaks() == []
    GAIN = 1.0


def signed(x, a):
    return x / a, math.copysign(1.0, a), a


@pytest.mark.parametrize("values", [[0.0, -0.0, 0.0], [1.5, 2.5, -0.0, 0.0, -0.0, 3.5], [1.5, 0.0, 2.5, -0.0]],
                         ids=["zeros", "zeros-after-symbolic", "interleaved"])
def test_signed_zeros_are_told_apart(values):
    # 0.0 == -0.0, but x / a and copysign tell them apart: a guard by value must not take one for the
    # other (torch.compile 2.13 returns the first zero's results for the second in all three)
    c = dynview.compile(signed, backend="eager")
    for v in values:
        got, want = c(X, v), signed(X, v)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        assert math.copysign(1.0, got[2]) == math.copysign(1.0, want[2])
