"""torch.utils.checkpoint inside compiled code, beyond the case corpus (python_cases_checkpoint.py):
gradients through the checkpointed subgraphs equal eager's (eager and AOT backends), the graph holds
one tag_activation_checkpoint subgraph per call as TorchDynamo's does (nested ones inside their
parent's), what the reentrant variant does differently from the subgraph is left to eager, effects
outside the checkpointed function break, and a recorded trace shows the subgraphs."""
import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")
HOP = torch.ops.higher_order.tag_activation_checkpoint


def hop_calls(gm):
    """The tag_activation_checkpoint calls of a graph module, with those of its subgraphs: a list of
    (depth, number of nodes in the subgraph)."""
    out = []

    def walk(g, depth):
        for n in g.graph.nodes:
            if n.op == "call_function" and n.target is HOP:
                body = getattr(g, n.args[0].target)
                out.append((depth, len([m for m in body.graph.nodes if m.op == "call_function" or m.op == "call_method"])))
                walk(body, depth + 1)

    walk(gm, 0)
    return out


class Block(nn.Module):
    def __init__(self, d=12):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x, scale=1.0):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x)))) * scale


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False, scale=0.5)
        return x.pow(2).mean()


def _policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


def nested(m, x):
    def outer(t):
        h = checkpoint(m.blocks[0], t, use_reentrant=False)
        return checkpoint(m.blocks[1], h, use_reentrant=False).tanh()

    return checkpoint(outer, x, use_reentrant=False).sum()


def selective(m, x):
    ctx = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(lambda t: m.blocks[2](t * 2), x, use_reentrant=False, context_fn=ctx).sum()


def closure_and_mutation(m, x):
    w = x.sigmoid()

    def body(t):
        h = m.blocks[0](t)
        h.mul_(2)  # in place, on a tensor of the function's own
        return h * w

    return checkpoint(body, x, use_reentrant=False).sum() + w.sum()


def reentrant(m, x):
    return checkpoint(m.blocks[1], x, use_reentrant=True).sum()


def run(fn, m, x):
    m.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    out = fn(m, x) if not isinstance(fn, nn.Module) else fn(x)
    out.backward()
    return out.detach(), x.grad, [p.grad for p in m.parameters()]


# each Block call: layer_norm, linear, gelu, linear, mul, add (6 nodes); the nested outer function:
# two checkpoint calls, their getitems and tanh
CALLS = {"stack": (None, [(0, 6)] * 3), "nested": (nested, [(0, 5), (1, 6), (1, 6)]),
         "selective": (selective, [(0, 7)]), "closure_and_mutation": (closure_and_mutation, [(0, 8)]),
         "reentrant": (reentrant, [(0, 6)])}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_gradients_equal_eager_and_the_graph_holds_the_subgraphs(name, backend):
    fn, want_hops = CALLS[name]
    torch.manual_seed(0)
    m = Stack()
    call = m if fn is None else (lambda mm, x: fn(mm, x))
    compiled = dynview.compile(m if fn is None else call, backend=backend)
    dynview._C.take_records()
    for seed in (0, 1):
        x = torch.randn(4, 12, generator=torch.Generator().manual_seed(seed))
        want = run(call, m, x)
        got = run(compiled if fn is None else (lambda mm, xx: compiled(mm, xx)), m, x)
        torch.testing.assert_close(got, want)
    graphs = [r["graph"] for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(graphs) == 1
    assert hop_calls(graphs[0]) == want_hops, graphs[0].print_readable(print_output=False)


@pytest.mark.parametrize("name", ["stack", "nested", "selective"])
def test_the_subgraphs_are_torch_dynamos(name):
    fn, _ = CALLS[name]
    torch.manual_seed(0)
    m = Stack()
    x = torch.randn(4, 12, requires_grad=True)
    call = m if fn is None else functools.partial(fn, m)
    theirs = torch._dynamo.explain(call)(x)
    ours = dynview.explain(call)(x)
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)) == (1, 0)
    assert hop_calls(ours.graphs[0]) == hop_calls(theirs.graphs[0])
    if name == "selective":  # the policy travels with the subgraph, where the operator reads it
        (node,) = [n for n in ours.graphs[0].graph.nodes if n.target is HOP]
        assert getattr(ours.graphs[0], node.args[0].target).meta["_checkpoint_context_fn"].args == (_policy,)


def test_the_backward_pass_recomputes_the_checkpointed_function():
    # Saved for backward: with the subgraphs, what the checkpoint keeps (its inputs), as under
    # torch.compile; without them (the function inlined plainly) every intermediate is kept.
    torch.manual_seed(0)
    m = Stack(4)

    def unchecked(x):
        for b in m.blocks:
            x = b(x, scale=0.5)
        return x.pow(2).mean()

    def saved(fn):
        x = torch.randn(4, 12, requires_grad=True)
        count = [0]

        def pack(t):
            count[0] += 1
            return t

        fn(x)  # compiled before counting
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(x).backward()
        return count[0]

    ours, theirs = saved(dynview.compile(m, backend="aot_eager")), saved(torch.compile(m, backend="aot_eager"))
    plain = saved(dynview.compile(unchecked, backend="aot_eager"))
    assert ours == theirs < plain, (ours, theirs, plain)


def test_reentrant_checkpoint_of_inputs_without_grad_is_left_to_eager():
    # eager's reentrant checkpoint is an autograd.Function: no argument requires grad, so its output
    # does not (the parameters inside get no gradient); the subgraph's output would require grad
    torch.manual_seed(0)
    m = Stack()
    x = torch.randn(4, 12)

    def f(x):
        return checkpoint(m.blocks[0], x, use_reentrant=True) * 2

    want = f(x)
    dynview._C.take_records()
    got = dynview.compile(f, backend="eager")(x)
    torch.testing.assert_close(got, want)
    assert got.requires_grad == want.requires_grad is False
    breaks = [r for r in dynview._C.take_records() if r["break_id"]]
    assert len(breaks) == 1 and breaks[0]["break_id"] == "DV0004" and "use_reentrant" in breaks[0]["break_message"]


def test_reentrant_checkpoint_with_keywords_raises_eagers_error():
    def f(x):
        return checkpoint(lambda t, scale: t * scale, x, use_reentrant=True, scale=2.0)

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(ValueError) as want:
        f(x)
    with pytest.raises(ValueError) as got:
        dynview.compile(f, backend="eager")(x)
    assert str(got.value) == str(want.value) == "Unexpected keyword arguments: scale"


def test_an_effect_outside_the_checkpointed_function_breaks_and_happens_once():
    seen = []

    def f(x):
        def body(t):
            seen.append(t.shape[0])
            return t.sin()

        return checkpoint(body, x.cos(), use_reentrant=False).exp()

    x = torch.randn(5, requires_grad=True)
    want = f(x)
    assert seen == [5]
    got = dynview.compile(f, backend="eager")(x)
    torch.testing.assert_close(got, want)
    assert seen == [5, 5]
    breaks = [r for r in dynview._C.take_records() if r["break_id"]]
    assert breaks and breaks[0]["break_id"] == "DV0008" and "checkpoint" in breaks[0]["break_message"]


def test_a_recorded_trace_shows_the_subgraphs(tmp_path):
    path = tmp_path / "ckpt.dyn"
    torch.manual_seed(0)
    m = Stack(2)
    with dynview.record(path):
        cm = dynview.compile(m, backend="eager")
        cm(torch.randn(4, 12))
    t = dynview.load_trace(path)
    (g,) = [g for c in t.compiles for g in c.graphs]
    assert g["code"].count("tag_activation_checkpoint(") == 2
    assert "# wrap_body_0:" in g["code"] and "# wrap_body_1:" in g["code"] and "torch._C._nn.linear" in g["code"]
    getitems = [n for n in g["nodes"] if n["name"].startswith("getitem")]
    assert len(getitems) == 2 and all(n["step"] >= 0 and n["meta"] for n in getitems)


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0
        self.shift = 1

    def body(self, t):
        self.calls += 1  # changes: eager's recompute in backward counts again
        self.shift = 1 if t.shape[0] > 2 else 0  # the value it has: kept in the graph's capture
        return self.fc(t).roll(self.shift, 0)

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=False).sum()


def test_a_module_attribute_the_checkpointed_function_changes_breaks_one_it_keeps_does_not():
    torch.manual_seed(0)
    want_m, got_m = _Counting(), _Counting()
    got_m.load_state_dict(want_m.state_dict())
    x = torch.randn(4, 4)
    want_m(x).backward()
    assert want_m.calls == 2  # forward, and the recompute in backward
    cm = dynview.compile(got_m, backend="eager")
    dynview._C.take_records()
    cm(x).backward()
    assert got_m.calls == 2 and got_m.shift == 1
    torch.testing.assert_close([p.grad for p in got_m.parameters()], [p.grad for p in want_m.parameters()])
    breaks = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert len(breaks) == 1 and "sets a module's calls to a new value" in breaks[0], breaks

    class Shifting(_Counting):
        def body(self, t):
            self.shift = 1 if t.shape[0] > 2 else 0
            return self.fc(t).roll(self.shift, 0)

    m = Shifting()
    e = dynview.explain(m)(x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0)
    m.shift = 0  # another value there: guarded, a recompile that breaks
    cm = dynview.compile(m, backend="eager")
    dynview._C.take_records()
    cm(x)
    assert m.shift == 1
    assert [r["break_id"] for r in dynview._C.take_records()][:1] == ["DV0008"]
