"""Hand-built assembler cases the stdlib covers poorly. Each assembled code object is run and must
behave like the function it was modelled on; its tables are read back through CPython itself
(co_positions, co_lines, dis) rather than through dynview's decoder."""
import dis
import sys
import traceback
import types

import pytest

from dynview import bytecode
from dynview import _C

# Hand-built CPython 3.11 bytecode, run by this interpreter. The 3.12 and 3.13 assemblers are checked
# by test_bytecode_corpus (every stdlib file of each version re-assembled byte-identical).
pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="hand-built CPython 3.11 bytecode")


def make(template, instrs, ranges=(), consts=None, names=None, nlocals_names=None):
    out = bytecode.assemble(instrs, ranges, template.co_firstlineno)
    kw = dict(co_code=out["code"], co_linetable=out["linetable"],
              co_exceptiontable=out["exceptiontable"], co_stacksize=out["stacksize"])
    if consts is not None:
        kw["co_consts"] = consts
    if names is not None:
        kw["co_names"] = names
    code = template.replace(**kw)
    return code, out


def fn(code, glb=None):
    return types.FunctionType(code, glb if glb is not None else globals())


def opnames(code):
    return [i.opname for i in dis.get_instructions(code)]


def _template(x):
    return x


def test_forward_jump_needing_extended_arg():
    # if x: <300 NOPs> return 1 / else: return 2
    body = [("NOP", 0)] * 300
    instrs = [("RESUME", 0), ("LOAD_FAST", 0), ("POP_JUMP_FORWARD_IF_FALSE", 5 + 300)] + body + [
        ("LOAD_CONST", 1), ("RETURN_VALUE", 0), ("LOAD_CONST", 2), ("RETURN_VALUE", 0)]
    # targets are instruction indexes: index 3+300 = LOAD_CONST 1; LOAD_CONST 2 is at 305
    code, out = make(_template.__code__, instrs, consts=(None, 1, 2))
    ins = list(dis.get_instructions(code))
    assert ins[2].opname == "EXTENDED_ARG"
    jump = ins[3]
    assert jump.opname == "POP_JUMP_FORWARD_IF_FALSE" and jump.arg > 255
    assert jump.argval == out["offsets"][305]
    f = fn(code)
    assert f(True) == 1 and f(False) == 2


def test_backward_jump_needing_extended_arg_and_direction_choice():
    # i = 0; while i < n: <300 NOPs>; i += 1   -- the loop jump is given as JUMP_FORWARD
    n_nop = 300
    loop = 3
    end = loop + 4 + n_nop + 5
    instrs = ([("RESUME", 0), ("LOAD_CONST", 1), ("STORE_FAST", 1),
               ("LOAD_FAST", 1), ("LOAD_FAST", 0), ("COMPARE_OP", 0), ("POP_JUMP_FORWARD_IF_FALSE", end)]
              + [("NOP", 0)] * n_nop
              + [("LOAD_FAST", 1), ("LOAD_CONST", 2), ("BINARY_OP", 13), ("STORE_FAST", 1), ("JUMP_FORWARD", loop),
                 ("LOAD_FAST", 1), ("RETURN_VALUE", 0)])
    assert instrs[end][0] == "LOAD_FAST"

    def tmpl(n):
        i = 0
        return i
    code, out = make(tmpl.__code__, instrs, consts=(None, 0, 1))
    names = opnames(code)
    assert "JUMP_BACKWARD" in names and "JUMP_FORWARD" not in names
    back = [i for i in dis.get_instructions(code) if i.opname == "JUMP_BACKWARD"][0]
    assert back.arg > 255 and back.argval == out["offsets"][loop]
    f = fn(code)
    assert [f(k) for k in (0, 1, 7)] == [0, 1, 7]


def test_one_direction_jump_cannot_go_back():
    with pytest.raises(ValueError, match="cannot jump backward"):
        bytecode.assemble([("RESUME", 0), ("NOP", 0), ("FOR_ITER", 1), ("RETURN_VALUE", 0)])


def _nested(x):
    try:
        try:
            return 1 / x
        except ZeroDivisionError:
            return "inner"
    except TypeError:
        return "outer"


def test_nested_exception_ranges_flatten_innermost_first():
    I = [("RESUME", 0), ("NOP", 0), ("NOP", 0),
         ("LOAD_CONST", 1), ("LOAD_FAST", 0), ("BINARY_OP", 11), ("RETURN_VALUE", 0),          # 3..6
         ("PUSH_EXC_INFO", 0), ("LOAD_GLOBAL", 0), ("CHECK_EXC_MATCH", 0),                      # 7..9
         ("POP_JUMP_FORWARD_IF_FALSE", 15), ("POP_TOP", 0), ("POP_EXCEPT", 0),                  # 10..12
         ("LOAD_CONST", 2), ("RETURN_VALUE", 0), ("RERAISE", 0),                                # 13..15
         ("COPY", 3), ("POP_EXCEPT", 0), ("RERAISE", 1),                                        # 16..18
         ("PUSH_EXC_INFO", 0), ("LOAD_GLOBAL", 2), ("CHECK_EXC_MATCH", 0),                      # 19..21
         ("POP_JUMP_FORWARD_IF_FALSE", 27), ("POP_TOP", 0), ("POP_EXCEPT", 0),                  # 22..24
         ("LOAD_CONST", 3), ("RETURN_VALUE", 0), ("RERAISE", 0),                                # 25..27
         ("COPY", 3), ("POP_EXCEPT", 0), ("RERAISE", 1)]                                        # 28..30
    ranges = [
        (7, 19, 19, 0, False),   # outer try: the whole inner handler region
        (3, 6, 7, 0, False),     # inner try body
        (7, 12, 16, 1, True),    # inner handler cleanup, nested inside the outer range
        (15, 16, 16, 1, True),
        (19, 23, 28, 1, True),   # outer handler cleanup
        (27, 28, 28, 1, True),
    ]
    code, out = make(_nested.__code__, I, ranges)
    off = out["offsets"]
    want = [(off[3], off[6], off[7], 0, False), (off[7], off[12], off[16], 1, True),
            (off[12], off[15], off[19], 0, False), (off[15], off[16], off[16], 1, True),
            (off[16], off[19], off[19], 0, False), (off[19], off[23], off[28], 1, True),
            (off[27], off[28], off[28], 1, True)]
    assert [tuple(e) for e in dis._parse_exception_table(code)] == want
    f = fn(code)
    for x in (2, 0, "a"):
        assert f(x) == _nested(x)


