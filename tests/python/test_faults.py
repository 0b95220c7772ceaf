"""The recorder under faults: fork while recording, multiprocessing (fork and spawn), two processes
on one path, DYNVIEW_TRACE=dir/ (one trace per process, read as one by every subcommand), a
failed write (RLIMIT_FSIZE), 8 threads recording at once, and `dynview check` on damaged traces.
Every run: no hang (each child has a timeout that fails the test), no lost run, every trace
readable, `check` exit codes as documented (0 ok, 2 damaged or incomplete)."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import dynview
from test_cli_disasm import cli
from conftest import run_with_display

pytestmark = pytest.mark.shared_by_versions  # (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 90  # a hang fails the test instead of blocking the suite


def py(tmp_path, code, *args, env=None, **kw):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    e.pop("DYNVIEW_TRACE", None)
    e.update(env or {})
    return subprocess.run([sys.executable, str(script), *args], env=e, capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=str(tmp_path), **kw)


def dv(*args):
    return subprocess.run([cli(), *args], capture_output=True, text=True, timeout=TIMEOUT)


def view(tmp_path, path, *commands):
    """The viewer's --script states after each command (headless, under xvfb)."""
    script = tmp_path / "view.txt"
    script.write_text("\n".join(commands or ("print",)) + "\n")
    v = run_with_display(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", cli(), str(path), "--script", str(script)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert v.returncode == 0, (v.stdout[-2000:], v.stderr[-2000:])
    return [json.loads(line)["state"] for line in v.stdout.splitlines() if line.startswith("{")]


def whole(path):
    """A trace that the recording process closed: footer, no problems, every chunk decodes."""
    t = dynview.load_trace(path)
    assert t._f.has_footer() and not t.problems, (path, t.problems)
    assert len(t.steps) == t.num_steps
    return t


def qualnames(t):
    return sorted(c.qualname for c in t.compiles)


FORK = """
    import os, sys, torch, dynview
    def f(x): return x * 2 + 1
    def g(x): return x.sin() - 1
    dynview.compile(f, backend="eager")(torch.ones(3))
    pid = os.fork()
    if pid == 0:
        if sys.argv[1] == "compile":
            dynview.compile(g, backend="eager")(torch.ones(3))
        if sys.argv[2] == "_exit":
            os._exit(0)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
    dynview.compile(g, backend="eager")(torch.ones(4))  # the parent goes on recording
    print(pid)
"""


@pytest.mark.parametrize("child,exit_how", [("compile", "exit"), ("compile", "_exit"), ("idle", "exit")])
def test_fork_while_recording(tmp_path, child, exit_how):
    out = py(tmp_path, FORK, child, exit_how, env={"DYNVIEW_TRACE": "run.dyn"})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    parent = whole(str(tmp_path / "run.dyn"))
    assert qualnames(parent) == ["f", "g"]  # the parent's trace is intact, its later records too
    assert dv("check", str(tmp_path / "run.dyn")).returncode == 0
    mine = tmp_path / f"run.{pid}.dyn"  # the child recorded to its own file
    assert mine.exists()
    if exit_how == "exit":
        t = whole(str(mine))
        assert dv("check", str(mine)).returncode == 0
    else:  # os._exit: no atexit, so no footer; what was flushed reads back
        t = dynview.load_trace(str(mine))
        assert not t.problems
        assert dv("check", str(mine)).returncode == 2
    assert qualnames(t) == (["g"] if child == "compile" else [])


MP = """
    import multiprocessing as mp, sys, torch, dynview
    def g(x): return x.cos() * 3
    def work(i):
        dynview.compile(g, backend="eager")(torch.ones(i + 2))
    if __name__ == "__main__":
        dynview.compile(g, backend="eager")(torch.ones(1))
        ctx = mp.get_context(sys.argv[1])
        ps = [ctx.Process(target=work, args=(i,)) for i in range(int(sys.argv[2]))]
        for p in ps: p.start()
        for p in ps: p.join()
        assert [p.exitcode for p in ps] == [0] * len(ps)
"""


def test_dir_trace_with_forked_workers_reads_as_one(tmp_path):
    out = py(tmp_path, MP, "fork", "4", env={"DYNVIEW_TRACE": "traces/"})
    assert out.returncode == 0, out.stderr
    files = sorted(os.listdir(tmp_path / "traces"))
    assert len(files) == 5 and all(f.startswith("pid") and f.endswith(".dyn") for f in files)
    for f in files:
        assert qualnames(whole(str(tmp_path / "traces" / f))) == ["g"]
    d = str(tmp_path / "traces")
    chk = dv("check", d, "--json")
    assert chk.returncode == 0, chk.stderr
    j = json.loads(chk.stdout)
    assert j["compiles"] == 5 and j["checks"]["graphs"]["value"] == 5 and len(j["processes"]) == 5
    ex = json.loads(dv("explain", d, "--json").stdout)
    assert ex["totals"]["compiles"] == 5 and {p["pid"] for p in ex["processes"]} == {int(f[3:-4]) for f in files}
    st = dv("stats", d)
    assert st.returncode == 0 and st.stdout.count("== ") == 5
    assert dv("check", d, "--max-graphs", "4").returncode == 1  # the budget is over all processes
    chrome = json.loads(dv("export", d, "--format", "chrome").stdout)
    assert len({e["pid"] for e in chrome["traceEvents"]}) == 5
    pids = {int(f[3:-4]) for f in files}
    # every subcommand: per-process sections and totals over the 5 processes
    for cmd in ("explain", "recompiles", "stats"):
        out = dv(cmd, d)
        assert out.returncode == 0, (cmd, out.stderr)
        assert out.stdout.count("== ") == 5 and "5 processes:" in out.stdout, (cmd, out.stdout)
        assert {int(x.split("(pid ")[1].split(")")[0]) for x in out.stdout.splitlines() if x.startswith("== ")} == pids
    rc = json.loads(dv("recompiles", d, "--json").stdout)
    assert len(rc["processes"]) == 5 and rc["totals"]["recompile_count"] == 4  # each forked worker recompiles g
    dump = json.loads(dv("export", d, "--format", "json").stdout)
    assert {p["pid"] for p in dump["processes"]} == pids
    sk = dv("seek", d, "--random", "50", "--json")
    assert sk.returncode == 0 and json.loads(sk.stdout)["jumps"] == 50, sk.stderr
    df = dv("diff", d, d, "--json", "--fail-on", "new-breaks,more-graphs")
    assert df.returncode == 0, df.stderr
    dj = json.loads(df.stdout)
    assert dj["ok"] and len(dj["processes"]) == 5 and all(p["before"] == p["after"] for p in dj["processes"])
    # the viewer opens the directory as one trace: process -> code object -> compile
    states = view(tmp_path, d, "print", "click compile 4", "goto 0")
    s = states[0]
    assert {p["pid"] for p in s["processes"]} == pids and len(s["processes"]) == 5
    assert [len(p["compiles"]) for p in s["processes"]] == [1] * 5
    assert sorted(c["process"] for c in s["compiles"]) == [0, 1, 2, 3, 4]
    assert all(c["qualname"] == "g" and c["outcome"] == "graph" for c in s["compiles"])
    assert s["counts"]["compiles"] == 5 and s["counts"]["steps"] == s["total_steps"] == sum(p["steps"] for p in s["processes"])
    assert s["trace_warnings"] == []
    # the last process's compile: its steps (the global numbering) decode with its own code objects
    last = states[1]
    assert last["compile"] == 4 and last["cursor"] == s["processes"][4]["first_step"] > 0
    assert last["step"]["opname"] and last["step"]["source_file"].endswith("child.py")
    assert states[2]["compile"] == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    out = dv("check", str(empty))
    assert out.returncode == 2 and "no .dyn traces" in out.stderr


def test_spawned_workers_on_one_path_lose_no_run(tmp_path):
    out = py(tmp_path, MP, "spawn", "2", env={"DYNVIEW_TRACE": "run.dyn"})
    assert out.returncode == 0, out.stderr
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".dyn"))
    assert len(files) == 3, files  # run.dyn and run.<pid>.dyn for each worker
    assert out.stderr.count("is being written by another process; recording to") == 2
    for f in files:
        assert qualnames(whole(str(tmp_path / f))) == ["g"]


