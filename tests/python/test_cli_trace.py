"""The dynview executable's trace subcommands (explain, recompiles, check, stats, export): their
JSON against what the engine itself reports (dynview.explain), documented exit codes, text output."""
import json
import os
import subprocess

import pytest
import torch

import dynview
from test_cli_disasm import cli


def brk(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return -y


def two(x, n):
    return torch.relu(x) * n + x.mean()


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


@pytest.fixture(scope="module")
def run_trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "run.dyn")
    dynview.reset()
    dynview._C.take_records()
    with dynview.record(path):
        m = dynview.compile(MLP(), backend="eager")
        m(torch.randn(2, 8))
        m(torch.randn(2, 8))
        t = dynview.compile(two, backend="eager")
        t(torch.randn(3), 2)
        t(torch.randn(3), 3)          # recompile: constant changed
        t(torch.randn(3).double(), 3)  # recompile: dtype
        dynview.compile(brk, backend="eager")(torch.ones(3))
    records = dynview._C.take_records()
    dynview.reset()
    return path, records


def run(*args):
    return subprocess.run([cli(), *args], capture_output=True, text=True, timeout=120)


def test_explain_json_matches_engine(run_trace):
    path, records = run_trace
    out = run("explain", path, "--json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert [c["compile_id"] for c in j["compiles"]] == [r["compile_id"] for r in records]
    for c, r in zip(j["compiles"], records):
        assert [g["text"] for g in c["guards"]] == r["guards"]
        assert len(c["graphs"]) == (r["graph"] is not None)
        if r["graph"] is not None:
            assert c["graphs"][0]["ops"] == len(r["ops"]) == sum(c["graphs"][0]["op_counts"].values())
        assert [b["break_id"] for b in c["breaks"]] == ([r["break_id"]] if r["has_break"] else [])
        for b in c["breaks"]:
            assert b["line"] == r["break_line"] and b["reason"] == r["break_message"] and b["hint"] == r["break_hint"]
    t = j["totals"]
    assert t["graph_breaks"] == 1 and t["recompiles"] == 2 and t["graphs"] == sum(r["graph"] is not None for r in records)
    text = run("explain", path).stdout
    assert "graph break DV0002" in text and f"at {__file__}:{brk.__code__.co_firstlineno + 2}" in text
    assert "total: 6 compiles" in text  # brk is split: its frame and the resume function of the branch taken


def test_recompiles_names_guard_and_where_it_was_made(run_trace):
    path, _ = run_trace
    out = run("recompiles", path, "--json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert j["count"] == 2
    first, second = j["recompiles"]
    assert first["qualname"] == "two" and first["entry"] == "[1/0]" and first["compile_id"] == "[1/1]"
    (f,) = first["failures"]
    assert "L['n'] == 2" in f["failure"] or "expected 2" in f["failure"]
    assert f["guard"]["kind"] == "EQUALS_MATCH" and f["guard"]["text"] == "L['n'] == 2"
    # an argument is wrapped (and guarded) by the step that first reads it: `* n`, on the line after the def
    assert f["guard"]["line"] == two.__code__.co_firstlineno + 1 and f["guard"]["step"] >= 0
    t = dynview.load_trace(path)
    assert t.steps[f["guard"]["step"]].line == f["guard"]["line"]  # the step that made it is on that line
    assert "dtype mismatch" in second["failures"][0]["failure"] and second["failures"][0]["guard"]["kind"] == "TENSOR_MATCH"
    text = run("recompiles", path).stdout
    assert "recompile of two" in text and "guard EQUALS_MATCH added at step" in text


@pytest.mark.parametrize("args,code,ok", [
    ([], 0, True),
    (["--max-graph-breaks", "1", "--max-recompiles", "2", "--max-graphs", "6"], 0, True),
    (["--max-graph-breaks", "0"], 1, False),
    (["--max-recompiles", "1"], 1, False),
    (["--max-graphs", "1"], 1, False),
])
def test_check_exit_codes_and_json(run_trace, args, code, ok):
    path, _ = run_trace
    out = run("check", path, *args, "--json")
    assert out.returncode == code, out.stdout + out.stderr
    j = json.loads(out.stdout)
    assert j["ok"] is ok
    assert j["checks"]["graph_breaks"]["value"] == 1 and j["checks"]["recompiles"]["value"] == 2
    assert j["checks"]["graphs"]["value"] == 6  # MLP 1, two 3, brk split in two (graph + resume)
    text = run("check", path, *args)
    assert text.returncode == code and ("check: ok" if ok else "OVER BUDGET") in text.stdout


def test_check_unreadable_and_usage(tmp_path):
    bad = tmp_path / "bad.dyn"
    bad.write_text("not a trace")
    out = run("check", str(bad), "--max-graph-breaks", "0")
    assert out.returncode == 2 and "not a dynview trace" in out.stderr
    assert run("check", str(tmp_path / "missing.dyn")).returncode == 2
    assert run("check", str(bad), "--max-graph-breaks", "x").returncode == 64
    assert run("explain").returncode == 64


def test_stats_and_exports(run_trace, tmp_path):
    path, _ = run_trace
    t = dynview.load_trace(path)
    j = json.loads(run("stats", path, "--json").stdout)
    assert j["steps"] == t.num_steps and j["compiles"] == 6 and j["chunks"] == len(t.chunks)
    assert j["file_bytes"] == os.path.getsize(path) and j["footer"] is True and j["open_ms"] >= 0
    assert abs(j["bytes_per_step"] - os.path.getsize(path) / t.num_steps) < 1e-6
    out = tmp_path / "chrome.json"
    assert run("export", path, "--format", "chrome", "-o", str(out)).returncode == 0
    ev = json.loads(out.read_text())["traceEvents"]
    spans = [e for e in ev if e["ph"] == "X"]
    assert len(spans) == 6 and all({"ph", "ts", "pid", "tid", "name", "dur"} <= e.keys() for e in spans)
    assert [e["name"].split()[-1] for e in spans] == ["[0/0]", "[1/0]", "[1/1]", "[1/2]", "[2/0]", "[3/0]"]
    assert all(e["dur"] >= 0 for e in spans)
    assert any(e["name"] == "cache hit" for e in ev) and any(e["name"].startswith("graph break") for e in ev)
    d = json.loads(run("export", path, "--format", "json", "--steps").stdout)
    assert len(d["steps"]) == t.num_steps and [s["opcode"] for s in d["steps"]] == [s.opcode for s in t.steps]
    assert len(d["events"]) == len(t.events)
    assert run("export", path, "--format", "svg").returncode == 64
