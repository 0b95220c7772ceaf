"""Guards on dicts reached from the frame are as lazy as TorchDynamo's (issue 14): only what the code
reads is guarded (an entry read by a constant key, a key probed with `in` or .get), the whole key list
only when the code depends on it (iteration, len, **d, ==, copy, mutation, escape). Each case runs a
sequence of dicts that change in read and unread ways under torch.compile and dynview with counting
backends: the same number of compiles, and results equal to eager on every call."""
import collections

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def dynview_compiles():
    return len([r for r in dynview._C.take_records() if r["graph"] is not None])


def counts(fn, calls, make=None):
    """Runs `calls` (tuples of arguments, or callables making them) through eager, torch.compile and
    dynview; returns (dynview compiles, torch.compile compiles)."""
    def args_of(c):
        return c() if callable(c) else c

    torch._dynamo.reset()
    n = [0]

    def be(gm, ex):
        n[0] += 1
        return gm.forward
    obj_td = make() if make else fn
    obj_dv = make() if make else fn
    obj_eager = make() if make else fn
    td = torch.compile(obj_td, backend=be)
    for c in calls:
        want = obj_eager(*args_of(c))
        torch.testing.assert_close(td(*args_of(c)), want)
    dynview.reset()
    dynview._C.take_records()
    obj_eager = make() if make else fn
    dv = dynview.compile(obj_dv, backend="eager")
    for i, c in enumerate(calls):
        want = obj_eager(*args_of(c))
        torch.testing.assert_close(dv(*args_of(c)), want, msg=lambda m: f"call {i}: {m}")
    return dynview_compiles(), n[0]


X = torch.arange(4.0)


# ---- cases ---------------------------------------------------------------------------------------

def read_one(x, d):
    return x * d['a']


def options_get(x, opts):
    scale = opts.get('scale', 1.0)
    return x * scale + opts.get('bias', 0.0)


def contains(x, cfg):
    if 'bias' in cfg:
        x = x + cfg['bias']
    if 'missing' not in cfg:
        x = x * 2
    return x


def iterate(x, d):
    acc = x
    for k in d:
        acc = acc + d[k]
    return acc


def items(x, d):
    return [x * v for k, v in d.items()]


def length(x, d):
    return x * len(d)


def unpack_kwargs(x, d):
    def g(x, a, b=1, **rest):
        return x * a + b
    return g(x, **d)


def nested(x, cfg):
    return x * cfg['optim']['lr'] + cfg['optim'].get('wd', 0.0)


def mutated(x, d):
    d['calls'] = d.get('calls', 0) + 1
    return x * d['scale']


def tensors(x, d):
    return d['w'] @ x + d['b']


def equality(x, d):
    if d == {'a': 1, 'b': 2}:
        return x + 1
    return x - 1


def copied(x, d):
    e = dict(d)
    e['z'] = 0
    return x * e['a'] + len(e)


def returned(x, d):
    return x * d['a'], d


def star_kwargs(x, **kw):
    return x * kw['a']


def tuple_keys(x, cache):  # a cache keyed by (length, device, dtype)
    key = (x.shape[0], x.device, x.dtype)
    if key in cache:
        return x * cache[key]
    return x + cache.get((0, 'default'), 1.0)


CPU = torch.device('cpu')
CONFIG = {'act': 'relu', 'unused': 1}


def global_config(x):
    return torch.relu(x) if CONFIG['act'] == 'relu' else torch.tanh(x)


class UsesCfg(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x, cfg):
        return self.l(x) * cfg['scale']


class Wrapper(nn.Module):  # the dict passed on to a submodule's forward
    def __init__(self):
        super().__init__()
        self.inner = UsesCfg()

    def forward(self, x, cfg):
        return self.inner(x, cfg) + cfg.get('shift', 0.0)


