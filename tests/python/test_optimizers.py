"""torch.optim's steps compiled as torch.compile compiles them: the optimizer's own frames are
captured (its profiling wrapper and _use_grad's graph_break() run as they are), _init_group runs
eagerly while tracing and its lists come back as values read from the optimizer (so the state it
creates on the first step is an input, not a new tensor of the graph), the non-capturable steps'
tensor scalars (addcdiv_(value=tensor), add_(alpha=tensor)) are decomposed and foreach steps keep
their stacked CPU scalars. Each optimizer over several steps against eager (parameters and state)
and torch.compile's graph counts on the same steps; the training step people compile whole against
torch._dynamo.explain."""
import pytest
import torch
from torch import nn

import dynview
from test_engine_behaviour import counting_dynamo, dynview_compiles
from test_lazy_sequences import _reset  # noqa: F401  (both engines reset around each test)

pytestmark = pytest.mark.shared_by_versions  # (conftest.py)


OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd_foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adam_foreach": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.01),
    "adagrad_foreach": lambda p: torch.optim.Adagrad(p, lr=0.01, foreach=True),
    "adamax": lambda p: torch.optim.Adamax(p, lr=0.01),
    "nadam": lambda p: torch.optim.NAdam(p, lr=0.01),
    "nadam_foreach": lambda p: torch.optim.NAdam(p, lr=0.01, foreach=True),
    "adadelta": lambda p: torch.optim.Adadelta(p),
    "rprop": lambda p: torch.optim.Rprop(p, lr=0.01),
    # 'capturable' reads True in the trace (TorchDynamo's _set_capturable): RAdam's `if rho_t > 5.0`
    # on a step tensor becomes the capturable path's torch.where, ASGD's mu/eta stay tensors.
    "radam": lambda p: torch.optim.RAdam(p, lr=0.01),
    "radam_decoupled": lambda p: torch.optim.RAdam(p, lr=0.01, decoupled_weight_decay=True, weight_decay=0.1),
    "radam_foreach": lambda p: torch.optim.RAdam(p, lr=0.01, foreach=True),
    "asgd": lambda p: torch.optim.ASGD(p, lr=0.01),
    "asgd_foreach": lambda p: torch.optim.ASGD(p, lr=0.01, foreach=True, weight_decay=0.01),
    "adamax_foreach": lambda p: torch.optim.Adamax(p, lr=0.01, foreach=True),
    "rmsprop_centered_foreach": lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=True, momentum=0.9, centered=True),
    "rprop_foreach": lambda p: torch.optim.Rprop(p, lr=0.01, foreach=True),
    "adadelta_foreach": lambda p: torch.optim.Adadelta(p, foreach=True, weight_decay=0.01),
}


def _setup(make_opt):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, make_opt(model.parameters())


