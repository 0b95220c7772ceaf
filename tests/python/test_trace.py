"""The .dyn recorder end to end: a recorded trace holds exactly what the engine did.

Round trip over the engine corpus (engine_cases.py): compiles, graphs, guard texts of the cache
entries, breaks, hit counts and one step per instruction (counted independently with sys.settrace)
all match what the engine reports by other means. Also: DYNVIEW_TRACE, DYNVIEW_LOGS agreeing with
the trace, load_trace on bad input.
"""
import dis
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import dynview
from engine_cases import CASES

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESUME = dis.opmap["RESUME"]
# The frame prologue: settrace reports a 'call' event instead of these (they run before RESUME).
PROLOGUE = {RESUME, dis.opmap["MAKE_CELL"], dis.opmap["COPY_FREE_VARS"]}


def code_of(fn):
    return (fn.forward.__func__ if isinstance(fn, torch.nn.Module) else fn).__code__


pytestmark = pytest.mark.usefixtures("fresh_engine")


@pytest.fixture(scope="module")
def corpus_trace(tmp_path_factory):
    """Records the whole corpus once: each case compiled and called three times (a recompile-free
    case hits twice). Returns the trace and what the engine said by other means."""
    path = str(tmp_path_factory.mktemp("trace") / "corpus.dyn")
    dynview.reset()
    dynview._C.take_records()
    facts = []
    with dynview.record(path) as rec:
        for name, fn, make, _ in CASES:
            args = make(0)
            cf = dynview.compile(fn, backend="eager")
            for _ in range(3):
                try:
                    cf(*args)
                except Exception:
                    pass
            records = dynview._C.take_records()
            facts.append((name, fn, make, records, dynview._C.cache_entries(code_of(fn))))
            dynview.reset()  # cases sharing a code object (module classes) start from an empty cache
    dynview.reset()
    return dynview.load_trace(path), facts, rec.stats


def test_trace_holds_what_the_engine_did(corpus_trace, report):
    t, facts, stats = corpus_trace
    assert t.problems == [] and t.version[0] == 4
    assert stats["step_gaps"] == 0 and stats["error"] == ""
    assert len(t.compiles) == sum(len(f[3]) for f in facts) == stats["compiles"]
    assert t.num_steps == stats["steps"] == len(t.steps)
    ci = 0
    hits = t.hits()
    for name, fn, make, records, entries in facts:
        for rec in records:
            c = t.compiles[ci]
            ci += 1
            assert c.id == rec["compile_id"].strip("[]") and c.qualname == rec["qualname"], name
            assert c.reason == rec["reason"]
            # guards: same texts, in the order the engine made them
            assert [g["text"] for g in c.guards] == rec["guards"], name
            # graphs and their op counts (what explain() reports)
            assert len(c.graphs) == (1 if rec["graph"] is not None else 0), name
            if rec["graph"] is not None:
                g = c.graphs[0]
                assert g["code"] == rec["graph"].code
                calls = [n for n in g["nodes"] if n["op"].startswith("call")]
                assert len(calls) == len(rec["ops"]) == g["ops"], name
                assert [n["name"] for n in g["nodes"]] == [n.name for n in rec["graph"].graph.nodes]
                for n in calls:  # every node names the step that created it, inside this compile
                    assert c.first_step <= n["step"] < c.first_step + c.steps
            # breaks with id, reason and line
            if rec["has_break"]:
                (b,) = c.breaks
                assert (b["break_id"], b["message"], b["line"]) == (rec["break_id"], rec["break_message"], rec["break_line"])
                assert c.first_step <= b["step"] < c.first_step + c.steps
                assert t.steps[b["step"]].compile == c.index
            else:
                assert c.breaks == []
        # cache entries: guard texts and hit counts as the engine's cache holds them
        for e in entries:
            comp = next(c for c in t.compiles if c.qualname == records[0]["qualname"] and [g["text"] for g in c.guards] == e["guards"]
                        and c.first_step >= t.compiles[ci - len(records)].first_step)
            assert hits.get(comp.index, 0) == e["hits"], name
    assert ci == len(t.compiles)
    # Steps: each compile's steps are contiguous, counted in compile_end, in the compile's order.
    per_compile = {}
    for s in t.steps:
        per_compile[s.compile] = per_compile.get(s.compile, 0) + 1
    for c in t.compiles:
        assert per_compile.get(c.index, 0) == c.steps
        if c.steps:
            first = t.steps[c.first_step]
            assert first.compile == c.index and first.depth == 0 and first.frame_start and first.code == c.code
    report(f"trace round trip: {len(t.compiles)} compiles, {t.num_steps} steps, {len(t.chunks)} chunks, "
           f"{os.path.getsize(t.path) / max(1, t.num_steps):.2f} bytes/step")


