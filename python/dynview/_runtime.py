"""Objects the transformed code of a split frame refers to (never instantiated by users)."""
import functools
import types

import torch


class GradModeExit:
    """Stands for a `with torch.no_grad()/enable_grad()/set_grad_enabled(b)` block's __exit__ when a
    frame is split inside the block: the resume function keeps it on its stack where the block's
    exit and exception handler call it, and it restores the grad mode the block saw on entry."""
    __slots__ = ("mode",)

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, *exc_info):
        torch._C._set_grad_enabled(self.mode)
        return None

    def __repr__(self):
        return f"<restore grad mode {self.mode}>"


RESTORE_GRAD = (GradModeExit(False), GradModeExit(True))


_autograd_applies = {}


def autograd_function_apply(cls):
    """The graph's target for `cls.apply(...)` of a torch.autograd.Function subclass: a plain function
    calling it (FX would name a bound `cls.apply` after torch.autograd.function, where it is not found).
    One per class, so repeated compiles share it."""
    fn = _autograd_applies.get(cls)
    if fn is None:
        def fn(*args, **kwargs):
            return cls.apply(*args, **kwargs)
        fn.__name__ = f"{cls.__name__}_apply"
        fn.__qualname__ = f"{cls.__qualname__}.apply"
        _autograd_applies[cls] = fn
    return fn


def grad_decorated(mode, fn):
    """A function decorated by torch.enable_grad() (mode True) or torch.no_grad() in the trace."""
    return (torch.enable_grad if mode else torch.no_grad)()(fn)


def make_partial(func, args, keywords):
    """A functools.partial made in the trace and rebuilt by the transformed code."""
    return functools.partial(func, *args, **keywords)


def make_function(code, globals_, defaults, kwdefaults, closure=None, attrs=None, descriptors=None):
    """A function made in the trace and rebuilt by the transformed code: what MAKE_FUNCTION made
    (its name and qualified name come from the code object; `closure` holds the real cells), with
    the attributes the trace wrote: `attrs` its __dict__, `descriptors` __name__, __doc__ ..."""
    fn = types.FunctionType(code, globals_, None, defaults, closure)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    if attrs:
        fn.__dict__.update(attrs)
    for k, v in (descriptors or {}).items():
        setattr(fn, k, v)
    return fn


def rebuild_module(cls, args, kwargs, names, kinds, *values):
    """An nn.Module built in the trace that leaves it, made again for the caller: cls(*args,
    **kwargs) when it was built from constants, else object.__new__(cls) with nn.Module.__init__
    (its own __init__ was followed by the trace), then given the attributes the trace set on it, in
    order: kinds[i] 0 through nn.Module.__setattr__, 1 and 2 register_buffer (persistent or not).
    Its __init__ runs as eager runs it, not captured (a frame of its own, which fullgraph would refuse)."""
    from . import _C
    prev = _C._set_mode(False, None, False)
    try:
        return _rebuild_module(cls, args, kwargs, names, kinds, values)
    finally:
        _C._set_mode(*prev)


def _rebuild_module(cls, args, kwargs, names, kinds, values):
    if args is None:
        module = object.__new__(cls)
        torch.nn.Module.__init__(module)
    else:
        module = cls(*args, **kwargs)
    for name, kind, value in zip(names, kinds, values):
        if kind:
            torch.nn.Module.register_buffer(module, name, value, persistent=kind == 1)
        else:
            torch.nn.Module.__setattr__(module, name, value)
    return module


def tuple_iterator_getitem(it, k):
    """The item k places ahead of a tuple iterator (the transformed code reloads a graph input)."""
    reduced = it.__reduce__()  # (iter, (seq,), index), or (iter, ((),)) once exhausted
    return reduced[1][0][(reduced[2] if len(reduced) > 2 else 0) + k]


def dict_value_at(d, i):
    """The value at place i of a dict, in its own order (a module's hook; the transformed code reloads it)."""
    return list(d.values())[i]


def advance_iterator(it, n):
    """Takes the n items the graph took from an iterator of the frame."""
    for _ in range(n):
        next(it)


def lower_version_count_by_1(x):
    """After `x.data = y` (set_ in the graph): gives back the version set_ counted, as eager's
    assignment leaves x._version where it was."""
    version = x._version
    torch._C._autograd._unsafe_set_version_counter((x,), (version - 1 if version > 0 else version,))
    return x


def autocast_exit(device, prev, prev_dtype, prev_cache):
    """What torch.autocast's __exit__ does, from the state it recorded on entering: a graph node where a
    graph break split the block (the graph before the break entered it; the resume function leaves it)."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, prev)
    torch.set_autocast_dtype(device, prev_dtype)
    torch.set_autocast_cache_enabled(prev_cache)
    return False


class InferenceModeExit:
    """The __exit__ of a torch.inference_mode block that a graph break split, as the transformed code
    holds it: made entered (the graph before the break left the block), so that the breaking
    instruction runs inside it; called once, after that instruction (the resume function enters the
    block again) or by the block's handler with the exception."""
    __slots__ = ("mode", "_ctx")

    def __init__(self, mode):
        self.mode = mode
        self._ctx = torch._C._InferenceMode(mode)
        self._ctx.__enter__()

    def __call__(self, *exc):
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.__exit__(None, None, None)
        return None

    def __repr__(self):
        return "<exit torch.inference_mode(%r)>" % self.mode


