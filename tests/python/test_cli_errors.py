"""Bad input to the dynview executable and the Python API: every case gets a message that names
the problem and the documented exit code (64 usage, 2 bad input), never an abort; --help per
subcommand on stdout, --version, --help-script; Latin-1 source files recorded as UTF-8."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import dynview
from test_cli_disasm import cli
from conftest import run_with_display

pytestmark = pytest.mark.main_interpreter_only  # (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(*args, xvfb=False):
    pre = []
    if xvfb:
        exe = shutil.which("xvfb-run")
        assert exe, "xvfb-run is needed (make deps installs xvfb)"
        pre = [exe, "-a", "-s", "-screen 0 1600x1000x24"]
    return run_with_display([*pre, cli(), *args], capture_output=True, text=True, timeout=120)


def f(x):
    return torch.relu(x) * 2 + 1


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("errors") / "run.dyn")
    dynview.reset()
    with dynview.record(path):
        dynview.compile(f, backend="eager")(torch.ones(3))
    dynview.reset()
    return path


@pytest.mark.parametrize("args,message", [
    (["export", "{t}"], "export: --format is required (chrome|json)"),
    (["export", "{t}", "--format", "svg"], "export: --format must be chrome or json, not 'svg'"),
    (["export", "{t}", "--format"], "export: --format needs a value"),
    (["check", "{t}", "--max-graphs", "-1"], "check: --max-graphs must be an integer >= 0, not '-1'"),
    (["check", "{t}", "--max-graphs", "99999999999999999999999"], "check: --max-graphs must be an integer >= 0"),
    (["check", "{t}", "--max-recompiles"], "check: --max-recompiles needs a value"),
    (["check", "{t}", "--foo"], "check: unknown option --foo"),
    (["explain", "{t}", "{t}"], "explain: unexpected argument"),
    (["explain"], "explain: a trace file (RUN.dyn) or a directory of traces is required"),
    (["stats", "{t}", "--max-graphs", "1"], "stats: unknown option --max-graphs"),
    (["seek", "{t}", "--random", "0"], "seek: --random needs an integer from 1"),
    (["disasm"], "disasm: a code object file (CODE.json) is required"),
    (["opcodes", "x"], "opcodes: takes only --version 3.11|3.12|3.13"),
    (["--foo"], "unknown option --foo"),
    (["nosuchcommand"], "no such subcommand or trace file 'nosuchcommand'"),
    (["{t}", "--scale", "0.01"], "--scale must be a number from 0.5 to 4, not '0.01'"),
    (["{t}", "--scale", "nan"], "--scale must be a number from 0.5 to 4, not 'nan'"),
    (["{t}", "--scale", "1e9"], "--scale must be a number from 0.5 to 4, not '1e9'"),
    (["{t}", "--scale"], "--scale needs a value"),
    (["{t}", "--size", "10x10"], "--size must be WxH"),
    (["{t}", "--step", "-3"], "--step must be an integer >= 0"),
    (["{t}", "--select", "node"], "--select takes WHAT:ID"),
    (["{t}", "--frobnicate"], "unknown option --frobnicate"),
])
def test_usage_errors_name_the_problem(trace, args, message):
    out = run(*[a.format(t=trace) for a in args])
    assert out.returncode == 64, (args, out.returncode, out.stderr)
    assert message in out.stderr, (args, out.stderr)
    assert "--help" in out.stderr  # where to read more


@pytest.mark.parametrize("cmd", ["explain", "recompiles", "check", "stats", "export", "seek", "disasm", "opcodes"])
def test_subcommand_help_on_stdout(cmd):
    out = run(cmd, "--help")
    assert out.returncode == 0 and out.stdout.startswith(f"usage: dynview {cmd}") and not out.stderr


def test_help_version_and_script_help():
    h = run("--help")
    assert h.returncode == 0 and "exit codes" in h.stdout and "3 no display" in h.stdout
    v = run("--version")
    assert v.returncode == 0 and v.stdout.startswith("dynview 0.1.0") and "trace format 4.0" in v.stdout
    s = run("--help-script")
    assert s.returncode == 0
    for cmd in ("goto N", "click node", "zoom F", "screenshot OUT.png", "fxtab nodes|code"):
        assert cmd in s.stdout
    vh = run("x.dyn", "--help")
    assert vh.returncode == 0 and vh.stdout.startswith("usage: dynview RUN.dyn")


def test_viewer_out_of_range_selections(trace, tmp_path):
    huge = "99999999999999999999"
    out = run(trace, "--select", f"node:{huge}", "--screenshot", str(tmp_path / "x.png"), xvfb=True)
    assert out.returncode == 64 and f"--select node {huge}: no graph node '{huge}'" in out.stderr, out.stderr
    out = run(trace, "--select", "compile:7", "--screenshot", str(tmp_path / "x.png"), xvfb=True)
    assert out.returncode == 64 and "no compile '7' (the trace has 1" in out.stderr, out.stderr
    script = tmp_path / "s.txt"
    script.write_text(f"click node {huge}\nclick guard {huge}\nclick compile -1\nzoom 0\nzoom -2\nzoom nan\nclick node relu\n"
                      f"click timeline {huge}k\nclick timeline 1.5e21\nclick timeline -0.5\nclick timeline nan\nclick timeline 1\n")
    out = run(trace, "--script", str(script), xvfb=True)
    assert out.returncode == 1, out.stderr  # failed commands: an error line each, exit 1
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    errors = [l.get("error", "") for l in lines]
    assert errors[0].startswith(f"no graph node '{huge}'")
    assert errors[1].startswith(f"no guard '{huge}'") and errors[2].startswith("no compile '-1'")
    assert all(e.startswith("zoom needs a factor above 0") for e in errors[3:6])
    assert errors[6] == "" and lines[6]["state"]["node_name"] == "relu"
    # a timeline fraction outside [0, 1] (the CLI fuzzer's 1.5e21 overflowed the step number)
    assert all(e.startswith("click timeline needs a fraction from 0 to 1") for e in errors[7:11]), errors[7:11]
    assert errors[11] == "" and lines[11]["state"]["cursor"] > lines[6]["state"]["cursor"]


def test_viewer_refuses_non_utf8_script(trace, tmp_path):
    script = tmp_path / "bad.txt"
    script.write_bytes(b"goto 1\nsearch caf\xe9\n")
    out = run(trace, "--script", str(script), xvfb=True)
    assert out.returncode == 64 and "line 2 is not valid UTF-8" in out.stderr, out.stderr
    out = run(trace, "--script", str(tmp_path / "missing.txt"))
    assert out.returncode == 64 and "cannot read it" in out.stderr


LATIN1 = b"# -*- coding: latin-1 -*-\nimport torch\n\ndef caf\xe9(x):\n    s = '\xe9t\xe9'  # \xe0 bient\xf4t\n    return x * len(s)\n"


def test_latin1_source_recorded_as_utf8(tmp_path):
    src = tmp_path / "latin.py"
    src.write_bytes(LATIN1)
    code = (f"import sys, torch, dynview; sys.path.insert(0, {str(tmp_path)!r}); import latin\n"
            f"with dynview.record({str(tmp_path / 'latin.dyn')!r}):\n"
            f"    dynview.compile(getattr(latin, 'caf\\u00e9'), backend='eager')(torch.ones(2))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    path = str(tmp_path / "latin.dyn")
    t = dynview.load_trace(path)  # no type_error.316
    lines = t.sources[str(src)]
    assert lines[4] == "def café(x):" and lines[5] == "    s = 'été'  # à bientôt"
    out = run("export", path, "--format", "json")
    assert out.returncode == 0 and "été" in out.stdout
    assert run("explain", path).returncode == 0


def test_python_api_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        dynview.load_trace(tmp_path / "missing.dyn")
    for bad in (dict(chunk_steps=-5), dict(chunk_steps=0), dict(flush_ms=0), dict(flush_ms=10 ** 12), dict(chunk_steps=1.5)):
        with pytest.raises(ValueError, match="must be an int"):
            dynview.record(tmp_path / "x.dyn", **bad)
    with pytest.raises(AssertionError) as ours:
        dynview.compile(42)
    with pytest.raises(AssertionError) as theirs:
        torch.compile(42)
    assert str(ours.value) == str(theirs.value)


def test_bad_dynview_trace_path_is_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), DYNVIEW_TRACE=str(tmp_path / "no" / "such" / "dir" / "run.dyn"))
    p = subprocess.run([sys.executable, "-c", "import dynview; print('imported')"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "imported"
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "DYNVIEW_TRACE=" in p.stderr and "cannot record" in p.stderr and "not recorded" in p.stderr


def test_log_names_and_unknown_channels(tmp_path):
    code = ("import torch, dynview\n"
            "def brk(x):\n    y = x * 2\n    if y.sum() > 0:\n        return y + 1\n    return -y\n"
            "dynview.compile(brk, backend='eager')(torch.ones(3))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), DYNVIEW_LOGS="graph_breaks,steps,nosuch")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "[dynview.graph_breaks] Graph break" in p.stderr and "dynview.dynview" not in p.stderr
    assert "DYNVIEW_LOGS: unknown channel 'nosuch' (known: graph_breaks" in p.stderr
    assert "[dynview.steps] TRACE" in p.stderr and " LOAD_FAST " in p.stderr  # opcode names, not numbers


def test_bytecode_log_prints_original_and_modified_listings(tmp_path):
    """DYNVIEW_LOGS=bytecode prints, as TORCH_LOGS=bytecode does, the original listing when a frame
    compiles and the modified one (which calls the graph), then the resume functions' listings."""
    code = ("import torch, dynview\n"
            "def brk(x):\n    y = x * 2\n    if y.sum() > 0:\n        return y + 1\n    return -y\n"
            "dynview.compile(brk, backend='eager')(torch.ones(3))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), DYNVIEW_LOGS="bytecode")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    log = p.stderr
    orig = log.index("[dynview.bytecode] ORIGINAL BYTECODE brk <string> line 2 [0/0]")
    mod = log.index("[dynview.bytecode] MODIFIED BYTECODE brk <string> line 2 [0/0]")
    res = log.index("[dynview.bytecode] RESUME FUNCTION BYTECODE __resume_at_")
    assert orig < mod < res
    original, modified = log[orig:mod], log[mod:res]
    # the original listing is brk's own code: dis's columns, its multiply and its branch
    assert "LOAD_FAST" in original and "BINARY_OP" in original and "(*)" in original and "POP_JUMP" in original
    # the modified one loads the compiled graph and calls it (the original's BINARY_OP is in the graph)
    assert "__compiled_graph" in modified and " CALL " in modified and "(*)" not in modified
    assert "__resume_at_" in modified  # and returns the resume function's result
    assert log.count("ORIGINAL BYTECODE") >= 1 and "(no code object recorded)" not in log


def test_readme_is_self_contained():
    """The README points only at files inside the repository, and documents every exit code."""
    import re
    text = open(os.path.join(ROOT, "README.md")).read()
    assert "../" not in text
    for ref in re.findall(r"\]\(([^)#]+)\)", text):  # markdown links
        assert ref.startswith("http") or os.path.exists(os.path.join(ROOT, ref)), ref
    for ref in re.findall(r"`((?:core|tracer|recorder|viewer|python|tests|assets)/[\w./-]+)`", text):
        assert os.path.exists(os.path.join(ROOT, ref)), ref
    for code in ("**0** ok", "**1** `check` over budget", "**2** unreadable", "**3** no display", "**64** usage error"):
        assert code in text
    assert "--help-script" in text


def test_record_while_dynview_trace_says_which_wins(tmp_path):
    code = ("import dynview\n"
            "try:\n    dynview.record('other.dyn').start()\nexcept RuntimeError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), DYNVIEW_TRACE="env.dyn")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "already recording to env.dyn (DYNVIEW_TRACE); captures go there, not to other.dyn" in p.stdout
