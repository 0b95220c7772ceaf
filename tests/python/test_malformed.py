"""Malformed bytecode and tables give a ValueError that says what is wrong and where; never a crash.
Each case is built from a real code object by corrupting one field."""
import random

import pytest

from dynview import _C


def sample(x, y):
    try:
        z = x + y
    except TypeError:
        z = None
    for i in range(3):
        if z is not None:
            z = z * i
    return z


CO = sample.__code__
CODE = CO.co_code
LT = CO.co_linetable
ET = CO.co_exceptiontable


def decode(code=CODE, lt=LT, et=ET):
    return _C.decode_raw(code, lt, et, CO.co_firstlineno)


def test_valid_input_decodes():
    assert decode() == len(_C.instructions(sample))


@pytest.mark.parametrize("code, pattern", [
    (CODE[:-1], r"co_code: odd length"),
    (CODE[:2] + bytes([255, 0]) + CODE[4:], r"co_code: unknown opcode 255 \(at byte 2\)"),
])
def test_bad_code(code, pattern):
    with pytest.raises(ValueError, match=pattern):
        decode(code=code)


def test_truncated_caches_are_reported_with_offset():
    # LOAD_GLOBAL carries 5 cache units: cut the code right after one.
    ins = [i for i in _C.instructions(sample) if i[0] == "LOAD_GLOBAL"][0]
    with pytest.raises(ValueError, match=rf"LOAD_GLOBAL is cut off.*at byte {ins[5]}"):
        decode(code=CODE[: ins[5] + 4], lt=b"", et=b"")


def test_jump_into_the_middle_of_an_instruction():
    ins = [i for i in _C.instructions(sample) if i[0] == "JUMP_FORWARD" or i[0].startswith("POP_JUMP")][0]
    code = bytearray(CODE)
    code[ins[5] + 1] = 200  # jump far past the end
    with pytest.raises(ValueError, match=rf"jumps to \d+, which is not an instruction.*at byte {ins[5]}"):
        decode(code=bytes(code))


def test_bad_line_tables():
    with pytest.raises(ValueError, match=r"co_linetable: .*marker bit \(at byte 0\)"):
        decode(lt=bytes([0x01]) + LT)
    with pytest.raises(ValueError, match=r"co_linetable: truncated"):
        decode(lt=bytes([0x80 | (14 << 3)]))
    with pytest.raises(ValueError, match=r"co_linetable: entries cover more code units"):
        decode(lt=LT + LT)


def test_bad_exception_tables():
    with pytest.raises(ValueError, match=r"co_exceptiontable: truncated entry \(at byte 0\)"):
        decode(et=ET[:2])
    with pytest.raises(ValueError, match=r"co_exceptiontable: entry does not start with the marker bit"):
        decode(et=bytes([ET[0] & 0x7F]) + ET[1:])
    with pytest.raises(ValueError, match=r"points past the end of co_code"):
        decode(et=bytes([0x80 | 1, 2, 63, 0]))


def test_out_of_range_operands_in_a_real_code_object():
    # LOAD_FAST 0 -> LOAD_FAST 99 in a real code object: the listing refuses, naming the table.
    ins = [i for i in _C.instructions(sample) if i[0] == "LOAD_FAST"][0]
    code = bytearray(CODE)
    code[ins[5] + 1] = 99
    bad = CO.replace(co_code=bytes(code))
    with pytest.raises(ValueError, match=rf"LOAD_FAST arg 99 is out of range for co_localsplusnames.*at byte {ins[5]}"):
        _C.disassemble(bad)
    with pytest.raises(ValueError, match="out of range"):
        _C.instructions(bad)


def test_random_corruption_never_crashes():
    rng = random.Random(1234)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(3000):
        code, lt, et = bytearray(CODE), bytearray(LT), bytearray(ET)
        for buf in rng.sample([code, lt, et], rng.randint(1, 3)):
            if buf and rng.random() < 0.8:
                for _ in range(rng.randint(1, 4)):
                    buf[rng.randrange(len(buf))] = rng.randrange(256)
            else:
                del buf[rng.randrange(len(buf) + 1):]
        try:
            decode(bytes(code), bytes(lt), bytes(et))
            outcomes["ok"] += 1
        except ValueError as e:
            assert str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 10
