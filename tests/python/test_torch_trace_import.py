"""`dynview import` of torch.compile's own TORCH_TRACE logs: real torch.compile jobs (breaks,
recompiles on dtype and shape, dynamic shapes, a module with several frames, two processes) run
with TORCH_TRACE set; the import's graphs, breaks, recompiles, break reasons and failing guards are
checked against what torch.compile itself counted in the same run (torch._dynamo counters, its
cache entries, guard_failures) and against torch._dynamo.explain; every compile tlparse lists is in
the import; damaged logs import their intact prefix with exit 2; `dynview diff` between runs of an
edited script (a print added, a dtype change, a break removed) with its exit codes."""
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.main_interpreter_only  # (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def cli():
    for cand in (os.environ.get("DYNVIEW_BIN"), os.path.join(ROOT, "build", "dynview"), shutil.which("dynview")):
        if cand and os.path.exists(cand):
            return cand
    pytest.fail("dynview executable not built (expected build/dynview or DYNVIEW_BIN)")


# Functions with breaks, recompiles on dtype and shape, dynamic shapes and a module whose forward
# breaks twice (three frames); at the end the run writes what torch.compile counted.
CASES = r'''
import json, sys
import torch
from torch._dynamo.utils import counters, guard_failures
from torch._dynamo.eval_frame import _debug_get_cache_entry_list


def brk(x, y):
    a = x.sin() + y
    print("brk")
    return a.cos() * 2


def data_dep(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def rec(x):
    return x.relu() + 1


def dyn(x, n):
    return (x * n).sum(0) + x.shape[0]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x).relu()
        torch._dynamo.graph_break()
        y = y * 2
        print("net")
        return self.b(y)


def run():
    torch.manual_seed(0)
    torch.compile(brk, backend="eager")(torch.randn(3), torch.randn(3))
    torch.compile(data_dep, backend="eager")(torch.ones(3))
    r = torch.compile(rec, backend="eager")
    for x in (torch.randn(4), torch.randn(4, dtype=torch.float64), torch.randn(5), torch.randn(6)):
        r(x)
    torch.compile(dyn, backend="eager", dynamic=True)(torch.randn(3, 2), 2)
    net = Net()
    n = torch.compile(net, backend="eager")
    n(torch.randn(2, 4))
    n(torch.randn(2, 4, dtype=torch.float64).float())
    return {"codes": {f.__name__: f.__code__ for f in (brk, data_dep, rec, dyn)} | {"forward": Net.forward.__code__}}


if __name__ == "__main__":
    codes = run()["codes"]
    out = {
        "graph_break": dict(counters["graph_break"]),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "frames_ok": counters["frames"]["ok"],
        "cache_entries": {k: len(_debug_get_cache_entry_list(c)) for k, c in codes.items()},
        "guard_failures": {c.co_name: list(v) for c, v in guard_failures.items()},
    }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
'''

# The script a CI job would run, in variants: base (one break), print (a print added: a new
# break), dtype (called with float64 too: a new recompile), nobreak (the break removed).
EDITED = r'''
import sys
import torch

variant = sys.argv[1] if __name__ == "__main__" else "base"


def step(x):
    y = x * 2
    if variant != "nobreak":
        torch._dynamo.graph_break()
    y = y + 1
    if variant == "print":
        print("step")
    return y.relu()


if __name__ == "__main__":
    f = torch.compile(step, backend="eager")
    f(torch.randn(8))
    if variant == "dtype":
        f(torch.randn(8, dtype=torch.float64))
'''
PRINT_LINE = EDITED.splitlines().index('        print("step")') + 1


def run_cli(*args, ok=(0,), timeout=120):
    p = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert p.returncode in ok, (args, p.returncode, p.stderr)
    return p


def import_json(src, out, ok=(0,)):
    p = run_cli("import", src, "-o", out, "--json", ok=ok)
    return json.loads(p.stdout) if p.stdout.strip() else None, p


def explain(dyn):
    return json.loads(run_cli("explain", dyn, "--json").stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every torch.compile job of this module, run at once (separate processes, TORCH_TRACE set)."""
    d = tmp_path_factory.mktemp("torch_trace")
    (d / "cases.py").write_text(CASES)
    (d / "edited.py").write_text(EDITED)
    jobs = {"cases": ([str(d / "cases.py"), str(d / "counts.json")], d / "tt_cases")}
    for v in ("base", "print", "dtype", "nobreak"):
        jobs[v] = ([str(d / "edited.py"), v], d / f"tt_{v}")
    jobs["two"] = ([str(d / "edited.py"), "dtype"], d / "tt_two")  # two processes, one directory
    procs = []
    env0 = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "DYNVIEW_TRACE")}
    for name, (argv, tt) in jobs.items():
        for _ in range(2 if name == "two" else 1):
            env = dict(env0, TORCH_TRACE=str(tt))
            procs.append((name, subprocess.Popen([sys.executable, *argv], env=env, cwd=str(d), stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.PIPE, text=True)))
    for name, p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, (name, err[-3000:])
    out = {"dir": d, "counts": json.loads((d / "counts.json").read_text())}
    for name, (_, tt) in jobs.items():
        out[name] = str(tt)
    return out


def compiles_named(e, name):
    return [c for c in e["compiles"] if c["qualname"] == name]


def test_counts_equal_torch_compile_counters(runs, tmp_path):
    summary, _ = import_json(runs["cases"], tmp_path / "cases.dyn")
    counts = runs["counts"]
    e = explain(tmp_path / "cases.dyn")
    assert summary["problems"] == [] and summary["processes"] == 1
    # graphs: one per successful frame compile, as torch counted them
    assert e["totals"]["graphs"] == counts["unique_graphs"] == summary["graphs"]
    # breaks: the same reasons, each as often as torch.compile's counter says
    reasons = {}
    for c in e["compiles"]:
        for b in c["breaks"]:
            reasons[b["reason"]] = reasons.get(b["reason"], 0) + 1
            assert b["break_id"].startswith("GB") and b["line"] > 0 and b["user_stack"]
    # torch 2.13's counter leaves out data-dependent branching (GB0170), which explain counts
    # (test_explain_matches_torch_dynamo_explain checks that one against explain)
    counted = {k.strip(): v for k, v in counts["graph_break"].items()}
    assert {k: v for k, v in reasons.items() if k in counted} == counted
    uncounted = [c["breaks"] for c in e["compiles"] if any(b["reason"] not in counted for b in c["breaks"])]
    assert [[b["break_id"] for b in bs] for bs in uncounted] == [["GB0170"]]
    assert e["totals"]["graph_breaks"] == sum(counts["graph_break"].values()) + 1
    # recompiles: each code object's cache entries beyond the first
    for name, entries in counts["cache_entries"].items():
        comps = compiles_named(e, name)
        assert len([c for c in comps if c["compile_id"].endswith("/0]")]) == 1, name
        assert sum(c["reason"] != "first call" for c in comps) == entries - 1, name
    # compile ids as torch prints them; code objects with their file and first line
    rec = compiles_named(e, "rec")
    assert [c["compile_id"].split("/")[1] for c in rec] == ["0]", "1]", "2]"]
    first = CASES.splitlines().index("def rec(x):") + 1
    assert all(c["filename"].endswith("cases.py") and c["firstlineno"] == first for c in rec)
    assert all(c["outcome"] == "graph" and c["seconds"] > 0 for c in e["compiles"])


def test_failing_guards_equal_guard_failures(runs, tmp_path):
    import_json(runs["cases"], tmp_path / "cases.dyn")
    rc = json.loads(run_cli("recompiles", tmp_path / "cases.dyn", "--json").stdout)
    got = {}
    for r in rc["recompiles"]:
        assert r["kind"] == "recompile" and r["compile_id"]
        for f in r["failures"]:
            got.setdefault(r["qualname"], []).append(f["failure"])
            # the failing guard is found in the entry that failed, with the user line that made it
            if "tensor '" in f["failure"]:
                g = f["guard"]
                assert g and g["kind"] == "TENSOR_MATCH" and g["line"] > 0, f
                expected_dtype = f["failure"].split("expected ")[1].split(",")[0].lower()
                if "dtype" in f["failure"]:
                    assert {"float": "torch.float32", "double": "torch.float64"}[expected_dtype] in g["text"]
    assert got == runs["counts"]["guard_failures"]
    text = run_cli("recompiles", tmp_path / "cases.dyn").stdout
    assert "dtype mismatch" in text and "guard TENSOR_MATCH" in text


def test_graphs_guards_and_dynamic_shapes(runs, tmp_path):
    import_json(runs["cases"], tmp_path / "cases.dyn")
    e = explain(tmp_path / "cases.dyn")
    brk = compiles_named(e, "brk")[0]
    assert brk["graphs"][0]["op_counts"] == {"sin": 1, "operator.add": 1} and brk["graphs"][0]["ops"] == 2
    assert "def forward" in brk["graphs"][0]["code"]
    kinds = {g["kind"] for g in brk["guards"]}
    assert "TENSOR_MATCH" in kinds and all(g["text"] for g in brk["guards"])
    # dynamic=True: the size is a symbol in the graph and the guards (shape env)
    dyn = compiles_named(e, "dyn")[0]
    assert any(g["kind"] == "SHAPE_ENV" for g in dyn["guards"]) or any("size()" in g["text"] for g in dyn["guards"])
    dump = json.loads(run_cli("export", tmp_path / "cases.dyn", "--format", "json").stdout)
    syms = [ev for ev in dump["events"] if ev["t"] == "symbol"]
    assert any(s["source"].startswith("L['x'].size()") for s in syms)
    dyn_c = next(c["index"] for c in dump["compiles"] if c["qualname"] == "dyn")
    assert any(s["c"] == dyn_c for s in syms)
    # the resume functions after breaks are compiles of their own (the module's forward: 3 frames)
    names = [c["qualname"] for c in e["compiles"]]
    assert sum(n.startswith("torch_dynamo_resume_in_forward") for n in names) == 2
    imp = next(ev for ev in dump["events"] if ev["t"] == "import")
    assert imp["kinds"]["dynamo_start"] == len(e["compiles"]) and imp["records"] > 0


def test_every_tlparse_compile_is_imported(runs, tmp_path):
    exe = shutil.which("tlparse")
    assert exe, "tlparse is needed (make deps installs it with pip)"
    for name in ("cases", "base", "dtype"):
        log = next(os.path.join(runs[name], f) for f in os.listdir(runs[name]))
        out = tmp_path / f"tl_{name}"
        subprocess.run([exe, log, "-o", str(out), "--overwrite", "--no-browser"], capture_output=True, timeout=120, check=True)
        listed = json.loads((out / "compile_directory.json").read_text())
        import_json(log, tmp_path / f"{name}.dyn")
        dump = json.loads(run_cli("export", tmp_path / f"{name}.dyn", "--format", "json").stdout)
        starts = {ev["id"]: ev for ev in dump["events"] if ev["t"] == "compile_start"}
        ids = [k for k in listed if k != "[-/-]"]
        assert ids
        for k in ids:  # "[0/1]", "[1/0_1]" (attempt 1 of [1/0])
            cid, _, attempt = k.strip("[]").partition("_")
            assert cid in starts, (name, k)
            assert int(attempt or 0) < starts[cid]["attempts"], (name, k)


def test_two_processes_become_two_processes(runs, tmp_path):
    summary, _ = import_json(runs["two"], tmp_path / "two.dyn")
    assert summary["processes"] == 2 and len(summary["logs"]) == 2
    one, _ = import_json(summary["logs"][0], tmp_path / "one.dyn")
    # the dtype change recompiles the function and the resume function after its break
    assert summary["compiles"] == 2 * one["compiles"] and summary["recompiles"] == 2 * one["recompiles"] == 4
    dump = json.loads(run_cli("export", tmp_path / "two.dyn", "--format", "json").stdout)
    procs = dump["meta"]["processes"]
    assert len(procs) == 2 and procs[0]["pid"] != procs[1]["pid"]
    assert sorted({ev["process"] for ev in dump["events"] if ev["t"] == "compile_start"}) == [0, 1]
    # a recompile names the compile it caused in its own process
    rc = json.loads(run_cli("recompiles", tmp_path / "two.dyn", "--json").stdout)
    assert [r["compile_id"] for r in rc["recompiles"]] == ["[0/1]", "[1/1]"] * 2
    assert json.loads(run_cli("check", tmp_path / "two.dyn", "--json").stdout)["checks"]["recompiles"]["value"] == 4


def test_explain_matches_torch_dynamo_explain(runs, tmp_path):
    """torch._dynamo.explain on the same functions, in this process (no TORCH_TRACE here)."""
    import torch
    spec = importlib.util.spec_from_file_location("tt_cases", runs["dir"] / "cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import_json(runs["cases"], tmp_path / "cases.dyn")
    e = explain(tmp_path / "cases.dyn")
    for fn, args in ((mod.brk, (torch.randn(3), torch.randn(3))), (mod.data_dep, (torch.ones(3),))):
        torch._dynamo.reset()
        x = torch._dynamo.explain(fn)(*args)
        comps = [c for c in e["compiles"] if c["qualname"] == fn.__name__ or f"resume_in_{fn.__name__}_" in c["qualname"]]
        assert sum(len(c["graphs"]) for c in comps) == x.graph_count
        breaks = [b for c in comps for b in c["breaks"]]
        assert len(breaks) == x.graph_break_count
        # explain words a data-dependent branch as "generic_jump ..." where the log has GB0170's text
        for b, r in zip(breaks, x.break_reasons):
            assert b["reason"] == r.reason.strip() or (r.reason.startswith("generic_jump") and b["break_id"] == "GB0170"), r.reason
        assert [b["line"] for b in breaks] == [r.user_stack[-1].lineno for r in x.break_reasons]
    torch._dynamo.reset()


def script_out(src, lines, tmp_path):
    script = tmp_path / "s2.txt"
    script.write_text("\n".join(lines) + "\n")
    from conftest import run_with_display  # here: the module is also imported by a subprocess without it

    p = run_with_display([shutil.which("xvfb-run"), "-a", "-s", "-screen 0 1600x1000x24", cli(), src, "--script", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def test_viewer_and_reports_open_the_log_directly(runs, tmp_path):
    # `dynview DIR` imports and opens; headless the script prints the model's state
    script = tmp_path / "s.txt"
    script.write_text("click compile 0\nclick recompile 0\n")
    exe = shutil.which("xvfb-run")
    assert exe, "xvfb-run is needed (make deps installs xvfb)"
    from conftest import run_with_display

    p = run_with_display([exe, "-a", "-s", "-screen 0 1600x1000x24", cli(), runs["dtype"], "--script", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(out) == 2
    st = out[0]["state"]
    assert st["compile"] == 0 and st["total_steps"] == 0
    # the step panes say in words why they are empty
    assert "TORCH_TRACE" in st["no_step_data"] and "no steps" in st["no_step_data"]
    st = out[1]["state"]
    assert st["selected_recompile"] == 0 and st["compile"] == 0 and st["selected_guard"] >= 0
    # the failing guard is the TENSOR_MATCH of the entry that failed (the guards table of compile 0)
    e = explain(import_json(runs["dtype"], tmp_path / "d.dyn")[0]["output"])
    guards0 = e["compiles"][0]["guards"]
    assert st["selected_guard"] < len(guards0) and guards0[st["selected_guard"]]["kind"] == "TENSOR_MATCH"
    assert "torch.float32" in guards0[st["selected_guard"]]["text"]
    # the FX graph of a compile opens (its nodes laid out), and the resume function shows the
    # log's bytecode in words
    st = script_out(runs["dtype"], ["click compile 1", "fxtab code"], tmp_path)
    assert st[0]["state"]["graph_shown"] >= 0 and st[0]["state"]["graph_layout_nodes"] >= 3
    assert "def forward" in st[1]["state"]["fx_code"]
    assert "imported" in p.stderr


# ---- damaged input -------------------------------------------------------------------------------

def the_log(path):
    return next(os.path.join(path, f) for f in sorted(os.listdir(path)))


def test_bad_input_exit_2_with_a_clear_message(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    p = run_cli("import", empty, "-o", tmp_path / "e.dyn", ok=(2,))
    assert "empty log" in p.stderr
    rnd = tmp_path / "random.log"
    rnd.write_bytes(random.Random(7).randbytes(5000))
    p = run_cli("import", rnd, "-o", tmp_path / "r.dyn", ok=(2,))
    assert "not a TORCH_TRACE log" in p.stderr and "line 1" in p.stderr
    text = tmp_path / "text.log"
    text.write_text("[rank0]: I1123 graph break in f\nV1123 some text without json\n")
    p = run_cli("import", text, "-o", tmp_path / "t.dyn", ok=(2,))
    assert "not a TORCH_TRACE log" in p.stderr
    p = run_cli("import", tmp_path / "missing", "-o", tmp_path / "m.dyn", ok=(2,))
    assert "no such file" in p.stderr
    p = run_cli("import", tmp_path, ok=(64,))
    p = run_cli("diff", tmp_path / "missing.dyn", tmp_path / "missing.dyn", ok=(2,))


def test_truncated_logs_keep_the_intact_records(runs, tmp_path):
    log = the_log(runs["cases"])
    data = open(log, "rb").read()
    full, _ = import_json(log, tmp_path / "full.dyn")
    full_ids = [c["compile_id"] for c in explain(tmp_path / "full.dyn")["compiles"]]
    seen = []
    for frac in (0.15, 0.4, 0.55, 0.8, 0.97):
        cut = int(len(data) * frac)
        part = tmp_path / f"cut{frac}.log"
        part.write_bytes(data[:cut])
        summary, p = import_json(part, tmp_path / f"cut{frac}.dyn", ok=(0, 2))
        # a cut inside a line (or a payload) is reported with where the import stopped
        if data[cut - 1:cut] != b"\n":
            assert p.returncode == 2 and "line " in p.stderr and "byte " in p.stderr, p.stderr
        e = explain(tmp_path / f"cut{frac}.dyn")
        ids = [c["compile_id"] for c in e["compiles"]]
        assert ids == full_ids[: len(ids)]  # a prefix of the whole run, in order
        done = [c for c in e["compiles"] if c["outcome"] != "incomplete"]
        assert len(done) <= full["compiles"]
        seen.append(len(ids))
    assert seen == sorted(seen) and seen[-1] > seen[0]
    # a cut at a line boundary inside the last payload: caught by the payload's md5
    lines = data.split(b"\n")
    k = max(i for i, l in enumerate(lines[:-3]) if l.startswith(b"\t") and lines[i + 1].startswith(b"\t"))
    part = tmp_path / "cut_payload.log"
    part.write_bytes(b"\n".join(lines[: k + 1]) + b"\n")
    _, p = import_json(part, tmp_path / "cut_payload.dyn", ok=(2,))
    assert "payload is truncated" in p.stderr


def test_unknown_records_are_kept_and_counted(runs, tmp_path):
    log = the_log(runs["base"])
    data = open(log).read()
    extra = 'V1123 10:00:00.000000 1 x.py:1] {"some_future_kind": {"a": 1}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}\n'
    part = tmp_path / "unknown.log"
    part.write_text(extra + data + extra)
    summary, _ = import_json(part, tmp_path / "u.dyn")
    assert summary["unknown"] == {"some_future_kind": 2} and summary["kinds"]["some_future_kind"] == 2
    dump = json.loads(run_cli("export", tmp_path / "u.dyn", "--format", "json").stdout)
    kept = [ev for ev in dump["events"] if ev["t"] == "tt_record"]
    assert len(kept) == 2 and kept[0]["record"]["some_future_kind"] == {"a": 1}


# ---- diff ------------------------------------------------------------------------------------------

def diff(a, b, *extra, ok=(0,)):
    p = run_cli("diff", a, b, "--json", *extra, ok=ok)
    return json.loads(p.stdout), p.returncode


def test_diff_added_print_is_a_new_break(runs, tmp_path):
    for v in ("base", "print", "dtype", "nobreak"):
        import_json(runs[v], tmp_path / f"{v}.dyn")
    j, rc = diff(tmp_path / "base.dyn", tmp_path / "print.dyn", "--fail-on", "new-breaks", ok=(1,))
    assert rc == 1 and j["failed"] == ["new-breaks"] and not j["ok"]
    assert j["totals"]["new_breaks"] == 1 and j["totals"]["graph_breaks"] == {"before": 1, "after": 2, "delta": 1}
    new = [b for c in j["code_objects"] for b in c["breaks"]["new"]]
    assert len(new) == 1 and "print" in new[0]["reason"] and new[0]["line"] == PRINT_LINE
    assert j["totals"]["graphs"]["after"] > j["totals"]["graphs"]["before"]
    # not asked to fail on breaks: exit 0, same report
    j2, rc = diff(tmp_path / "base.dyn", tmp_path / "print.dyn", "--fail-on", "new-recompiles")
    assert rc == 0 and j2["ok"] and j2["totals"] == j["totals"]
    _, rc = diff(tmp_path / "base.dyn", tmp_path / "print.dyn", "--fail-on", "more-graphs", ok=(1,))
    text = run_cli("diff", tmp_path / "base.dyn", tmp_path / "print.dyn", "--fail-on", "new-breaks", ok=(1,)).stdout
    assert f"+ break at line {PRINT_LINE}" in text and "diff: FAILED (new-breaks)" in text


def test_diff_dtype_change_is_a_new_recompile(runs, tmp_path):
    for v in ("base", "dtype"):
        import_json(runs[v], tmp_path / f"{v}.dyn")
    j, rc = diff(tmp_path / "base.dyn", tmp_path / "dtype.dyn", "--fail-on", "new-breaks,new-recompiles,more-graphs", ok=(1,))
    assert set(j["failed"]) == {"new-recompiles", "more-graphs"} and j["totals"]["new_breaks"] == 0
    step = next(c for c in j["code_objects"] if c["qualname"] == "step")
    assert step["recompiles"]["before"] == 0 and step["recompiles"]["after"] == 1
    assert "dtype mismatch" in step["recompiles"]["new_reasons"][0]
    assert any("torch.float64" in g for g in step["guards"]["added"])
    # the reverse is an improvement: nothing to fail on
    j, rc = diff(tmp_path / "dtype.dyn", tmp_path / "base.dyn", "--fail-on", "new-breaks,new-recompiles,more-graphs")
    assert rc == 0 and j["ok"] and j["totals"]["recompiles"]["delta"] == -2  # the function and its resume function


def test_diff_removed_break(runs, tmp_path):
    for v in ("base", "nobreak"):
        import_json(runs[v], tmp_path / f"{v}.dyn")
    j, rc = diff(tmp_path / "base.dyn", tmp_path / "nobreak.dyn", "--fail-on", "new-breaks,new-recompiles,more-graphs")
    assert rc == 0 and j["totals"]["gone_breaks"] == 1 and j["totals"]["new_breaks"] == 0
    assert j["totals"]["graphs"] == {"before": 2, "after": 1, "delta": -1}
    gone = [c for c in j["code_objects"] if c["status"] == "gone"]
    assert gone and gone[0]["qualname"].startswith("torch_dynamo_resume_in_step")
    # schema: every documented key is there
    assert set(j) == {"before", "after", "code_objects", "totals", "fail_on", "failed", "ok", "problems"}
    for c in j["code_objects"]:
        assert set(c) == {"filename", "qualname", "firstlineno", "status", "changed", "compiles", "graphs", "breaks",
                          "recompiles", "guards", "ops", "compile_seconds"}
    # usage errors
    run_cli("diff", tmp_path / "base.dyn", ok=(64,))
    run_cli("diff", tmp_path / "base.dyn", tmp_path / "nobreak.dyn", "--fail-on", "bogus", ok=(64,))


def test_diff_between_engines_and_between_recorded_traces(runs, tmp_path):
    """dynview's own capture of the same function (recorded) against torch.compile's (imported)."""
    import torch
    import dynview
    spec = importlib.util.spec_from_file_location("tt_edited", runs["dir"] / "edited.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rec = tmp_path / "recorded.dyn"
    dynview.reset()
    with dynview.record(str(rec)):
        dynview.compile(mod.step, backend="eager")(torch.randn(8))
    dynview.reset()
    import_json(runs["base"], tmp_path / "base.dyn")
    j, rc = diff(tmp_path / "base.dyn", rec)
    assert rc == 0 and j["before"]["source"] == "TORCH_TRACE" and j["after"]["source"] == "dynview"
    step = [c for c in j["code_objects"] if c["qualname"] == "step"]
    assert len(step) == 1 and step[0]["status"] == "both" and step[0]["compiles"]["after"] >= 1
    j, rc = diff(rec, tmp_path / "base.dyn", "--fail-on", "new-breaks,new-recompiles,more-graphs", ok=(0, 1))
    assert j["before"]["source"] == "dynview" and j["after"]["source"] == "TORCH_TRACE"
    # two recorded traces: the same run, nothing changed
    j, rc = diff(rec, rec, "--fail-on", "new-breaks,new-recompiles,more-graphs")
    assert rc == 0 and not any(c["changed"] for c in j["code_objects"]) and j["totals"]["new_breaks"] == 0


def test_imported_break_ids_show_as_themselves(runs, tmp_path):
    # TorchDynamo's GBnnnn ids are not in dynview's graph-break table: the reports and the viewer show
    # them as they are, with no title (docs/graph-breaks.md).
    import_json(runs["cases"], tmp_path / "cases.dyn")
    breaks = [b for c in explain(tmp_path / "cases.dyn")["compiles"] for b in c["breaks"]]
    assert breaks and all(b["break_id"].startswith("GB") and b["title"] == "" for b in breaks)
    text = run_cli("explain", tmp_path / "cases.dyn").stdout
    assert f"graph break {breaks[0]['break_id']}: " in text and "graph breaks by id:" in text
    first = next(i for i, c in enumerate(explain(tmp_path / "cases.dyn")["compiles"]) if c["breaks"])
    st = script_out(str(tmp_path / "cases.dyn"), [f"click compile {first}"], tmp_path)[0]["state"]
    assert st["why"][0].startswith(f"graph break {breaks[0]['break_id']} at line ")