class SavedHooksExit:
    """The __exit__ of a torch.autograd.graph.disable_saved_tensors_hooks block that a graph break
    split, as the transformed code holds it: made entered (hooks disabled with the block's message),
    so that the breaking instruction runs inside it; called once, after that instruction (the resume
    function enters the block again) or by the block's handler with the exception, it puts back the
    state before the block (None: hooks enabled)."""
    __slots__ = ("message", "before", "_entered")

    def __init__(self, message, before):
        self.message, self.before = message, before
        torch._C._autograd._saved_tensors_hooks_disable(message)
        self._entered = True

    def __call__(self, *exc):
        if self._entered:
            self._entered = False
            if self.before is None:
                torch._C._autograd._saved_tensors_hooks_enable()
            else:
                torch._C._autograd._saved_tensors_hooks_disable(self.before)
        return None

    def __repr__(self):
        return "<exit disable_saved_tensors_hooks(%r): back to %r>" % (self.message, self.before)


class SdpaKernelExit:
    """The __exit__ of a torch.nn.attention.sdpa_kernel block that a graph break split, as the
    transformed code holds it: made entered (the block's backends enabled), so that the breaking
    instruction runs inside it; called once, after that instruction (the resume function enters the
    block again) or by the block's handler with the exception, it enables the backends before it."""
    __slots__ = ("backends", "set_priority", "before", "_entered")

    def __init__(self, backends, set_priority, before):
        from torch.nn.attention import _sdpa_kernel
        self.backends, self.set_priority, self.before = backends, set_priority, before
        _sdpa_kernel(backends, set_priority)
        self._entered = True

    def __call__(self, *exc):
        if self._entered:
            from torch.nn.attention import _sdpa_kernel
            self._entered = False
            _sdpa_kernel(self.before, self.set_priority)
        return None

    def __repr__(self):
        return "<exit sdpa_kernel(%r): back to %r>" % (self.backends, self.before)


class AutocastExit:
    """The __exit__ of a torch.autocast block that a graph break split, on the resume function's stack."""
    __slots__ = ("state",)

    def __init__(self, device, prev, prev_dtype, prev_cache):
        self.state = (device, prev, prev_dtype, prev_cache)

    def __call__(self, *exc):
        return autocast_exit(*self.state)

    def __repr__(self):
        return "<exit torch.autocast(%r): back to enabled=%r, dtype=%r>" % self.state[:3]


def overridable_python_functions():
    """The functions written in Python that eager hands to a torch function mode (their bodies call
    handle_torch_function: F.softmax, F.layer_norm, Tensor.__format__ ...), as torch.overrides lists
    them; another Python function of torch (torch.compiler.is_exporting) is not handed to it."""
    import types
    from torch.overrides import get_overridable_functions

    out = set()
    for fns in get_overridable_functions().values():
        out.update(f for f in fns if isinstance(f, types.FunctionType))
    return frozenset(out)


def torch_function_operators():
    """What a TorchFunctionMode's __torch_function__ is given for an operator on tensors, found as
    eager gives it, by running each under a mode (as TorchDynamo finds its builtin-to-tensor map):
    {operator function: (func for op(tensor, other), func for op(other, tensor) -- which eager calls
    with the operands swapped -- or None)}."""
    import operator
    from torch.overrides import TorchFunctionMode

    seen = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    def first(op, *args):
        seen.clear()
        try:
            with Record():
                op(*args)
        except Exception:
            return None
        return seen[0] if seen else None

    ints = {"and_", "or_", "xor", "lshift", "rshift", "mod"}
    operators = {}
    for name in ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
                 "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne"]:
        dt = torch.int64 if name in ints else torch.float32
        a, b = (torch.ones(2, 2, dtype=dt) for _ in range(2))
        op = getattr(operator, name)
        operators[op] = (first(op, a, b), None if name == "matmul" else first(op, 1, b))
        iop = getattr(operator, "i" + name.rstrip("_"), None)
        if iop is not None:
            operators[iop] = (first(iop, a, b), None)
    for name in ["neg", "pos", "invert", "abs"]:
        a = torch.ones((), dtype=torch.bool if name == "invert" else torch.int64)
        op = getattr(operator, name)
        operators[op] = (first(op, a), None)
    operators[operator.getitem] = (torch.Tensor.__getitem__, None)
    operators[operator.setitem] = (torch.Tensor.__setitem__, None)
    return {k: v for k, v in operators.items() if v[0] is not None}
