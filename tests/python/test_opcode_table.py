"""The checked-in opcode table equals the running interpreter's opcode/dis data."""
import dis
import opcode
import subprocess
import sys
from pathlib import Path

from dynview import _C

ROOT = Path(__file__).resolve().parents[2]


def table():
    return {e["opcode"]: e for e in _C.opcode_table()}


def test_every_interpreter_opcode_is_in_the_table_with_its_facts():
    t = table()
    for op, name in enumerate(opcode.opname):
        if name.startswith("<"):
            assert op not in t or t[op]["specialized"], f"{op} should be unused or specialised"
            continue
        e = t[op]
        assert e["name"] == name
        assert e["caches"] == opcode._inline_cache_entries[op], name
        assert e["has_arg"] == (op >= opcode.HAVE_ARGUMENT), name
        assert e["const"] == (op in opcode.hasconst), name
        assert e["name_op"] == (op in opcode.hasname), name
        assert e["jrel"] == (op in opcode.hasjrel), name
        assert e["jabs"] == (op in opcode.hasjabs), name
        assert e["local"] == (op in opcode.haslocal), name
        assert e["free"] == (op in opcode.hasfree), name
        assert e["compare"] == (op in opcode.hascompare), name
        assert e["backward"] == (op in opcode.hasjrel and "JUMP_BACKWARD" in name), name


def test_specialised_forms_match_dis():
    t = table()
    deopt = {s: b for b, fam in opcode._specializations.items() for s in fam}
    names = {e["name"]: e for e in t.values()}
    for spec in opcode._specialized_instructions:
        e = names[spec]
        assert e["specialized"]
        assert e["opcode"] == dis._all_opmap[spec]
        assert t[e["deopt"]]["name"] == deopt[spec]


def test_stack_effects_equal_dis_for_all_args_and_both_branches():
    checked = 0
    for op, name in enumerate(opcode.opname):
        if name.startswith("<"):
            continue
        args = range(0, 600) if op >= opcode.HAVE_ARGUMENT else [None]
        for arg in args:
            for jump in (False, True):
                try:
                    want = dis.stack_effect(op, arg, jump=jump)
                except ValueError:
                    want = None
                got = _C.stack_effect(op, arg or 0, jump)
                assert got == want, (name, arg, jump)
                checked += 1
    assert checked > 50000


def test_checked_in_table_is_what_the_generator_produces_now():
    out = subprocess.run([sys.executable, str(ROOT / "core/tools/gen_opcode_table.py")],
                         capture_output=True, text=True, check=True).stdout
    checked_in = (ROOT / "core/opcode_table_311.inc").read_text()
    # The first line names the exact patch release that generated it; the facts must not differ.
    strip = lambda s: [l for l in s.splitlines() if not l.startswith(("// GENERATED", "#define DV_PYTHON_VERSION_HEX"))]
    assert strip(out) == strip(checked_in)


def test_binary_and_compare_argument_tables():
    def f(a, b):
        return (a + b, a - b, a @ b, a ** b, a // b, a < b, a == b, a >= b)
    for ins, ref in zip(_C.instructions(f), dis.get_instructions(f)):
        assert ins[4] == ref.argrepr
