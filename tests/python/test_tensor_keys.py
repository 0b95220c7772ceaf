"""Dicts keyed by tensors and modules, as model and training code keys them: optimizer state by
parameter (torch.optim's self.state[p]), names by parameter, weights by submodule, tensors made in
the trace as keys. A key is its object (a tensor hashes by id), so lookups, `in`, iteration and the
rebuilt dict keep each key's identity; a dict from the frame is guarded on its keys' identity and
recompiles when they change. Each function against eager (values, the dicts and tensors it changed,
which object each key is) and torch.compile's graph, break and compile counts on the same calls.
Also here: the dict displays that merge entries ({**a, **b}, {k: 1, k: 2}), and `is` between a tensor
and what an in-place method gives back."""
import pytest
import torch
from torch import nn

import dynview
from test_engine_behaviour import counting_dynamo, dynview_compiles
from test_lazy_sequences import _reset, same  # noqa: F401  (_reset: both engines reset around each test)


def canon(v, names):
    """v with every tensor or module key replaced by its name (names: id -> name), so that a dict
    keyed by one run's objects compares with one keyed by the other run's; a key no name is for
    (a tensor the function made) becomes its position."""
    if isinstance(v, dict):
        return [("key", names.get(id(k), k if not isinstance(k, (torch.Tensor, nn.Module)) else f"new{i}"), canon(x, names))
                for i, (k, x) in enumerate(v.items())]
    if isinstance(v, (list, tuple)):
        return type(v)(canon(x, names) for x in v)
    if isinstance(v, nn.Module):
        return ("module", names.get(id(v)), [canon(p, names) for p in v.parameters()])
    if hasattr(v, "__dict__") and not isinstance(v, torch.Tensor):  # an object holding state
        return ("object", type(v).__name__, canon(vars(v), names))
    return v


def named_objects(args):
    """id -> a name for each tensor and module the arguments reach (parameters by module path)."""
    names = {}

    def walk(v, path):
        if isinstance(v, (torch.Tensor, nn.Module)):
            names.setdefault(id(v), path)
        if isinstance(v, nn.Module):
            for n, p in v.named_parameters():
                names.setdefault(id(p), f"{path}.{n}")
            for n, m in v.named_modules():
                names.setdefault(id(m), f"{path}.{n}")
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")
        elif isinstance(v, dict):
            for i, (k, x) in enumerate(v.items()):
                walk(k, f"{path}.key{i}")
                walk(x, f"{path}[{i}]")
    for i, a in enumerate(args):
        walk(a, f"arg{i}")
        if hasattr(a, "__dict__") and not isinstance(a, (torch.Tensor, nn.Module)):
            walk(vars(a), f"arg{i}.vars")
    return names


def outcome(fn, args):
    names = named_objects(args)
    try:
        out = ("ok", canon(fn(*args), names))
    except Exception as e:
        out = ("raise", type(e), str(e))
    return out, canon(list(args), names)


def run_all(fn, make_calls):
    """make_calls() gives the calls' argument lists (fresh objects, the same values each time): each
    call through eager, torch.compile and dynview, in turn; results and arguments afterwards equal
    eager's, and dynview compiled as many graphs as torch.compile did. Returns that number."""
    td, n_td = counting_dynamo(fn)
    dv = dynview.compile(fn, backend="eager")
    dynview._C.take_records()
    for e_args, t_args, d_args in zip(make_calls(), make_calls(), make_calls()):
        want = outcome(fn, e_args)
        got_td = outcome(td, t_args)
        got = outcome(dv, d_args)
        same(got_td, want)  # (the oracle agrees with eager, or the case is wrong)
        same(got, want)
    assert dynview_compiles() == n_td[0]
    return n_td[0]


def explain_counts(fn, *args):
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    dynview.reset()
    ours = dynview.explain(fn)(*args)
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)), \
        ([str(b) for b in ours.break_reasons], [str(b.reason)[:200] for b in theirs.break_reasons])
    return ours.graph_count, len(ours.break_reasons)


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


# ---- optimizer state keyed by parameter, written the way hand-rolled optimizers write it ----
def sgd_momentum(params, grads, state, lr, momentum):
    for p, g in zip(params, grads):
        buf = state.get(p)
        if buf is None:
            buf = g.clone()
            state[p] = buf
        else:
            buf.mul_(momentum).add_(g)
        p.sub_(lr * buf)
    return len(state)


def test_momentum_buffers_kept_in_a_dict_keyed_by_parameters():
    def calls():
        model = _model(0)
        params = [p.detach() for p in model.parameters()]  # plain tensors updated in place
        state = {}  # one dict across the steps, as an optimizer's
        g = torch.Generator().manual_seed(1)
        for step in range(4):
            grads = [torch.randn(p.shape, generator=g) for p in params]
            yield [params, grads, state, 0.1, 0.9]
    # step 1 fills the empty state (its new entries are written back keyed by the caller's
    # parameters), step 2 finds them (the keys' identity guarded), steps 3 and 4 hit the cache
    assert run_all(sgd_momentum, calls) == 2


