"""`dynview disasm` lists a recorded code object (JSON) without Python, byte for byte like dis."""
import dis
import io
import json
import os
import shutil
import subprocess

import pytest

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