def _train(model, opt, step_fn, steps=4):
    """The loop around a compiled step: backward eagerly, then the (compiled) step, then zero_grad."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(5, 8, generator=g)
        model(x).pow(2).sum().backward()
        step_fn()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def _state(opt, model):
    return [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in opt.state[p].items()} for p in model.parameters()]


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_optimizer_step_equals_eager_and_compiles_as_torch_compile(kind):
    make_opt = OPTIMIZERS[kind]
    model, opt = _setup(make_opt)
    want = _train(model, opt, opt.step)
    want_state = _state(opt, model)

    model, opt = _setup(make_opt)
    td, n_td = counting_dynamo(lambda: opt.step())
    torch.testing.assert_close(_train(model, opt, td), want)

    model, opt = _setup(make_opt)

    def step():  # the pattern of torch.compile's optimizer tutorial: a function that calls step()
        opt.step()

    dv = dynview.compile(step, backend="eager")
    dynview._C.take_records()
    torch.testing.assert_close(_train(model, opt, dv), want)
    torch.testing.assert_close(_state(opt, model), want_state)
    records = dynview._C.take_records()
    assert len([r for r in records if r["graph"] is not None]) == n_td[0], \
        [(r["qualname"], r["break_message"], r["eager_why"]) for r in records]
    assert any(r["qualname"].endswith(".step") and r["graph"] is not None for r in records), "the step itself is a graph"


def test_init_group_runs_once_per_trace_and_its_state_is_an_input():
    # The first step's state (step counts, moments) is made by _init_group while tracing, before the
    # graph runs: the graph reads it (placeholders) rather than making it, so the second step is a
    # cache hit, not a recompile for a state that is no longer empty.
    model, opt = _setup(OPTIMIZERS["adam"])

    def step():
        opt.step()

    dv = dynview.compile(step, backend="eager")
    dynview._C.take_records()
    _train(model, opt, dv, steps=1)
    graphs = [r["graph"] for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(graphs) == 1
    placeholders = [n.name for n in graphs[0].graph.nodes if n.op == "placeholder"]
    assert any("exp_avg_sq" in n for n in placeholders) and any("step" in n for n in placeholders), placeholders
    assert sum(len(s) for s in opt.state.values()) == 3 * len(list(model.parameters()))
    _train(model, opt, dv, steps=3)
    assert dynview._C.take_records() == [], "later steps are cache hits"


def test_capturable_reads_true_in_the_trace_only():
    # The step is traced as a capturable one (no branch on the step tensor: RAdam's rectification is a
    # torch.where in the graph), while the optimizer's own groups keep capturable=False, so an eager
    # step after the compiled ones takes the path it always took (and gives the same parameters).
    model, opt = _setup(OPTIMIZERS["radam"])
    _train(model, opt, opt.step, steps=3)
    want = _train(model, opt, opt.step, steps=3)

    model, opt = _setup(OPTIMIZERS["radam"])
    dv = dynview.compile(lambda: opt.step(), backend="eager")
    dynview._C.take_records()
    _train(model, opt, dv, steps=3)
    graphs = [r["graph"] for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.where in targets, targets
    assert [g["capturable"] for g in opt.param_groups] == [False]
    torch.testing.assert_close(_train(model, opt, opt.step, steps=3), want)


def test_a_parameter_that_gets_a_gradient_later_recompiles():
    # _init_group's lists depend on which parameters have a gradient: each p.grad is guarded (None or
    # a tensor), so a step after a frozen layer starts training again sees it, as in eager.
    def calls_with(make_opt, compiled):
        model, opt = _setup(make_opt)
        model[0].weight.requires_grad_(False)
        step = compiled(lambda: opt.step()) if compiled else opt.step
        out = _train(model, opt, step, steps=2)
        model[0].weight.requires_grad_(True)
        out += _train(model, opt, step, steps=2)
        return out, _state(opt, model)

    want = calls_with(OPTIMIZERS["adamw"], None)
    got = calls_with(OPTIMIZERS["adamw"], lambda fn: dynview.compile(fn, backend="eager"))
    torch.testing.assert_close(got, want)


def _training_step(model, opt):
    def step(x, y):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


@pytest.mark.parametrize("kind", ["sgd_momentum", "adam", "adamw_foreach"])
def test_a_whole_training_step_matches_torch_dynamo(kind):
    model, opt = _setup(OPTIMIZERS[kind])
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    theirs = torch._dynamo.explain(_training_step(model, opt))(x, y)
    model, opt = _setup(OPTIMIZERS[kind])
    ours = dynview.explain(_training_step(model, opt))(x, y)
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)), \
        [str(b) for b in ours.break_reasons]
    m1, o1 = _setup(OPTIMIZERS[kind])
    m2, o2 = _setup(OPTIMIZERS[kind])
    eager, compiled = _training_step(m1, o1), dynview.compile(_training_step(m2, o2), backend="eager")
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        x, y = torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
        torch.testing.assert_close(compiled(x, y), eager(x, y))
        torch.testing.assert_close(list(m2.parameters()), list(m1.parameters()))
        assert all(p.grad is None for p in m2.parameters())


def test_tensor_scalars_of_in_place_methods_are_decomposed_as_torch_dynamo():
    # addcdiv_/addcmul_ given a tensor value, add_ a tensor alpha: one graph, eager's values
    # (sub_ with a tensor alpha is a data-dependent break in both)
    def f(p, a, b, s):
        p.addcdiv_(a, b, value=-s)
        p.addcmul_(a, b, value=s)
        q = p.add_(a, alpha=s)
        return q is p

    def args():
        g = torch.Generator().manual_seed(0)
        return [torch.randn(4, generator=g), torch.randn(4, generator=g), torch.rand(4, generator=g) + 1, torch.tensor(0.5)]

    a, b = args(), args()
    assert dynview.compile(f, backend="eager")(*a) == f(*b)
    torch.testing.assert_close(a, b)
    theirs = torch._dynamo.explain(f)(*args())
    ours = dynview.explain(f)(*args())
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)) == (1, 0)

    def g(p, b, s):
        return p.sub_(b, alpha=s * 2) + 1

    torch._dynamo.reset()
    theirs = torch._dynamo.explain(g)(*args()[1:])
    ours = dynview.explain(g)(*args()[1:])
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons))
    assert ours.break_reasons[0].break_id == "DV0003", str(ours.break_reasons[0])
    a, b = args()[1:], args()[1:]
    torch.testing.assert_close(dynview.compile(g, backend="eager")(*a), g(*b))
    torch.testing.assert_close(a, b)


def test_zero_grad_runs_eagerly_as_a_disabled_function():
    # Optimizer.zero_grad is wrapped by torch._disable_dynamo: its call breaks as a function marked
    # torch.compiler.disable (DV0025, named after the method), and runs eagerly on every step
    model, opt = _setup(OPTIMIZERS["sgd_momentum"])
    step = dynview.compile(_training_step(model, opt), backend="eager")
    dynview._C.take_records()
    for _ in range(2):
        step(torch.randn(5, 8), torch.randn(5, 4))
        assert all(p.grad is None for p in model.parameters())
    breaks = [(r["break_id"], r["break_message"]) for r in dynview._C.take_records() if r["has_break"]]
    assert ("DV0025", "call to Optimizer.zero_grad, marked torch.compiler.disable") in breaks, breaks


SCHEDULERS = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
    "lambda": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda epoch: 0.9 ** epoch),
    "onecycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=10),
}


@pytest.mark.parametrize("kind", list(SCHEDULERS))
def test_a_step_with_an_lr_scheduler_equals_eager_and_torch_dynamo(kind):
    # torch.optim.lr_scheduler's frames are captured too: the learning rate it writes into the param
    # groups reaches the next step, step after step, as in eager
    def run(compiled):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = SCHEDULERS[kind](opt)

        def step(x):
            loss = model(x).pow(2).sum()
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            return loss.detach()
        f = compiled(step) if compiled else step
        g = torch.Generator().manual_seed(1)
        losses = [f(torch.randn(3, 4, generator=g)) for _ in range(5)]
        return losses, [p.detach().clone() for p in model.parameters()], opt.param_groups[0]["lr"], step

    want = run(None)
    got = run(lambda fn: dynview.compile(fn, backend="eager"))
    torch.testing.assert_close(got[:3], want[:3])
    x = torch.randn(3, 4)
    theirs = torch._dynamo.explain(run(None)[3])(x)
    ours = dynview.explain(run(None)[3])(x)
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)), \
        [str(b) for b in ours.break_reasons]


def test_lbfgs_with_its_closure_equals_eager():
    def run(compiled):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
        x = torch.randn(3, 4)

        def closure():
            opt.zero_grad()
            loss = model(x).pow(2).sum()
            loss.backward()
            return loss

        def step():
            return opt.step(closure)
        f = compiled(step) if compiled else step
        return [f() for _ in range(3)], [p.detach().clone() for p in model.parameters()]

    torch.testing.assert_close(run(lambda fn: dynview.compile(fn, backend="eager")), run(None))
