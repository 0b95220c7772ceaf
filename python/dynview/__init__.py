"""dynview: a TorchDynamo-style graph-capture engine that is also its own debugger.

    f = dynview.compile(fn, backend="inductor", fullgraph=False, dynamic=None)  # like torch.compile
    e = dynview.explain(fn)(*args)        # graphs, graph_count, graph_break_count, break_reasons, ...
    dynview.reset()                       # drop all caches
    dynview.config.recompile_limit = 8
    with dynview.record("run.dyn"): ...   # every capture into a .dyn trace (or DYNVIEW_TRACE=run.dyn)
    t = dynview.load_trace("run.dyn")     # read it back; `dynview explain run.dyn` from a shell
    dynview.break_ids()                   # the graph-break ids: id, title, default hint

The CPython 3.11 bytecode model is in ``dynview.bytecode``.
"""
import torch  # noqa: F401  (LibTorch must be loaded before the native module)

from . import _C, _trace, bytecode
from ._engine import (ExplainOutput, Unsupported, compile, config, disable, explain, optimize, reset)
from ._trace import Trace, load_trace, record
from .bytecode import Instruction, disassemble, instructions, reassemble



def break_ids():
    """The graph-break table (docs/graph-breaks.md): a list of {"id", "title", "hint"} in id order."""
    return _C.break_ids()


def break_title(break_id):
    """The title of a graph-break id, or "" for an id the table does not know (older traces, TORCH_TRACE)."""
    return next((b["title"] for b in _C.break_ids() if b["id"] == break_id), "")


_trace._setup_env_trace()  # DYNVIEW_TRACE=run.dyn records the whole process

__all__ = ["compile", "explain", "reset", "config", "optimize", "disable", "Unsupported", "ExplainOutput",
           "bytecode", "Instruction", "disassemble", "instructions", "reassemble", "record", "load_trace", "Trace",
           "break_ids", "break_title"]
__version__ = "0.1.0"
