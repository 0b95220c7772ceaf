"""`dynview disasm` lists a recorded code object (JSON) without Python, byte for byte like dis: 3.11
code from this interpreter, 3.12 and 3.13 code from theirs (when installed), whatever Python dynview
was built beside."""
import dis
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

import other_pythons
from dynview import _C

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def cli():
    for cand in (os.environ.get("DYNVIEW_BIN"), os.path.join(ROOT, "build", "dynview"), shutil.which("dynview")):
        if cand and os.path.exists(cand):
            return cand
    pytest.fail("dynview executable not built (expected build/dynview or DYNVIEW_BIN)")


def nested(a, *, b=2):
    def inner(q):
        return [q * k for k in range(b)]
    try:
        return inner(a) + [f"{a!r:>4}"]
    finally:
        del a


MODULE = compile(open(dis.__file__).read(), dis.__file__, "exec")  # a whole module, nested code


@pytest.mark.parametrize("fn", [nested, json.dumps, dis.dis, MODULE], ids=["nested", "json.dumps", "dis.dis", "dis-module"])
def test_cli_listing_equals_dis(tmp_path, fn):
    p = tmp_path / "code.json"
    p.write_text(_C.code_json(fn))
    ref = io.StringIO()
    dis.dis(fn, file=ref)
    out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ref.getvalue()


def test_cli_reports_malformed_input(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
    assert out.returncode == 2 and "not valid JSON" in out.stderr
    rec = json.loads(_C.code_json(nested))
    rec["code"] = rec["code"][:-2]  # drop one byte
    p.write_text(json.dumps(rec))
    out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
    assert out.returncode == 2 and "co_code: odd length" in out.stderr
    out = subprocess.run([cli(), "disasm", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert out.returncode == 2 and "cannot open" in out.stderr
    out = subprocess.run([cli(), "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 64 and "usage" in out.stderr


# Run under CPython 3.12/3.13: code JSON (bytecode_dump.code_json) and dis.dis of a function with
# nested code, try/finally, f-strings, super(), comprehensions, and of that version's dis module.
OTHER_SNIPPET = r"""
import dis, io, json, sys
sys.path.insert(0, sys.argv[1])
import bytecode_dump
class Base:
    def m(self, a):
        return a
class Child(Base):
    def m(self, a, *, b=2):
        def inner(q):
            return [q * k for k in range(b) if k is not None]
        try:
            return super().m(inner(a)) + [f"{a!r:>4}", f"{b}"]
        finally:
            del a
out = {}
for name, co in (("method", Child.m.__code__),
                 ("dis-module", compile(open(dis.__file__).read(), dis.__file__, "exec"))):
    buf = io.StringIO()
    dis.dis(co, file=buf)
    out[name] = [bytecode_dump.code_json(co, True, True), buf.getvalue()]
print(json.dumps(out))
"""


@pytest.mark.cross_version
@pytest.mark.parametrize("version", other_pythons.OTHER_VERSIONS)
def test_cli_lists_other_versions_code_like_their_dis(tmp_path, version):
    python = other_pythons.find(version)
    if not python:
        pytest.skip(f"CPython {version} not found")
    cases = json.loads(subprocess.run([python, "-c", OTHER_SNIPPET, other_pythons.HERE], capture_output=True,
                                      text=True, check=True).stdout)
    for name, (code, listing) in cases.items():
        assert code["version"] == version
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(code))
        out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout == listing, name


def test_cli_refuses_unknown_version(tmp_path):
    rec = json.loads(_C.code_json(nested))
    assert rec["version"] == "%d.%d" % sys.version_info[:2]  # code of the interpreter that recorded it
    rec["version"] = "3.10"
    p = tmp_path / "old.json"
    p.write_text(json.dumps(rec))
    out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
    assert out.returncode == 2 and "not a supported CPython version" in out.stderr