def test_with_and_try_in_real_function_reassemble_and_run(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("hello")

    def g(path, fail):
        out = []
        try:
            with open(path) as fh:
                out.append(fh.read())
                if fail:
                    raise KeyError(fail)
        except KeyError as e:
            out.append(("caught", e.args))
        finally:
            out.append("finally")
        return out
    re = _C.reassemble(g)
    assert re.co_exceptiontable == g.__code__.co_exceptiontable and len(dis._parse_exception_table(re)) >= 4
    h = types.FunctionType(re, g.__globals__, "g", None, g.__closure__)
    assert h(str(p), None) == g(str(p), None)
    assert h(str(p), "k") == g(str(p), "k")


def test_line_entry_longer_than_8_code_units():
    # LOAD_METHOD is 1 + 10 cache units: its location must be written as two entries.
    def tmpl(s):
        return s.upper()
    pos = (7, 7, 11, 20)
    I = [("RESUME", 0, (6, 6, 0, 0)), ("LOAD_FAST", 0, pos), ("LOAD_METHOD", 0, pos),
         ("PRECALL", 0, pos), ("CALL", 0, pos), ("RETURN_VALUE", 0, pos)]
    code, out = make(tmpl.__code__, I)
    units = list(code.co_positions())
    assert len(units) == len(code.co_code) // 2
    lm = out["offsets"][2] // 2
    assert units[lm:lm + 11] == [pos] * 11
    # Two entries for LOAD_METHOD: the line table has one more entry than instructions.
    entries, i, lt = 0, 0, code.co_linetable
    while i < len(lt):
        entries += bool(lt[i] & 0x80)
        i += 1
    assert entries == len(I) + 1
    assert fn(code)("abc") == "ABC"


def test_negative_line_deltas_and_missing_locations():
    def tmpl(a, b):
        return a + b
    I = [("RESUME", 0, (20, 20, 0, 0)),
         ("LOAD_FAST", 0, (30, 30, 4, 5)),
         ("LOAD_FAST", 1, (10, 10, 8, 9)),       # line goes down by 20
         ("BINARY_OP", 0, None),                 # no location at all
         ("RETURN_VALUE", 0, (5, 12, 1, 300))]   # multi-line, wide columns: long form
    code, _ = make(tmpl.__code__, I)
    per_unit = list(code.co_positions())
    assert per_unit[1] == (30, 30, 4, 5)
    assert per_unit[2] == (10, 10, 8, 9)
    assert per_unit[3] == (None, None, None, None) and per_unit[4] == (None, None, None, None)
    assert per_unit[5] == (5, 12, 1, 300)
    assert [l for _, l in dis.findlinestarts(code)] == [20, 30, 10, 5]
    assert fn(code)(2, 3) == 5


def test_traceback_reports_assembled_line():
    def tmpl(a):
        return 1 / a
    I = [("RESUME", 0, (100, 100, 0, 0)), ("LOAD_CONST", 1, (123, 123, 4, 5)),
         ("LOAD_FAST", 0, (123, 123, 8, 9)), ("BINARY_OP", 11, (123, 123, 4, 9)),
         ("RETURN_VALUE", 0, (123, 123, 4, 9))]
    code, _ = make(tmpl.__code__, I)
    with pytest.raises(ZeroDivisionError) as ei:
        fn(code)(0)
    assert ei.value.__traceback__.tb_next.tb_lineno == 123
    assert "123" in "".join(traceback.format_tb(ei.value.__traceback__))


def test_generated_large_functions_reassemble_identically():
    # Real compiler output with many EXTENDED_ARGs: >256 constants and long jumps.
    src = "def big(x):\n" + "".join(
        f"    if x == {i}:\n        return {i * 7} + {i}.5\n" for i in range(400)) + "    return -1\n"
    ns = {}
    exec(compile(src, "<big>", "exec"), ns)
    big = ns["big"]
    re = _C.reassemble(big)
    assert "EXTENDED_ARG" in opnames(big.__code__)
    for f in ("co_code", "co_linetable", "co_exceptiontable", "co_stacksize"):
        assert getattr(re, f) == getattr(big.__code__, f), f
    g = types.FunctionType(re, ns)
    assert [g(k) for k in (0, 17, 399, 1000)] == [big(k) for k in (0, 17, 399, 1000)]


def test_assembler_errors_are_values_not_crashes():
    with pytest.raises(ValueError, match="jump target"):
        bytecode.assemble([("JUMP_FORWARD", 9)])
    with pytest.raises(ValueError, match="cannot be assembled"):
        bytecode.assemble([("EXTENDED_ARG", 1)])
    with pytest.raises(ValueError, match="out of bounds"):
        bytecode.assemble([("NOP", 0)], [(0, 5, 0, 0, False)])
    with pytest.raises(ValueError, match="unknown opcode"):
        bytecode.assemble([("NOT_AN_OP", 0)])