def _settrace_count(fn, args, names):
    """Instructions CPython executes in frames of the code objects `names` (filename, firstlineno,
    qualname), from sys.settrace opcode events, without the RESUME of each frame entry (which
    settrace reports as a 'call' event instead)."""
    n = [0]

    def tracer(frame, event, arg):
        co = frame.f_code
        if (co.co_filename, co.co_firstlineno, co.co_qualname) in names:
            frame.f_trace_opcodes = True
            if event == "opcode" and co.co_code[frame.f_lasti] != RESUME:
                n[0] += 1
            return tracer
        return None

    # CPython 3.12.1 turns on opcode events only if some frame asked for them before settrace
    # (the suite passed on 3.12 only when test_engine_behaviour, which does this, ran first in the process).
    me = sys._getframe()
    me.f_trace_opcodes = True
    sys.settrace(tracer)
    me.f_trace_opcodes = False
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return n[0]


def test_one_step_per_instruction_executed(corpus_trace, report):
    """For every non-breaking case with a graph: the trace's steps (minus RESUMEs) equal the
    instructions CPython executes in the same code objects when the function runs eagerly."""
    t, facts, _ = corpus_trace
    by_name = {}
    ci = 0
    for name, fn, make, records, entries in facts:
        by_name[name] = (fn, make, t.compiles[ci] if records else None, records)
        ci += len(records)
    checked = 0
    for name, (fn, make, comp, records) in by_name.items():
        if comp is None or records[0]["has_break"] or comp.steps == 0:
            continue
        steps = t.steps[comp.first_step:comp.first_step + comp.steps]
        names = {(t.codes[s.code]["filename"], t.codes[s.code]["firstlineno"], t.codes[s.code]["qualname"]) for s in steps}
        if any(json.loads(t.codes[s.code]["json"])["flags"] & 0x20 for s in steps):  # generators: run lazily by CPython
            continue
        ours = sum(1 for s in steps if s.opcode not in PROLOGUE)
        assert ours == _settrace_count(fn, make(0), names), name
        checked += 1
    assert checked >= 100
    report(f"trace steps == CPython's executed instructions for {checked} corpus cases")


def test_stack_and_values_after_steps(corpus_trace):
    t, facts, _ = corpus_trace
    c = next(c for c in t.compiles if c.qualname == "add_mul")
    fn = next(f[1] for f in facts if f[0] == "add_mul")
    steps = t.steps[c.first_step:c.first_step + c.steps]
    # x + y * 2 is straight-line code: one step per instruction, as this CPython's dis lists them
    # (3.11/3.12: LOAD_FAST x, LOAD_FAST y; 3.13: LOAD_FAST_LOAD_FAST (x, y)), then LOAD_CONST 2,
    # BINARY_OP *, BINARY_OP +, RETURN_VALUE.
    ops = [s.opname for s in steps]
    assert ops == [i.opname for i in dis.get_instructions(fn)]
    assert ops[-4:] == ["LOAD_CONST", "BINARY_OP", "BINARY_OP", "RETURN_VALUE"]
    v = lambda i: t.values[(c.index, i)]
    k = len(steps) - 4  # the LOAD_CONST
    x, y = steps[k - 1].stack[0], steps[k - 1].stack[1]
    assert v(x)["source"] == "L['x']" and v(x)["kind"] == "tensor" and v(x)["meta"] == "f32[4, 5] cpu"
    assert v(y)["source"] == "L['y']"
    assert len(steps[k].stack) == 3 and v(steps[k].stack[2])["repr"] == "2"
    mul = steps[k + 1].stack[1]
    assert len(steps[k + 1].stack) == 2 and v(mul)["kind"] == "tensor" and v(mul)["node"] >= 0 and v(mul)["step"] == steps[k + 1].index
    assert len(steps[k + 2].stack) == 1
    # arguments appear as locals changed by the first step, as values of kind "argument" not read
    # yet (nothing wrapped or guarded); the step that reads one makes the local the value it reads
    first = dict(steps[0].locals_changed)
    assert sorted(first) == [0, 1] and first[0] not in (x, y) and first[1] not in (x, y)
    assert [v(first[i])["kind"] for i in (0, 1)] == ["argument", "argument"]
    assert v(first[0])["source"] == "L['x']" and v(first[0])["meta"] == "f32[4, 5] cpu" and v(first[1])["source"] == "L['y']"
    assert list(t.state(steps[k - 1].index)[-1][2])[:2] == [x, y]
    read = next(s for s in steps if s.opname.startswith("LOAD_FAST"))
    assert dict(read.locals_changed)[0] == x and read.stack[0] == x
    # random access: the reader's own replay from the chunk's keyframe agrees
    for s in steps:
        frames = t.state(s.index)
        assert list(frames[-1][1]) == list(s.stack)


