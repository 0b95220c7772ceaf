"""The Python surface of the capture engine (tracer/ via dynview._C): compile, optimize, explain,
reset, config. Everything per frame happens in C++; this module only switches the engine on and
off around calls and turns compile records into reports."""
import dataclasses
import functools
import inspect
import logging
import os
import sys
import threading
import types

import torch

from . import _C


class Unsupported(RuntimeError):
    """Raised with fullgraph=True at the first graph break: carries break_id, title (the id's, from
    the graph-break table), message, hint and lineno of the user's code."""


_dynamo_unsupported = None  # Unsupported and torch._dynamo.exc.Unsupported both, made once torch._dynamo is imported


def _new_unsupported(msg):
    """The exception fullgraph=True raises: a dynview.Unsupported, and also a
    torch._dynamo.exc.Unsupported once torch._dynamo is imported (code written for torch.compile
    catches that), without importing torch._dynamo itself."""
    global _dynamo_unsupported
    exc = sys.modules.get("torch._dynamo.exc")
    theirs = getattr(exc, "Unsupported", None)
    if not isinstance(theirs, type) or not issubclass(theirs, BaseException):
        return Unsupported(msg)
    if _dynamo_unsupported is None or _dynamo_unsupported.__bases__[1] is not theirs:
        _dynamo_unsupported = type("Unsupported", (Unsupported, theirs),
                                   {"__module__": __name__, "__qualname__": "Unsupported", "__doc__": Unsupported.__doc__})
    return _dynamo_unsupported(msg)


_C._set_unsupported(_new_unsupported)


class _Config:
    """dynview.config: defaults mirror torch.compile (torch._dynamo.config)."""

    def __init__(self):
        self._recompile_limit = 8
        self._fail_on_recompile_limit = False

    @property
    def recompile_limit(self):
        return self._recompile_limit

    @recompile_limit.setter
    def recompile_limit(self, v):
        self._recompile_limit = int(v)
        _C._set_config(self._recompile_limit, self._fail_on_recompile_limit)

    @property
    def fail_on_recompile_limit(self):
        return self._fail_on_recompile_limit

    @fail_on_recompile_limit.setter
    def fail_on_recompile_limit(self, v):
        self._fail_on_recompile_limit = bool(v)
        _C._set_config(self._recompile_limit, self._fail_on_recompile_limit)


config = _Config()


_LOG_CHANNELS = ("graph_breaks", "recompiles", "guards", "graph_code", "bytecode", "steps", "all")


def _setup_logs():
    spec = os.environ.get("DYNVIEW_LOGS", "")
    channels = [c.strip().lstrip("+") for c in spec.split(",") if c.strip()]
    unknown = [c for c in channels if c not in _LOG_CHANNELS]
    if unknown:
        sys.stderr.write(f"dynview: DYNVIEW_LOGS: unknown channel{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(repr(c) for c in unknown)} (known: {', '.join(_LOG_CHANNELS)})\n")
        channels = [c for c in channels if c in _LOG_CHANNELS]
    if channels:
        logging.getLogger("dynview").setLevel(logging.INFO)
        if not logging.getLogger("dynview").handlers and not logging.getLogger().handlers:
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter("[%(name)s] %(message)s"))  # loggers are dynview.<channel>
            logging.getLogger("dynview").addHandler(h)
        _C._set_logs(channels)


_setup_logs()


def _eager_backend(gm, example_inputs):
    return gm.forward


_eager_backend._dynview_ignores_inputs = True  # _shapes.compile_static hands it the real inputs


def _lookup_backend(backend):
    # One object per backend name: compiled code is kept per backend object (a function compiled
    # again with another backend compiles again), so a name must give the same object each time.
    if callable(backend):
        return backend
    if backend == "eager":
        return _eager_backend
    from torch._dynamo.backends.registry import lookup_backend
    return lookup_backend(backend)


_installed = False
_install_lock = threading.Lock()


def _ensure_installed():
    global _installed
    if not _installed:
        with _install_lock:
            if not _installed:
                _C._install()
                _installed = True


