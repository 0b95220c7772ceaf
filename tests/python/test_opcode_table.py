"""The checked-in opcode tables equal each interpreter's opcode/dis data: 3.11 in process, 3.12 and
3.13 by subprocess when they are installed (other_pythons.py finds them)."""
import dis
import json
import opcode
import subprocess
import sys
from pathlib import Path

import pytest

import other_pythons
from dynview import _C

ROOT = Path(__file__).resolve().parents[2]
# The in-process checks read this interpreter's opcode module in its 3.11 shape; on 3.12 and 3.13
# the same facts are checked for every version by test_other_versions_table_equals_their_interpreter.
on_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                            reason="3.11 opcode-module introspection; other versions: test_other_versions_table_equals_their_interpreter")


def table():
    return {e["opcode"]: e for e in _C.opcode_table()}


@on_311
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


@on_311
def test_specialised_forms_match_dis():
    t = table()
    deopt = {s: b for b, fam in opcode._specializations.items() for s in fam}
    names = {e["name"]: e for e in t.values()}
    for spec in opcode._specialized_instructions:
        e = names[spec]
        assert e["specialized"]
        assert e["opcode"] == dis._all_opmap[spec]
        assert t[e["deopt"]]["name"] == deopt[spec]


@on_311
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
    checked_in = (ROOT / f"core/opcode_table_3{sys.version_info.minor}.inc").read_text()  # this interpreter's
    # The first line names the exact patch release that generated it; the facts must not differ.
    strip = lambda s: [l for l in s.splitlines() if not l.startswith(("// GENERATED", "#define DV_PYTHON_VERSION_HEX"))]
    assert strip(out) == strip(checked_in)


def test_binary_and_compare_argument_tables():
    def f(a, b):
        return (a + b, a - b, a @ b, a ** b, a // b, a < b, a == b, a >= b)
    for ins, ref in zip(_C.instructions(f), dis.get_instructions(f)):
        assert ins[4] == ref.argrepr


# Run under the other interpreter: its opcode/dis facts and dis.stack_effect for every opcode.
FACTS = r"""
import dis, json, opcode
hasarg = set(opcode.hasarg)
caches = opcode._inline_cache_entries
deopt = {s: b for b, fam in opcode._specializations.items() for s in fam}
ops = {}
for op, name in enumerate(opcode.opname[:256]):
    if name.startswith("<"):
        continue
    eff = {}
    for arg in (range(600) if op in hasarg else [None]):
        for jump in (False, True):
            try:
                eff[f"{arg or 0},{int(jump)}"] = dis.stack_effect(op, arg, jump=jump)
            except ValueError:
                eff[f"{arg or 0},{int(jump)}"] = None
    ops[op] = dict(name=name, caches=caches.get(name, 0) if isinstance(caches, dict) else caches[op],
                   has_arg=op in hasarg, const=op in opcode.hasconst, name_op=op in opcode.hasname,
                   jrel=op in opcode.hasjrel, jabs=op in opcode.hasjabs, local=op in opcode.haslocal,
                   free=op in opcode.hasfree, compare=op in opcode.hascompare, effects=eff)
spec = {n: [num, deopt[n]] for n, num in dis._all_opmap.items() if n not in opcode.opmap and num < 256}
print(json.dumps({"ops": ops, "spec": spec}))
"""


@pytest.mark.cross_version
@pytest.mark.parametrize("version", other_pythons.OTHER_VERSIONS)
def test_other_versions_table_equals_their_interpreter(version):
    python = other_pythons.find(version)
    if not python:
        pytest.skip(f"CPython {version} not found")
    tag = version.replace(".", "")
    out = subprocess.run([python, str(ROOT / "core/tools/gen_opcode_table.py")],
                         capture_output=True, text=True, check=True).stdout
    checked_in = (ROOT / f"core/opcode_table_{tag}.inc").read_text()
    strip = lambda s: [l for l in s.splitlines() if not l.startswith(("// GENERATED", "#define DV_PYTHON_VERSION_HEX"))]
    assert strip(out) == strip(checked_in)

    facts = json.loads(subprocess.run([python, "-c", FACTS], capture_output=True, text=True, check=True).stdout)
    t = {e["opcode"]: e for e in _C.opcode_table(version)}
    checked = 0
    for op, ref in facts["ops"].items():
        e = t[int(op)]
        for k in ("name", "caches", "has_arg", "const", "name_op", "jrel", "jabs", "local", "free", "compare"):
            assert e[k] == ref[k], (version, ref["name"], k)
        assert e["neutral_name"] == ref["name"]
        assert e["backward"] == (ref["jrel"] and "JUMP_BACKWARD" in ref["name"])
        for key, want in ref["effects"].items():
            arg, jump = map(int, key.split(","))
            assert _C.stack_effect(int(op), arg, bool(jump), version) == want, (version, ref["name"], arg, jump)
            checked += 1
    for name, (num, base) in facts["spec"].items():
        e = t[num]
        assert e["name"] == name and e["specialized"] and t[e["deopt"]]["name"] == base
    named = {e["opcode"] for e in t.values()}
    assert named == {int(o) for o in facts["ops"]} | {num for num, _ in facts["spec"].values()}
    assert checked > 50000


def test_version_neutral_name_list_is_current():
    tables = [str(ROOT / f"core/opcode_table_{t}.inc") for t in ("311", "312", "313")]
    out = subprocess.run([sys.executable, str(ROOT / "core/tools/gen_opcode_table.py"), "--names", *tables],
                         capture_output=True, text=True, check=True).stdout
    assert out == (ROOT / "core/opcode_names.inc").read_text()
    # One name, one meaning: a name common to versions is the same opcode family in each.
    for v in _C.VERSIONS:
        for e in _C.opcode_table(v):
            assert e["neutral_name"] == e["name"]