def test_inlined_calls_are_nested_frames(corpus_trace):
    t, facts, _ = corpus_trace
    deep = [c for c in t.compiles if any(s.depth >= 2 for s in t.steps[c.first_step:c.first_step + c.steps])]
    assert deep
    for c in deep:
        steps = t.steps[c.first_step:c.first_step + c.steps]
        for a, b in zip(steps, steps[1:]):
            if b.depth > a.depth:  # entering a call: one level, a frame start, after a CALL-like step
                assert b.depth == a.depth + 1 and b.frame_start
            if b.frame_start and b.depth > 0:
                assert t.codes[b.code]["qualname"]
        frames = t.state(steps[-1].index)
        assert len(frames) == steps[-1].depth + 1


def scaled_rows(x):
    def rows(t):
        for i in range(t.shape[0]):
            yield t[i] * (i + 1)
    out = []
    for r in rows(x):
        out.append(r + 1)  # the caller's steps between two resumes of the generator
    return torch.stack(out)


def test_a_generator_resumed_after_its_caller_ran_is_a_frame_again(tmp_path):
    """Each resume of a generator made in the trace enters its frame again: the step after it is a
    frame start of the generator's code, with its locals, so the trace decodes and its replay state
    shows the generator's frame (it once read back as "step at depth 1 without a frame")."""
    path = str(tmp_path / "gen.dyn")
    x = torch.randn(3, 2)
    with dynview.record(path):
        torch.testing.assert_close(dynview.compile(scaled_rows, backend="eager")(x), scaled_rows(x))
    t = dynview.load_trace(path)
    steps = t.steps
    gen_code = {s.code for s in steps if s.depth == 1 and t.codes[s.code]["qualname"].endswith("rows")}
    assert len(gen_code) == 1
    entries = [s for s in steps if s.depth == 1 and s.frame_start]
    assert len(entries) == x.shape[0] + 1  # started, then resumed once per item taken after the first
    for s in entries[1:]:
        assert s.code in gen_code
        frames = t.state(s.index)
        assert len(frames) == 2 and frames[1][0] == s.code
        assert any(frames[1][2]), "the resumed frame's locals are reported again"


def test_recompile_records_failing_guard(tmp_path):
    def f(x, n):
        return x * n

    path = str(tmp_path / "r.dyn")
    with dynview.record(path):
        cf = dynview.compile(f, backend="eager")
        cf(torch.ones(3), 2)
        cf(torch.ones(3), 2)
        cf(torch.ones(3, dtype=torch.float64), 2)
        cf(torch.ones(3, dtype=torch.float64), 3)
    t = dynview.load_trace(path)
    assert [c.id for c in t.compiles] == ["0/0", "0/1", "0/2"]
    recs = [e for e in t.runtime if e["kind"] == "recompile"]
    assert len(recs) == 2
    assert "dtype mismatch" in recs[0]["failures"][0]
    g = t.compiles[0].guards[recs[0]["guards"][0]]
    assert g["kind"] == "TENSOR_MATCH" and "L['x']" in g["text"]
    g2 = t.compiles[1].guards[recs[1]["guards"][0]]
    assert g2["text"] == "L['n'] == 2" and g2["line"] == f.__code__.co_firstlineno + 1 or g2["kind"] == "EQUALS_MATCH"
    assert t.hits() == {0: 1}
    assert t.compiles[1].reason.startswith("Recompiling function f")