TWO = """
    import os, sys, time, torch, dynview
    def f(x): return x + 1
    dynview.compile(f, backend="eager")(torch.ones(2))
    open("ready", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.01)
"""


def test_two_processes_one_path(tmp_path):
    script = tmp_path / "first.py"
    script.write_text(textwrap.dedent(TWO))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), DYNVIEW_TRACE="same.dyn")
    first = subprocess.Popen([sys.executable, str(script)], env=env, cwd=str(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        while not (tmp_path / "ready").exists():
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.02)
        second = py(tmp_path, """
            import torch, dynview
            def h(x): return x * 5
            dynview.compile(h, backend="eager")(torch.ones(2))
        """, env={"DYNVIEW_TRACE": "same.dyn"})
        assert second.returncode == 0, second.stderr
        assert "same.dyn is being written by another process; recording to same." in second.stderr
    finally:
        (tmp_path / "go").touch()
        first.wait(timeout=TIMEOUT)
    assert first.returncode == 0
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".dyn"))
    assert len(files) == 2
    assert qualnames(whole(str(tmp_path / "same.dyn"))) == ["f"]
    other = [f for f in files if f != "same.dyn"][0]
    assert qualnames(whole(str(tmp_path / other))) == ["h"]


FSIZE = """
    import resource, torch, dynview
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    for i in range(30):
        ns = {}
        src = "def f%d(x):\\n    for k in range(%d):\\n        x = x.sin() * 2 + k\\n    return x\\n" % (i, 20 + i)
        exec(compile(src, "gen%d.py" % i, "exec"), ns)
        dynview.compile(ns["f%d" % i], backend="eager")(torch.ones(3))
    print("done")
"""


