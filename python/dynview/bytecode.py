"""CPython 3.11 bytecode, read and written by dynview's C++ core (core/ via dynview._C)."""
import collections
import types

from . import _C

Instruction = collections.namedtuple(
    "Instruction",
    ["opname", "opcode", "arg", "argval", "argrepr", "offset", "starts_line", "is_jump_target",
     "positions"],
)


def instructions(x):
    """Decoded instructions of a code object or function, with dis.Instruction's fields."""
    return [Instruction._make(t) for t in _C.instructions(x)]


def disassemble(x, *, recursive=True, lasti=-1):
    """The text ``dis.dis(x)`` prints, produced by the C++ disassembler."""
    return _C.disassemble(x, recursive, lasti)


def exception_table(x):
    return _C.exception_table(x)


def reassemble(x) -> types.CodeType:
    """Decode and re-assemble ``x``'s code with dynview's assembler; returns a new code object."""
    return _C.reassemble(x)


def assemble(instrs, ranges=(), firstlineno=1):
    """Assemble ``[(op, arg_or_target_index, positions)]`` with ``[(start, end, handler, depth,
    lasti)]`` exception ranges (instruction indexes). Returns code, linetable, exceptiontable,
    stacksize and the byte offset of each instruction."""
    return _C.assemble(list(instrs), list(ranges), firstlineno)