class _Enabled:
    """Enables capture on this thread inside a with-block (re-entrant: one saved mode per entry)."""

    def __init__(self, backend, fullgraph, dynamic=None):
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = -1 if dynamic is None else int(bool(dynamic))
        self._saved = threading.local()

    def __enter__(self):
        _ensure_installed()
        stack = getattr(self._saved, "stack", None)
        if stack is None:
            stack = self._saved.stack = []
        stack.append(_C._set_mode(True, self.backend, self.fullgraph, self.dynamic))

    def __exit__(self, *exc):
        _C._set_mode(*self._saved.stack.pop())
        return False


def compile(model=None, *, backend="inductor", fullgraph=False, dynamic=None, mode=None, options=None,
            disable=False):
    """Like torch.compile: returns a function (or module wrapper) whose calls are captured.
    dynamic=None: a size or int that changes between calls becomes symbolic at the recompile
    (automatic dynamic shapes); True: symbolic from the first compile; False: always specialised."""
    if model is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options, disable=disable)
    if disable or os.environ.get("TORCHDYNAMO_DISABLE", "") == "1":  # (torch.compile returns it as it is too)
        return model
    if not callable(model):  # as torch.compile says it
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    _ensure_installed()
    be = _lookup_backend(backend)
    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        # a module class (@dynview.compile on the class): its instances' calls are compiled, as
        # torch.compile patches the class's __call__; the class itself is returned
        model.__call__ = _C.CompiledFunction(model.__call__, be, fullgraph, dynamic)
        return model
    if isinstance(model, torch.nn.Module):
        return _optimized_module_class()(model, _C.CompiledFunction(model, be, fullgraph, dynamic), (backend, fullgraph, dynamic))
    model = _with_a_frame(model)
    compiled = _C.CompiledFunction(model, be, fullgraph, dynamic)
    try:
        functools.update_wrapper(compiled, model)
    except (AttributeError, TypeError):
        pass
    return compiled


def _with_a_frame(fn):
    """A callable with no Python frame of its own (torch.sin, a functools.partial, a builtin) is
    called from a new Python function, so there is a frame to capture (as torch.compile wraps it);
    each wrapper has its own code object, so its own cache."""
    try:
        has_source = inspect.getsourcefile(fn) is not None
    except TypeError:
        has_source = False
    if has_source or inspect.isfunction(fn):
        return fn

    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    # a code object of its own, from no file of dynview's (whose frames are never captured)
    call.__code__ = call.__code__.replace(co_filename="<dynview.compile of a callable without a frame>")
    try:
        functools.update_wrapper(call, fn)
    except (AttributeError, TypeError):
        pass
    return call


class OptimizedModule(torch.nn.Module):
    """The wrapper dynview.compile returns for an nn.Module (like torch's OptimizedModule): calls go to
    the compiled forward; every other attribute, read, written or deleted, is the wrapped module's
    (`training` included), so the compiled code sees what the caller changed."""

    _own = {"_orig_mod", "_dynview_call", "_dynview_options", "forward", "__dict__", "_super_module_initialized"}

    def __init__(self, mod, compiled_call, options):
        object.__setattr__(self, "_orig_mod", mod)  # (first: reads and writes below go through it)
        self._super_module_initialized = False
        torch.nn.Module.__init__(self)  # (not torch's OptimizedModule's, which wants its dynamo context)
        self._super_module_initialized = True
        self._orig_mod = mod  # (registers it as the child module: parameters, state_dict, .to())
        self.__dict__["_dynview_call"] = compiled_call
        self.__dict__["_dynview_options"] = options

    def forward(self, *args, **kwargs):
        return self._dynview_call(*args, **kwargs)

    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, value):
        if self.__dict__.get("_super_module_initialized"):  # (not nn.Module.__init__'s default)
            self._orig_mod.training = value

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in OptimizedModule._own:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in OptimizedModule._own:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __len__(self):
        return len(self._orig_mod)

    def __dir__(self):
        mine = self._orig_mod.__dir__()
        return mine + [a for a in super().__dir__() if a not in mine]

    def __reduce__(self):
        # pickled as the module and how it was compiled (torch.save of a compiled model); the
        # compiled code itself is made again on the first call after loading
        return (_compiled_again, (self._orig_mod, *self._dynview_options))