# torch.optim keeps per-parameter state in self.state, a defaultdict(dict) keyed by parameter
class _Adamish:
    def __init__(self, params, lr=1e-2):
        self.params = list(params)
        self.lr = lr
        self.state = {p: {"step": 0, "exp_avg": torch.zeros_like(p)} for p in self.params}


def adam_like_update(x, opt):
    total = x.sum()
    for p in opt.params:
        st = opt.state[p]
        st["exp_avg"].mul_(0.9).add_(p.detach(), alpha=0.1)
        total = total + st["exp_avg"].sum()
    return total


def test_an_optimizers_state_read_by_parameter():
    def calls():
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        opt = _Adamish(model.parameters())
        g = torch.Generator().manual_seed(1)
        for _ in range(3):
            yield [torch.randn(2, 3, generator=g), opt]
    assert run_all(adam_like_update, calls) == 1
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    assert explain_counts(adam_like_update, torch.randn(2, 3), _Adamish(model.parameters())) == (1, 0)


def test_a_new_parameter_object_under_the_same_key_recompiles():
    # The dict's keys are held to their identity: another tensor with the same values is another key
    # (here a 1-element tensor equal to the first, which == would take for it). Against eager only:
    # torch.compile (2.13) returns the first entry's stale -1.0 on the last call below.
    w1, w2 = torch.tensor([2.0]), torch.tensor([2.0])
    scales = {w1: 10.0}

    def f(x, w):
        return x * scales.get(w, -1.0)

    dv = dynview.compile(f, backend="eager")
    dynview._C.take_records()
    x = torch.ones(3)
    for w in (w1, w2, w1, w2):
        torch.testing.assert_close(dv(x, w), f(x, w))
    assert dynview_compiles() == 2  # found, not found; then cache hits
    scales.clear()
    scales[w2] = 5.0
    for w in (w1, w2, w2):
        torch.testing.assert_close(dv(x, w), f(x, w))
    assert dynview_compiles() == 2  # the keys changed: both compile again, then a hit


# ---- names and weights keyed by parameter and by submodule ----
def named_grads_report(x, model):
    names = {p: n for n, p in model.named_parameters()}
    out = model(x)
    norms = {}
    for p in model.parameters():
        norms[names[p]] = p.norm()
    return out, norms


def test_names_keyed_by_parameter():
    def calls():
        model = _model(0)
        for seed in (1, 2):
            yield [torch.randn(3, 4, generator=torch.Generator().manual_seed(seed)), model]
    assert run_all(named_grads_report, calls) == 1
    assert explain_counts(named_grads_report, torch.randn(3, 4), _model(0)) == (1, 0)


class Mixture(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 4)

    def forward(self, x):
        weights = {self.a: 0.5, self.b: 0.25}
        weights[self.c] = 0.25
        if self.b in weights:
            weights[self.b] *= 2
        del weights[self.a]
        return sum(w * m(x) for m, w in weights.items()), len(weights)


def test_submodules_as_keys():
    torch.manual_seed(0)
    m = Mixture()
    x = torch.randn(2, 4)
    cm = dynview.compile(m, backend="eager")
    for _ in range(2):
        same(cm(x), m(x))
    assert explain_counts(m, x) == (1, 0)


# ---- tensors made in the trace as keys ----
def in_trace_keys(x):
    y = x * 2
    z = y.relu_()  # y itself: the same key
    d = {x: "x", y: "y"}
    d[z] = "z"
    found = [d[x], d[y], len(d), x in d, (x + 0) in d, d.get(x.t(), "none")]
    return found, [k.sum() for k in d]


def test_tensors_made_in_the_trace_as_keys():
    def calls():
        for seed in (0, 1, 0):
            yield [torch.randn(3, 3, generator=torch.Generator().manual_seed(seed))]
    assert run_all(in_trace_keys, calls) == 1
    assert explain_counts(in_trace_keys, torch.randn(3, 3)) == (1, 0)


def keyed_by_arguments(x, y):
    d = {x: x + 1}
    d[y] = y * 2
    d.setdefault(x, None)
    return d


def test_a_dict_keyed_by_arguments_leaves_the_trace_keyed_by_them():
    x, y = torch.randn(2), torch.randn(2)
    cf = dynview.compile(keyed_by_arguments, backend="eager")
    for _ in range(2):
        out = cf(x, y)
        assert list(out) == [x, y] and all(k is a for k, a in zip(out, (x, y)))
        torch.testing.assert_close(list(out.values()), list(keyed_by_arguments(x, y).values()))
    x2 = torch.randn(2)
    out = cf(x2, y)
    assert list(out)[0] is x2, "the key is rebuilt from the argument, not kept from the first call"
    assert explain_counts(keyed_by_arguments, x, y) == (1, 0)