def test_dynview_trace_env_and_logs_agree(tmp_path):
    """DYNVIEW_TRACE records a whole process; DYNVIEW_LOGS prints the same events with the same
    compile ids."""
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch, dynview\n"
        "def f(x, k):\n"
        "    y = x.sin() * k\n"
        "    if y.sum() > 0:\n"
        "        y = y + 1\n"
        "    return y\n"
        "def g(x):\n"
        "    return x.cos() + 1\n"
        "cg = dynview.compile(g, backend='eager')\n"
        "cg(torch.ones(3)); cg(torch.ones(3)); cg(torch.ones(3, dtype=torch.float64))\n"
        "dynview.compile(f, backend='eager')(torch.ones(3), 2)\n")
    path = tmp_path / "env.dyn"
    env = dict(os.environ, DYNVIEW_TRACE=str(path), DYNVIEW_LOGS="graph_breaks,recompiles,guards,graph_code",
               PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    t = dynview.load_trace(path)
    assert t.problems == [] and t.chunks and t.meta["argv"][0] == str(script)
    logs = out.stderr
    # guards: "[f/r] KIND: text" for every guard of every compile
    for c in t.compiles:
        for g in c.guards:
            assert f"[{c.id}] {g['kind']}: {g['text']}" in logs
        for gr in c.graphs:
            assert f"TRACED GRAPH [{c.id}]" in logs
        for b in c.breaks:
            assert f"Graph break {b['break_id']} in [{c.id}] at {b['filename']}:{b['line']}" in logs
    assert logs.count("TRACED GRAPH") == len(t.graphs) and logs.count("Graph break") == len(t.breaks) == 1
    assert logs.count("Recompiling function") == sum(c.reason.startswith("Recompiling") for c in t.compiles) == 1
    # f is split at its branch: [1/0] up to the branch, [2/0] the resume function of the branch taken
    assert [c.id for c in t.compiles] == ["0/0", "0/1", "1/0", "2/0"]
    assert t.compiles[3].reason.startswith("resume function of [1/0] after the graph break at")


def test_nested_record_is_refused(tmp_path):
    with dynview.record(tmp_path / "a.dyn"):
        with pytest.raises(RuntimeError, match="already recording"):
            dynview.record(tmp_path / "b.dyn").start()


@pytest.mark.parametrize("content,message", [
    (b"", "empty file"),
    (b'{"traceEvents": []}', "JSON text"),
    (b"\x28\xb5\x2f\xfd" + b"\0" * 40, "zstd stream"),
    (b"hello world, this is not a trace\n" * 4, "text file"),
    (bytes(range(256)), "not a dynview trace"),
])
def test_load_trace_bad_input(tmp_path, content, message):
    p = tmp_path / "bad.dyn"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        dynview.load_trace(p)
    with pytest.raises(ValueError, match="directory"):
        dynview.load_trace(tmp_path)


def test_load_trace_truncated_keeps_prefix(tmp_path, corpus_trace):
    t, _, _ = corpus_trace
    data = open(t.path, "rb").read()
    cut = t.chunks[len(t.chunks) // 2]["offset"] + 50  # inside a chunk
    p = tmp_path / "cut.dyn"
    p.write_bytes(data[:cut])
    u = dynview.load_trace(p)
    assert u.problems and "truncated" in u.problems[0][0]
    k = len(t.chunks) // 2
    assert len(u.chunks) == k and u.num_steps == t.chunks[k]["first_step"]
    assert [s.opcode for s in u.steps] == [s.opcode for s in t.steps[:u.num_steps]]