@functools.lru_cache(maxsize=1)
def _optimized_module_class():
    """The class of the wrappers dynview.compile returns: OptimizedModule, also a subclass of
    torch._dynamo.eval_frame.OptimizedModule, so that libraries that ask whether a module was
    compiled (diffusers' is_compiled_module, its pipelines' isinstance checks) find it was and
    unwrap its _orig_mod. Made at the first module compiled: torch._dynamo is imported by then."""
    try:
        from torch._dynamo.eval_frame import OptimizedModule as TorchOptimizedModule
    except ImportError:  # (no torch._dynamo: the plain wrapper)
        return OptimizedModule
    return type("OptimizedModule", (OptimizedModule, TorchOptimizedModule),
                {"__module__": __name__, "__doc__": OptimizedModule.__doc__})


def _compiled_again(mod, backend, fullgraph, dynamic):
    return compile(mod, backend=backend, fullgraph=fullgraph, dynamic=dynamic)


def optimize(backend="inductor", fullgraph=False, dynamic=None):
    """Context manager: capture every frame called inside the block."""
    return _Enabled(_lookup_backend(backend), fullgraph, dynamic)


class disable:
    """Context manager: no capture inside the block."""

    def __enter__(self):
        self.prev = _C._set_mode(False, None, False)

    def __exit__(self, *exc):
        _C._set_mode(*self.prev)
        return False


def reset():
    """Drop every cache entry and compile record (like torch._dynamo.reset())."""
    _C.reset()


@dataclasses.dataclass
class BreakReason:
    reason: str
    break_id: str
    hint: str
    user_stack: list
    graph_break: bool = True

    @property
    def title(self):
        """The break id's title from the graph-break table ("" for an id it does not know)."""
        return next((b["title"] for b in _C.break_ids() if b["id"] == self.break_id), "")

    def __str__(self):
        return f"{self.break_id}: {self.reason}"


@dataclasses.dataclass
class ExplainOutput:
    """Same fields as torch._dynamo.backends.debugging.ExplainOutput."""
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list
    out_guards: list
    compile_times: str

    def __str__(self):
        out = f"Graph Count: {self.graph_count}\nGraph Break Count: {self.graph_break_count}\nOp Count: {self.op_count}\n"
        out += "Break Reasons:\n"
        for i, b in enumerate(self.break_reasons, 1):
            title = f" ({b.title})" if b.title else ""
            out += f"  Break Reason {i}:\n    Reason: {b.break_id}{title}: {b.reason}\n"
            if b.hint:
                out += f"    Hint: {b.hint}\n"
            out += "    User Stack:\n" + "".join(f"      {s}\n" for s in b.user_stack)
        out += "Ops per Graph:\n"
        for i, ops in enumerate(self.ops_per_graph, 1):
            out += f"  Ops {i}:\n" + "".join(f"    {o}\n" for o in ops)
        out += "Out Guards:\n" + "".join(f"  Guard {i}: {g}\n" for i, g in enumerate(self.out_guards, 1))
        out += f"Compile Times: {self.compile_times}\n"
        return out


def _explain_from_records(records):
    graphs = [r["graph"] for r in records if r["graph"] is not None]
    # As torch._dynamo.explain: a break is reported with the partial graph compiled before it (a break
    # with nothing compiled before it, or in a frame that runs eagerly, lists no reason).
    breaks = [BreakReason(r["break_message"], r["break_id"], r["break_hint"], r["break_stack"])
              for r in records if r["has_break"] and r["graph"] is not None]
    ops = [r["ops"] for r in records if r["graph"] is not None]
    guards = [g for r in records for g in r["guards"]]
    times = "TorchDynamo compilation metrics:\n" + "\n".join(
        f"  {r['compile_id']} {r['qualname']}: {r['seconds'] * 1e3:.2f} ms" for r in records)
    return ExplainOutput(graphs, len(graphs), len(breaks), breaks, sum(len(o) for o in ops), ops, guards, times)


def explain(fn, *extra_args, **extra_kwargs):
    """dynview.explain(fn)(*args): run fn once under capture (eager backend) and report what was
    captured: graphs, breaks with their reasons and user stack, ops per graph, guards, times."""

    def inner(*args, **kwargs):
        _C.reset()
        _C.take_records()
        with _Enabled(_lookup_backend("eager"), False):
            fn(*args, **kwargs)
        records = _C.take_records()
        _C.reset()
        return _explain_from_records(records)

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner
