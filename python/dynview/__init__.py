"""dynview: a TorchDynamo-style graph-capture engine that is also its own debugger.

This release carries the CPython 3.11 bytecode model (``dynview.bytecode``); the capture engine,
the recorder and the viewer arrive with the next issues.
"""
from . import bytecode
from .bytecode import Instruction, disassemble, instructions, reassemble

__all__ = ["bytecode", "Instruction", "disassemble", "instructions", "reassemble"]
__version__ = "0.1.0"
