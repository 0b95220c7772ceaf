"""Traces across CPython versions. A trace holds its interpreter's bytecode (opcode numbers and
offsets of 3.11, 3.12 or 3.13, each code object saying its version); every reader reads it with
that version's table whatever it runs on: the dynview executable (no Python; built beside the main
interpreter), the viewer, and dynview.load_trace on any supported interpreter. The truth for a
step's name is the recording interpreter's own `dis.opname`."""
import dis
import glob
import json
import os
import subprocess
import sys

import pytest
import torch

import dynview
import other_pythons
from test_cli_disasm import cli
from test_viewer import script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
THIS = "%d.%d" % sys.version_info[:2]


def sample(x, y):
    w = [x.sin() + k for k in range(2)]  # a comprehension (inlined into the frame on 3.12+)
    z = w[0] + w[1] + y
    if z.sum() > 0:  # data-dependent: a graph break and a resume function
        z = z * 2
    return z.cos()


def record_sample(path):
    dynview.reset()
    with dynview.record(path):
        cf = dynview.compile(sample, backend="eager")
        for _ in range(2):  # compile, then a hit
            cf(torch.ones(3), torch.ones(3))
    dynview.reset()


def dump(path, names=None):
    """What a reader sees in the trace at `path`: names=None takes each step's name from the
    reader (Step.opname); a list (the recording interpreter's dis.opname) gives the truth."""
    t = dynview.load_trace(path)
    return {
        "meta_python": t.meta["python"],
        "opcode_table": t.meta.get("opcode_table"),
        "versions": sorted({t.code_version(c) for c in t.codes}),
        "steps": [[s.code, s.depth, s.offset, s.opcode, names[s.opcode] if names else s.opname, s.arg, s.line,
                   list(s.stack)] for s in t.steps],
        "compiles": [[c.id, c.qualname, c.outcome, c.steps] for c in t.compiles],
        "guards": [g["text"] for g in t.guards],
        "breaks": [b["break_id"] for b in t.breaks],
        "hits": [list(kv) for kv in sorted(t.hits().items())],
        "problems": [list(p) for p in t.problems],
    }


RECORD = """
import json, sys, dis
sys.path.insert(0, sys.argv[2])
import test_trace_versions as T
T.record_sample(sys.argv[1])
truth, reader = T.dump(sys.argv[1], dis.opname), T.dump(sys.argv[1])
assert truth == reader, "this interpreter's reader names the steps unlike its dis"
print(json.dumps(truth))
"""


def interpreter_with_dynview(version):
    """An interpreter of `version` that has torch and its own dynview._C in python/dynview, or the
    reason there is none (`make test` builds _C for the main interpreter first, then the others)."""
    exe = other_pythons.venv_python(version) or other_pythons.find(version)
    if not exe:
        return None, f"CPython {version} not found"
    so = glob.glob(os.path.join(ROOT, "python", "dynview", f"_C.cpython-{version.replace('.', '')}*.so"))
    if not so:
        return None, f"dynview._C is not built for CPython {version} yet"
    r = subprocess.run([exe, "-c", "import torch"], capture_output=True)
    if r.returncode:
        return None, f"{exe} has no torch"
    return exe, ""


def test_this_versions_trace_reads_the_same_in_the_dynview_executable_and_viewer(tmp_path):
    # The executable is built beside the main interpreter (3.11 in CI) and has no Python: on the
    # 3.12 and 3.13 suites this is their traces opened by a 3.11 build.
    path = str(tmp_path / "run.dyn")
    record_sample(path)
    here = dump(path, dis.opname)
    assert here == dump(path)  # the reader's names are this interpreter's
    assert here["versions"] == [THIS] and here["opcode_table"] == f"cpython-{THIS}" and not here["problems"]
    assert len(here["breaks"]) == 1 and here["hits"]
    # `dynview export --steps`: every step's offset and opcode as recorded.
    out = subprocess.run([cli(), "export", path, "--format", "json", "--steps"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"]
    assert [[s["offset"], s["opcode"], s["line"], s["depth"]] for s in steps] == \
        [[s[2], s[3], s[6], s[1]] for s in here["steps"]]
    # `dynview explain --json`: the compiles, breaks and guards.
    out = subprocess.run([cli(), "explain", path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    ex = json.loads(out.stdout)
    assert [c["compile_id"] for c in ex["compiles"]] == [f"[{c[0]}]" for c in here["compiles"]]
    assert [b["break_id"] for c in ex["compiles"] for b in c["breaks"]] == here["breaks"]
    assert [g["text"] for c in ex["compiles"] for g in c["guards"]] == here["guards"]
    assert ex["totals"]["steps"] == len(here["steps"])
    # The viewer: the step's name and the highlighted line of its listing, for every step.
    n = len(here["steps"])
    picks = sorted(set(range(0, n, max(1, n // 40))) | {n - 1})
    states = script(path, [f"goto {i}" for i in picks], tmp_path)
    for i, o in zip(picks, states):
        st = o["state"]["step"]
        want = here["steps"][i]
        assert (st["offset"], st["opname"], st["line"]) == (want[2], want[4], want[6]), (i, st, want)
        assert want[4] in st["instruction"].split(), (i, st["instruction"])


@pytest.mark.parametrize("version", [v for v in ("3.11", "3.12", "3.13") if v != THIS])
def test_another_versions_trace_reads_here_as_its_interpreter_reads_it(tmp_path, version):
    exe, why = interpreter_with_dynview(version)
    if not exe:
        pytest.skip(why)
    path = str(tmp_path / f"run-{version}.dyn")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), HERE]))
    r = subprocess.run([exe, "-c", RECORD, path, HERE], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    there = json.loads(r.stdout.splitlines()[-1])
    assert there["versions"] == [version] and there["meta_python"].startswith(version + ".")
    here = dump(path)
    assert here == there


OLD = os.path.join(HERE, "..", "data", "format-3.1-cpython-3.12.dyn")


def test_format_3_1_trace_recorded_on_3_12_still_reads():
    # Recorded on CPython 3.12 (`sample` above) by dynview before format 4.0, when every version's
    # step offsets were predicted with 3.11's inline-cache counts; the JSON beside it is what the
    # recording interpreter's dis said of each step. It stands for traces already on disk: do not
    # re-record it.
    with open(OLD[:-4] + ".json") as f:
        want = json.load(f)
    t = dynview.load_trace(OLD)
    assert t.version == (3, 1) and t.meta["opcode_table"] == "cpython-3.12"
    assert dump(OLD) == want
    assert [s[4] for s in want["steps"]].count("LOAD_ATTR") >= 2  # 9 caches on 3.12, 4 on 3.11
    out = subprocess.run([cli(), "export", OLD, "--format", "json", "--steps"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [[s["offset"], s["opcode"]] for s in json.loads(out.stdout)["steps"]] == [[s[2], s[3]] for s in want["steps"]]
    out = subprocess.run([cli(), "explain", OLD, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [b["break_id"] for c in json.loads(out.stdout)["compiles"] for b in c["breaks"]] == want["breaks"]


# Traces checked in, one recorded on each of 3.11, 3.12 and 3.13 (tests/data/record_version_fixture.py,
# which says how to regenerate them), read on whatever interpreter runs this suite, so that a machine
# with one CPython still reads the others' traces. The JSON beside each is what the recording
# interpreter said: dis.dis of every code object the trace holds (the function, its transformed code,
# the resume functions and their transformed code), dis's name at each step's offset, and
# dynview.explain's counts.
FIXTURE_VERSIONS = ("3.11", "3.12", "3.13")


def fixture(version):
    path = os.path.join(HERE, "..", "data", f"recorded-cpython-{version}.dyn")
    with open(path[:-4] + ".json") as f:
        return path, json.load(f)


def dis_instructions(text):
    """(opname, arg or None) of each instruction of the first code object in a dis.dis listing, in
    the forms of 3.11 to 3.13 (offsets or labels, `>>` jump targets)."""
    out = []
    for line in text.splitlines():
        if line.startswith("Disassembly of") or line.startswith("ExceptionTable:"):
            break
        words = [w for w in line.split() if w != ">>"]
        name = next((i for i, w in enumerate(words) if w.isupper() and w.replace("_", "").isalnum()
                     and not w.isdigit()), None)
        if name is None:
            continue
        arg = words[name + 1] if name + 1 < len(words) and words[name + 1].isdigit() else None
        out.append((words[name], arg))
    return out


@pytest.mark.parametrize("version", FIXTURE_VERSIONS)
def test_checked_in_trace_lists_its_code_as_the_recording_dis(tmp_path, version):
    path, want = fixture(version)
    t = dynview.load_trace(path)
    assert t.meta["python"] == want["python"] and t.meta["opcode_table"] == f"cpython-{version}"
    assert not t.problems
    assert {c: t.code_version(c) for c in t.codes} == {c: version for c in t.codes}
    # The dynview executable (no Python; built beside the main interpreter): every code object
    # of the trace, original and generated, listed by `dynview disasm` as dis listed it.
    out = subprocess.run([cli(), "export", path, "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    codes = [e for e in json.loads(out.stdout)["events"] if e["t"] == "code"]
    assert sorted(e["qualname"] for e in codes) == sorted(want["listings"])
    assert any(q.startswith("__transformed_code_") for q in want["listings"])
    assert any(q.startswith("__resume_at_") for q in want["listings"])
    for e in codes:
        assert json.loads(e["json"])["version"] == version
        p = tmp_path / "code.json"
        p.write_text(e["json"])
        out = subprocess.run([cli(), "disasm", str(p)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout == want["listings"][e["qualname"]], e["qualname"]


@pytest.mark.parametrize("version", FIXTURE_VERSIONS)
def test_checked_in_trace_steps_and_counts_read_as_recorded(version):
    path, want = fixture(version)
    t = dynview.load_trace(path)
    qual = {c: e["qualname"] for c, e in t.codes.items()}
    # Each step's name by this interpreter's reader (the recording version's table) is the name
    # the recording interpreter's dis gave the instruction at that offset.
    assert [[qual[s.code], s.depth, s.offset, s.opcode, s.opname, s.line] for s in t.steps] == \
        [[q, d, o, n, name, line] for q, d, o, n, name, _, line in want["steps"]]
    assert [[c.id, c.qualname, c.outcome] for c in t.compiles] == want["compiles"]
    assert [b["break_id"] for b in t.breaks] == want["breaks"] == ["DV0002"]
    assert [g["text"] for g in t.guards] == want["guards"]
    out = subprocess.run([cli(), "export", path, "--format", "json", "--steps"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [[s["offset"], s["opcode"], s["line"]] for s in json.loads(out.stdout)["steps"]] == \
        [[s[2], s[3], s[6]] for s in want["steps"]]
    # `dynview explain`: the graphs and the break that dynview.explain counted when it was recorded.
    out = subprocess.run([cli(), "explain", path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    ex = json.loads(out.stdout)
    graphs = [g for c in ex["compiles"] for g in c["graphs"]]
    assert len(graphs) == want["explain"]["graph_count"] == 2
    assert [g["ops"] for g in graphs] == want["explain"]["ops_per_graph"]
    assert [b["break_id"] for c in ex["compiles"] for b in c["breaks"]] == want["breaks"]
    assert len(want["breaks"]) == want["explain"]["graph_break_count"]
    assert [g["text"] for c in ex["compiles"] for g in c["guards"]] == want["guards"]
    assert ex["totals"]["steps"] == len(want["steps"])
    out = subprocess.run([cli(), "check", path, "--max-graph-breaks", "0"], capture_output=True, text=True)
    assert out.returncode == 1 and "DV0002" in out.stdout + out.stderr


@pytest.mark.parametrize("version", FIXTURE_VERSIONS)
def test_checked_in_trace_opens_in_the_viewer(tmp_path, version):
    path, want = fixture(version)
    listed = {q: dis_instructions(text) for q, text in want["listings"].items()}
    t = dynview.load_trace(path)
    qual = {c: e["qualname"] for c, e in t.codes.items()}
    states = script(path, [f"goto {i}" for i in range(len(want["steps"]))], tmp_path)
    for i, o in enumerate(states):
        st, (q, _, offset, _, name, _, line) = o["state"]["step"], want["steps"][i]
        assert (qual[st["code"]], st["offset"], st["opname"], st["line"]) == (q, offset, name, line), i
        # The highlighted line is the instruction dis listed at that place, with its argument.
        words = [w for w in st["instruction"].split() if w != ">>"]
        k = words.index(name)
        arg = words[k + 1] if k + 1 < len(words) and words[k + 1].isdigit() else None
        assert listed[q][st["instruction_index"]] == (name, arg), (i, st["instruction"])