def test_failed_write_warns_and_check_refuses(tmp_path):
    out = py(tmp_path, FSIZE, env={"DYNVIEW_TRACE": "small.dyn"})
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr
    assert "recording to small.dyn stopped" in out.stderr and "File too large" in out.stderr
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr
    path = str(tmp_path / "small.dyn")
    t = dynview.load_trace(path)  # the prefix written before the failure reads back
    assert not t._f.has_footer() and not t.problems and len(t.compiles) > 0
    chk = dv("check", path)
    assert chk.returncode == 2 and "small.dyn is incomplete: it has no footer" in chk.stderr
    assert "--allow-incomplete" in chk.stderr
    assert dv("check", path, "--allow-incomplete").returncode == 0
    # with dynview.record(...), the failure is an OSError at the end of the block
    out = py(tmp_path, """
        import resource, torch, dynview
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
        try:
            with dynview.record("rec.dyn"):
                for i in range(10):
                    ns = {}
                    exec("def f%d(x):\\n    return x.sin() * %d\\n" % (i, i), ns)
                    dynview.compile(ns["f%d" % i], backend="eager")(torch.ones(3))
        except OSError as e:
            print("OSError", e)
    """)
    assert "OSError dynview: writing rec.dyn failed" in out.stdout and "the trace is incomplete" in out.stdout, out.stderr