def test_a_tensor_key_that_is_not_there_raises_keyerror_like_eager():
    def f(x, y):
        d = {x: 1}
        return x + d[y]

    x, y = torch.randn(2), torch.randn(2)
    with pytest.raises(KeyError):
        f(x, y)
    with pytest.raises(KeyError):
        dynview.compile(f, backend="eager")(x, y)


def test_an_int_key_is_not_a_one_element_tensor_equal_to_it():
    def f(x):
        one = torch.ones((), dtype=torch.long)
        d = {1: "int", one: "tensor"}
        return x + len(d), d[1], d[one]

    want = f(torch.zeros(2))
    same(dynview.compile(f, backend="eager")(torch.zeros(2)), want)


# ---- `is` between a tensor and what its methods give back ----
def returned_by_methods(x):
    y = x.mul_(2)
    z = x * 1
    w = z.add_(1)
    a = x.contiguous()
    b = x.to(torch.float32)
    c = x.view(-1)
    return y is x, w is z, z is x, a is x, b is x, c is x


def test_is_between_a_tensor_and_its_own_in_place_result():
    def calls():
        for seed in (0, 1):
            yield [torch.randn(3, generator=torch.Generator().manual_seed(seed))]
    assert run_all(returned_by_methods, calls) == 1


# ---- dict displays that merge entries ----
def merged(x, k, overrides):
    defaults = {"scale": 1.0, "shift": 0.0, "clip": None}
    opts = {**defaults, **overrides}
    dup = {k: 1, k: 2, "a": 3, "a": 4}
    return x * opts["scale"] + opts["shift"], list(opts.items()), dup, len(opts)


def test_dict_displays_that_repeat_a_key_keep_the_last_value():
    def calls():
        for s in (2.0, 3.0):
            yield [torch.ones(2), "k", {"scale": s, "shift": 1.0}]
    run_all(merged, calls)
    assert explain_counts(merged, torch.ones(2), "k", {"scale": 2.0}) == (1, 0)


def test_a_keyword_given_twice_raises_like_eager():
    def g(**kw):
        return kw

    def f(x, a, b):
        return x + len(g(**a, **b))

    args = (torch.ones(2), {"p": 1}, {"p": 2})
    with pytest.raises(TypeError) as want:
        f(*args)
    with pytest.raises(TypeError) as got:
        dynview.compile(f, backend="eager")(*args)
    assert str(got.value) == str(want.value)
    same(dynview.compile(f, backend="eager")(torch.ones(2), {"p": 1}, {"q": 2}), f(torch.ones(2), {"p": 1}, {"q": 2}))


# ---- torch.optim's own shapes: state a defaultdict(dict) keyed by parameter, tensors grouped by
# (device, dtype), per-parameter maps built with dict(zip(...)) and dict.fromkeys ----
class _OptimLike:
    def __init__(self, params):
        import collections
        self.params = list(params)
        self.state = collections.defaultdict(dict)
        for p in self.params:
            self.state[p]["square_avg"] = torch.zeros_like(p)


def rmsprop_like(x, opt, alpha):
    grouped = {}
    for p in opt.params:
        grouped.setdefault((p.device, p.dtype), []).append(p)
    out = x
    for (device, dtype), ps in grouped.items():
        for p in ps:
            st = opt.state[p]
            st["square_avg"].mul_(alpha).addcmul_(p, p, value=1 - alpha)
            out = out + st["square_avg"].sum()
    steps = dict.fromkeys(opt.params, 0)
    steps[opt.params[0]] += 1
    lrs = dict(zip(opt.params, [0.1 * (i + 1) for i in range(len(opt.params))]))
    return out, len(grouped), [steps[p] for p in opt.params], [lrs[p] for p in reversed(opt.params)]


def test_optimizer_shaped_state_grouping_and_per_parameter_maps():
    def calls():
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        opt = _OptimLike(model.parameters())
        g = torch.Generator().manual_seed(2)
        for _ in range(3):
            yield [torch.randn(3, generator=g), opt, 0.9]
    # the first step makes the state's tensors require grad (addcmul_ with a parameter): the second
    # recompiles, with those tensors as autograd's (not leaves: their in-place updates trace), in
    # both engines; the third is a cache hit
    assert run_all(rmsprop_like, calls) == 2
    torch.manual_seed(0)
    assert explain_counts(rmsprop_like, torch.randn(3), _OptimLike(nn.Linear(3, 2).parameters()), 0.9) == (1, 0)


def ordered_by_parameter(x, params):
    import collections
    od = collections.OrderedDict((p, p.numel()) for p in params)
    od.move_to_end(params[0])
    last, n = od.popitem()
    pairs = dict([("a", 1), ("b", 2), ("a", 3)], b=4)
    return x + n, last is params[0], list(od.values()), pairs


def test_ordered_dicts_keyed_by_parameter_and_repeated_pairs():
    def calls():
        torch.manual_seed(0)
        params = list(nn.Linear(3, 2).parameters())
        for seed in (0, 1):
            yield [torch.randn(2, generator=torch.Generator().manual_seed(seed)), params]
    assert run_all(ordered_by_parameter, calls) == 1