class AttrCfg(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {'scale': 2.0, 'name': 'm'}

    def forward(self, x):
        return x * self.cfg['scale']


def set_global(**kv):
    def make():
        CONFIG.clear()
        CONFIG.update(kv)
        return (X,)
    return make


def attr_cfg_calls():
    m = AttrCfg()
    seq = []
    for cfg in [{'scale': 2.0, 'name': 'm'}, {'scale': 2.0, 'name': 'n'}, {'scale': 2.0, 'name': 'n', 'x': 1},
                {'scale': 3.0}]:
        seq.append(cfg)
    return m, seq


OD = collections.OrderedDict


def length_and_read(x, d):
    return x * d['a'] + len(d)


def length_then_written(x, d):
    n = len(d)
    d['z'] = n
    return x * n + len(d) + sum(d.values())

def scaled(a, k=1.0, shift=0.0):  # binds its keywords by name: their order is never seen
    return a * k + shift


def star_into(x, d):
    return scaled(x, **d)


class Resize:
    def apply(self, x, scale_factor=1.0, mode="nearest"):
        return F.interpolate(x, scale_factor=scale_factor, mode=mode)


RESIZE = Resize()


def star_method_and_library(x, opts):
    y = x.reshape(1, 1, -1)
    return RESIZE.apply(y, **opts) + F.interpolate(y, **opts)


CASES = {
    # name: (fn, calls, make)
    "read_one": (read_one, [(X, {'a': 2, 'b': 3}), (X, {'a': 2, 'b': 4}), (X, {'a': 2, 'b': 4, 'c': 1}),
                            (X, {'b': 1, 'a': 2}), (X, {'a': 5, 'b': 1})], None),
    "options_get": (options_get, [(X, {'scale': 2.0}), (X, {'scale': 2.0, 'verbose': True}), (X, {'verbose': False, 'scale': 2.0}),
                                  (X, {'scale': 2.0, 'bias': 1.0}), (X, {'scale': 3.0, 'bias': 1.0})], None),
    "contains": (contains, [(X, {'lr': 1}), (X, {'lr': 2}), (X, {'lr': 2, 'bias': 1.0}), (X, {'bias': 1.0}),
                            (X, {'bias': 2.0}), (X, {'missing': 0})], None),
    "iterate": (iterate, [(X, {'a': 1, 'b': 2}), (X, {'a': 1, 'b': 2}), (X, {'b': 2, 'a': 1}), (X, {'a': 3, 'b': 2})], None),
    "items": (items, [(X, {'a': 1, 'b': 2}), (X, {'a': 1, 'b': 2}), (X, {'a': 1, 'b': 3}), (X, {'a': 1})], None),
    "length": (length, [(X, {'a': 1}), (X, {'b': 1}), (X, {'a': 1, 'b': 2})], None),
    "unpack_kwargs": (unpack_kwargs, [(X, {'a': 2}), (X, {'a': 2}), (X, {'a': 2, 'b': 3}), (X, {'a': 3, 'b': 3})], None),
    "nested": (nested, [(X, {'optim': {'lr': 0.1}, 'model': {'depth': 2}}),
                        (X, {'optim': {'lr': 0.1}, 'model': {'depth': 3}}),
                        (X, {'optim': {'lr': 0.1, 'momentum': 0.9}, 'model': {'depth': 3}}),
                        (X, {'model': {}, 'optim': {'lr': 0.1}}),
                        (X, {'optim': {'lr': 0.5}, 'model': {'depth': 3}}),
                        (X, {'optim': {'lr': 0.5, 'wd': 0.01}})], None),
    "mutated": (mutated, [lambda: (X, {'scale': 2.0}), lambda: (X, {'scale': 2.0, 'calls': 3}),
                          lambda: (X, {'scale': 2.0})], None),
    "tensors": (tensors, [(X, {'w': torch.eye(4), 'b': torch.ones(4), 'unused': torch.zeros(2)}),
                          (X, {'w': torch.eye(4), 'b': torch.ones(4), 'unused': torch.zeros(5, 5)}),
                          (X, {'w': torch.eye(4), 'b': torch.ones(4)}),
                          (X, {'w': torch.eye(4) * 2, 'b': torch.ones(1)})], None),
    "equality": (equality, [(X, {'a': 1, 'b': 2}), (X, {'a': 1, 'b': 3}), (X, {'a': 1, 'b': 2})], None),
    "copied": (copied, [(X, {'a': 1}), (X, {'a': 1}), (X, {'a': 1, 'b': 2})], None),
    "returned": (returned, [(X, {'a': 2, 'b': 1}), (X, {'a': 2, 'b': 1}), (X, {'a': 2, 'b': 1, 'c': 1}), (X, {'a': 3, 'b': 1, 'c': 1})], None),
    "tuple_keys": (tuple_keys, [(X, {(4, CPU, torch.float32): 2.0}), (X, {(4, CPU, torch.float32): 2.0, (8, CPU, torch.float32): 1.0}),
                                (X, {(4, CPU, torch.float32): 3.0}), (X, {(4, CPU, torch.float64): 3.0}),
                                (X, {(4, CPU, torch.float64): 3.0, (0, 'default'): 5.0})], None),
    # collections.OrderedDict (a state_dict, an options mapping): as lazy as a dict while read by key
    "ordered_read_one": (read_one, [(X, OD(a=2, b=3)), (X, OD(b=3, a=2)), (X, OD(a=2, b=4, c=1)), (X, OD(a=5))], None),
    "ordered_options_get": (options_get, [(X, OD(scale=2.0)), (X, OD(verbose=True, scale=2.0)), (X, OD(scale=2.0, bias=1.0)),
                                          (X, OD(bias=1.0, scale=2.0))], None),
    "ordered_contains": (contains, [(X, OD(lr=1)), (X, OD(lr=2, bias=1.0)), (X, OD(bias=1.0, lr=2)), (X, OD(missing=0))], None),
    "ordered_iterate": (iterate, [(X, OD(a=1, b=2)), (X, OD(a=1, b=2)), (X, OD(b=2, a=1)), (X, OD(a=3, b=2))], None),
    "ordered_tensors": (tensors, [(X, OD(w=torch.eye(4), b=torch.ones(4), unused=torch.zeros(2))),
                                  (X, OD(unused=torch.zeros(5, 5), b=torch.ones(4), w=torch.eye(4))),
                                  (X, OD(w=torch.eye(4) * 2, b=torch.ones(1)))], None),
    # len(d): its key set guarded, in any order (TorchDynamo guards the order only where it is read)
    "length_reordered": (length, [(X, {'a': 1, 'b': 2}), (X, {'b': 1, 'a': 2}), (X, {'c': 1, 'd': 2}), (X, {'a': 1}),
                                  (X, {'a': 1, 'b': 2})], None),
    "ordered_length": (length, [(X, OD(a=1, b=2)), (X, OD(b=1, a=2)), (X, OD(c=1, d=2)), (X, OD(a=1))], None),
    "length_and_read": (length_and_read, [(X, {'a': 2, 'b': 1}), (X, {'b': 1, 'a': 3}), (X, {'a': 2, 'c': 1}), (X, {'a': 2})], None),
    "length_then_written": (length_then_written, [lambda: (X, {'a': 1, 'b': 2}), lambda: (X, {'b': 1, 'a': 2}),
                                                  lambda: (X, {'z': 1}), lambda: (X, {'c': 1})], None),
    # g(**d) into a function without **kwargs: the key set guarded, not its order (as TorchDynamo)
    "star_reordered": (star_into, [(X, {'k': 2.0, 'shift': 3.0}), (X, {'shift': 3.0, 'k': 2.0}), (X, {'shift': 3.0}),
                                   (X, {'shift': 1.0, 'k': 2.0}), (X, {'k': 2.0, 'shift': 1.0})], None),
    "star_method_and_library": (star_method_and_library, [(X, {'scale_factor': 2.0, 'mode': 'linear'}),
                                                          (X, {'mode': 'linear', 'scale_factor': 2.0}),
                                                          (X, {'mode': 'nearest', 'scale_factor': 2.0})], None),
    "global_config": (global_config, [set_global(act='relu', unused=1), set_global(act='relu', unused=2),
                                      set_global(act='relu'), set_global(act='tanh')], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_compile_count_as_torch_compile(name):
    fn, calls, make = CASES[name]
    got, want = counts(fn, calls, make)
    assert got == want, f"{name}: dynview compiled {got} times, torch.compile {want}"


def keyword_names(x, **kw):
    return x * len(kw), list(kw)


def star_into_kwargs(x, d):
    return keyword_names(x, **d)


def test_star_into_kwargs_keeps_the_order_guarded():
    # a callee with **kwargs sees the order (list(kw)): a dict in another order is another compile,
    # where torch.compile, which guards no order, returns the first call's order
    cf = dynview.compile(star_into_kwargs, backend="eager")
    for d in ({'a': 1, 'b': 2}, {'b': 2, 'a': 1}, {'a': 1, 'b': 2}):
        got, want = cf(X, d), star_into_kwargs(X, d)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert dynview_compiles() == 2


def test_star_kwargs_of_the_frame():
    calls = [(X,), (X,), (X,), (X,)]
    kws = [{'a': 2, 'b': 3}, {'a': 2, 'b': 4}, {'a': 2, 'c': 1}, {'a': 3}]
    torch._dynamo.reset()
    n = [0]

    def be(gm, ex):
        n[0] += 1
        return gm.forward
    td = torch.compile(star_kwargs, backend=be)
    for (x,), kw in zip(calls, kws):
        torch.testing.assert_close(td(x, **kw), star_kwargs(x, **kw))
    dynview._C.take_records()
    dv = dynview.compile(star_kwargs, backend="eager")
    for (x,), kw in zip(calls, kws):
        torch.testing.assert_close(dv(x, **kw), star_kwargs(x, **kw))
    assert dynview_compiles() == n[0]


@pytest.mark.parametrize("cls", [UsesCfg, Wrapper])
def test_dict_passed_to_module_forward(cls):
    torch.manual_seed(0)
    m = cls()
    calls = [(X, {'scale': 2.0, 'name': 'a'}), (X, {'scale': 2.0, 'name': 'b'}), (X, {'scale': 2.0, 'extra': 1, 'name': 'b'}),
             (X, {'scale': 4.0}), (X, {'scale': 4.0, 'shift': 1.0})]
    got, want = counts(m, calls)
    assert got == want


def test_module_attribute_dict():
    calls = []
    for cfg in [{'scale': 2.0, 'name': 'm'}, {'scale': 2.0, 'name': 'n'}, {'name': 'n', 'x': 1, 'scale': 2.0}, {'scale': 3.0}]:
        calls.append(cfg)
    results = {}
    for engine in ("td", "dv"):
        torch._dynamo.reset()
        dynview.reset()
        dynview._C.take_records()
        n = [0]

        def be(gm, ex):
            n[0] += 1
            return gm.forward
        m = AttrCfg()
        c = torch.compile(m, backend=be) if engine == "td" else dynview.compile(m, backend="eager")
        for cfg in calls:
            m.cfg = cfg
            torch.testing.assert_close(c(X), X * cfg['scale'])
        results[engine] = n[0] if engine == "td" else dynview_compiles()
    assert results["dv"] == results["td"]


def test_changed_read_value_is_seen():
    """A value the code reads changes: the cached code must not reuse the old one."""
    def f(x, d):
        return x * d['optim']['lr'] + d.get('bias', 0.0)
    c = dynview.compile(f, backend="eager")
    d = {'optim': {'lr': 0.1}, 'other': 1}
    torch.testing.assert_close(c(X, d), f(X, d))
    d['optim']['lr'] = 0.7            # mutated in place between calls
    torch.testing.assert_close(c(X, d), f(X, d))
    d['bias'] = 3.0                   # a key probed absent appears
    torch.testing.assert_close(c(X, d), f(X, d))
    d['other'] = 2                    # unread: reused
    torch.testing.assert_close(c(X, d), f(X, d))
    d2 = {'other': 1, 'optim': {'lr': 0.1, 'momentum': 0}}
    torch.testing.assert_close(c(X, d2), f(X, d2))
    del d2['optim']['lr']
    with pytest.raises(KeyError):
        c(X, d2)


def test_unread_entries_get_no_guards():
    def f(x, d):
        return x * d['a']
    c = dynview.compile(f, backend="eager")
    dynview._C.take_records()
    c(X, {'a': 2, 'b': torch.ones(3), 'c': {'deep': 1}})
    recs = dynview._C.take_records()
    text = " ".join(str(r) for r in recs)
    assert "['b']" not in text and "['c']" not in text


def test_a_dict_read_through_a_mappingproxy_is_guarded_like_the_dict():
    """types.MappingProxyType (a class's __dict__, a read-only config): its items are guarded through
    the mapping it shows, so a change of the dict behind it recompiles, and an unchanged one hits."""
    import types

    def f(x, settings):
        return x * settings["scale"]
    c = dynview.compile(f, backend="eager")
    d = {"scale": 2.0, "other": 1}
    proxy = types.MappingProxyType(d)
    torch.testing.assert_close(c(X, proxy), f(X, proxy))
    d["scale"] = 3.0                  # changed behind the proxy
    torch.testing.assert_close(c(X, proxy), f(X, proxy))
    d["other"] = 5                    # unread: reused
    torch.testing.assert_close(c(X, proxy), f(X, proxy))
    entries = dynview._C.cache_entries(f.__code__)
    assert len(entries) == 2 and sum(e["hits"] for e in entries) == 1, entries
    del d["scale"]
    with pytest.raises(KeyError):
        c(X, proxy)


def test_an_ordered_dict_reordered_by_move_to_end_recompiles():
    """OrderedDict keeps its own order (move_to_end does not change the dict storage's): the keys
    guard checks that order too, or the cached code would read the values in the old order. (torch
    2.13's torch.compile reuses its code here and returns the old order's value.)"""
    from collections import OrderedDict

    def first_scaled(x, d):
        return [x * v for v in d.values()][0]
    c = dynview.compile(first_scaled, backend="eager")
    od = OrderedDict([("a", 10.0), ("b", 100.0)])
    torch.testing.assert_close(c(X, od), first_scaled(X, od))
    od.move_to_end("a")
    torch.testing.assert_close(c(X, od), first_scaled(X, od))
    od.move_to_end("b")
    torch.testing.assert_close(c(X, od), first_scaled(X, od))


def test_unread_entries_of_an_ordered_dict_get_no_guards_and_its_order_none():
    def f(x, d):
        return x * d['a'] + d.get('bias', 0)
    c = dynview.compile(f, backend="eager")
    dynview._C.take_records()
    c(X, OD([('b', torch.ones(3)), ('a', 2.0), ('c', {'deep': 1})]))
    guards = [g for r in dynview._C.take_records() for g in r["guards"]]
    text = " ".join(guards)
    assert "['a']" in text and "'bias' not in" in text
    assert "['b']" not in text and "['c']" not in text and ".keys()" not in text, guards


def ordered_edits(x, d):
    # the edits that depend on an OrderedDict's order, each after a read by key
    first = d['a'] * x
    d['new'] = first.sum()
    d.move_to_end('a')
    k, v = d.popitem(last=False)
    del d['new']
    d['b'] = d.get('b', 0) + 1
    return first, k, v


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "a", "b"), ("b", "c", "a")])
def test_ordered_dict_edits_leave_the_order_eager_leaves(order):
    def make():
        return OD((k, float(i + 1)) for i, k in enumerate(order))
    want_d, got_d = make(), make()
    want = ordered_edits(X, want_d)
    dynview.reset()
    got = dynview.compile(ordered_edits, backend="eager")(X, got_d)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    assert list(got_d.items()) == list(want_d.items())