THREADS = """
    import threading, torch, dynview
    fns = []
    for i in range(8):
        ns = {}
        exec("def f%d(x):\\n    y = x\\n    for k in range(%d):\\n        y = y.cos() + k\\n    return y\\n" % (i, 5 + i), ns)
        fns.append(ns["f%d" % i])
    barrier = threading.Barrier(8)
    def run(f):
        barrier.wait()
        c = dynview.compile(f, backend="eager")
        for n in range(3):
            c(torch.ones(2 + n))
    ts = [threading.Thread(target=run, args=(f,)) for f in fns]
    for t in ts: t.start()
    for t in ts: t.join()
    print("ok")
"""


def test_eight_threads_recording(tmp_path):
    out = py(tmp_path, THREADS, env={"DYNVIEW_TRACE": "threads.dyn"})
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    t = whole(str(tmp_path / "threads.dyn"))
    assert sorted({c.qualname for c in t.compiles}) == [f"f{i}" for i in range(8)]
    assert all(c.outcome for c in t.compiles)  # every compile ended in the trace
    assert dv("check", str(tmp_path / "threads.dyn")).returncode == 0


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    out = py(d, """
        import torch, dynview
        def brk(x):
            y = x * 2
            if y.sum() > 0:
                return y + 1
            return -y
        with dynview.record("good.dyn", chunk_steps=8):
            for n in range(3):
                dynview.compile(brk, backend="eager")(torch.ones(n + 2))
    """)
    assert out.returncode == 0, out.stderr
    return d / "good.dyn"


