"""dynview: a TorchDynamo-style graph-capture engine that is also its own debugger.

    f = dynview.compile(fn, backend="inductor", fullgraph=False, dynamic=None)  # like torch.compile
    e = dynview.explain(fn)(*args)        # graphs, graph_count, graph_break_count, break_reasons, ...
    dynview.reset()                       # drop all caches
    dynview.config.recompile_limit = 8

The CPython 3.11 bytecode model is in ``dynview.bytecode``.
"""
import torch  # noqa: F401  (LibTorch must be loaded before the native module)

from . import _C, bytecode
from ._engine import (ExplainOutput, Unsupported, compile, config, disable, explain, optimize, reset)
from .bytecode import Instruction, disassemble, instructions, reassemble

__all__ = ["compile", "explain", "reset", "config", "optimize", "disable", "Unsupported", "ExplainOutput",
           "bytecode", "Instruction", "disassemble", "instructions", "reassemble"]
__version__ = "0.1.0"