def test_check_refuses_truncated_traces(good_trace, tmp_path):
    data = good_trace.read_bytes()
    assert dv("check", str(good_trace)).returncode == 0
    refused = 0
    for cut in range(40, len(data), max(1, len(data) // 25)):
        bad = tmp_path / f"cut{cut}.dyn"
        bad.write_bytes(data[:cut])
        out = dv("check", str(bad))
        assert out.returncode == 2, (cut, out.stdout, out.stderr)
        assert "check: ok" not in out.stdout
        assert f"cut{cut}.dyn" in out.stderr and "byte" in out.stderr
        refused += 1
    assert refused >= 20


def test_check_refuses_flipped_bytes_and_reports_corrupt_steps(good_trace, tmp_path):
    data = bytearray(good_trace.read_bytes())
    t = dynview.load_trace(str(good_trace))
    assert len(t.chunks) >= 3
    # a byte inside the second chunk's steps frame (its zstd checksum catches it)
    c = t.chunks[1]
    at = c["offset"] + 8 + 84 + c["events_zsize"] + c["steps_zsize"] // 2
    data[at] ^= 0x40
    bad = tmp_path / "flip.dyn"
    bad.write_bytes(bytes(data))
    for cmd in ("check", "explain", "stats"):
        out = dv(cmd, str(bad))
        assert "chunk 1: step data is corrupt" in out.stderr, (cmd, out.stderr)
    assert dv("check", str(bad)).returncode == 2
    assert dv("explain", str(bad)).returncode == 0  # explain reports, check refuses
    ex = json.loads(dv("explain", str(bad), "--json").stdout)
    assert any("step data is corrupt" in p["what"] for p in ex["problems"])
    assert "warning: chunk 1: step data is corrupt" in dv("explain", str(bad)).stdout
    st = json.loads(dv("stats", str(bad), "--json").stdout)
    assert any("chunk 1: step data is corrupt" in p["what"] for p in st["problems"])
    ck = json.loads(dv("check", str(bad), "--json", "--allow-incomplete").stdout)
    assert any("chunk 1: step data is corrupt" in p["what"] for p in ck["problems"])
    # the viewer's banner (the footer and index are intact: only decoding the chunk finds it)
    warnings = view(tmp_path, bad)[0]["trace_warnings"]
    assert any("chunk 1: step data is corrupt" in w for w in warnings), warnings
    assert view(tmp_path, good_trace)[0]["trace_warnings"] == []
    # single-byte flips all over the file: check refuses each one and says where
    for i in range(0, len(data), max(1, len(data) // 40)):
        d2 = bytearray(good_trace.read_bytes())
        d2[i] ^= 0xFF
        bad.write_bytes(bytes(d2))
        out = dv("check", str(bad))
        assert out.returncode == 2 and "check: ok" not in out.stdout, (i, out.stdout, out.stderr)
        assert "flip.dyn" in out.stderr, (i, out.stderr)


COUNTS = """
    import torch, dynview
    dynview.config.recompile_limit = 2
    def two(x):
        return torch.relu(x) * 2 + x.mean()
    def brk(x):
        for _ in range(2):  # a graph break inside a loop: the frame runs eagerly
            x = x * 2
            if x.sum() > 0:
                x = x + 1
        return x
    def long(x):
        for k in range(40):
            x = x.sin() + k
        return x
    with dynview.record("counts.dyn", chunk_steps=16):
        t = dynview.compile(two, backend="eager")
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float32):
            t(torch.ones(3, dtype=dt))   # 2 compiles, the recompile limit (said once), 1 eager run, 1 hit
        b = dynview.compile(brk, backend="eager")
        for _ in range(4):
            b(torch.ones(3))   # an eager fallback, then 3 eager runs
        dynview.compile(long, backend="eager")(torch.ones(3))  # many chunks
"""


def test_counts_agree_across_reports_and_viewer(tmp_path):
    out = py(tmp_path, COUNTS)
    assert out.returncode == 0, out.stderr
    full = str(tmp_path / "counts.dyn")
    t = dynview.load_trace(full)
    # cut the file where the last compile's last chunk starts: that compile has no end (as after
    # kill -9 during a compile)
    last = t.compiles[-1]
    cut_at = max(c["offset"] for c in t.chunks if c["first_step"] > last.first_step)
    killed = tmp_path / "killed.dyn"
    killed.write_bytes((tmp_path / "counts.dyn").read_bytes()[:cut_at])
    for path, complete in ((full, True), (str(killed), False)):
        ex = json.loads(dv("explain", path, "--json").stdout)["totals"]
        st = json.loads(dv("stats", path, "--json").stdout)
        rc = json.loads(dv("recompiles", path, "--json").stdout)
        chk = dv("check", path, "--json", *([] if complete else ["--allow-incomplete"]))
        assert chk.returncode == 0, chk.stderr
        ck = json.loads(chk.stdout)
        assert ex == st["counts"]
        assert ex["recompiles"] == ck["checks"]["recompiles"]["value"] == rc["recompile_count"] == 1
        assert ex["recompile_limit_hits"] == ck["checks"]["recompile_limit_hits"]["value"] == rc["limit_hits"] == 1
        assert rc["count"] == 2 and len(rc["recompiles"]) == 2
        assert ex["eager_fallbacks"] == ck["checks"]["eager_fallbacks"]["value"] >= 1
        assert ex["steps"] == st["steps"]  # a compile cut off counts the steps recorded for it
        assert ex["incomplete_compiles"] == (0 if complete else 1)
        if complete:  # calls of frames that run eagerly are runtime events, as cache hits are
            assert ex["eager_runs"] == 4 and ex["cache_hits"] == 1
            assert "4 eager runs" in dv("stats", path).stdout
        if not complete:
            assert dv("check", path).returncode == 2
        (tmp_path / "print.txt").write_text("print\n")
        v = run_with_display(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", cli(), path, "--script", str(tmp_path / "print.txt")],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert v.returncode == 0, v.stderr
        state = json.loads(v.stdout.splitlines()[-1])["state"]
        assert state["counts"] == ex
        assert (state["trace_warnings"] == []) == complete  # the viewer's banner for a cut-off trace
        if complete:  # the hits column counts eager runs: the compile that made each frame eager
            runs = {(c["qualname"], c["id"]): c["eager_runs"] for c in state["compiles"] if c["eager_runs"]}
            assert runs == {("two", "0/1"): 1, ("brk", "1/0"): 3}, state["compiles"]
