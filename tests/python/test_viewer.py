"""The viewer (`dynview RUN.dyn`), driven headless under xvfb-run with Mesa's software GL: scripted
clicks and keys on traces of real captures (a seed-style toy_example, an nn.Module MLP, a
data-dependent break, a recompile on dtype change), each asserted from the viewer's own state
against the trace as dynview.load_trace reads it; screenshots of the main layouts compared with a
tolerance against tests/screenshots/*.png (regenerate them with
`DYNVIEW_UPDATE_SCREENSHOTS=1 python3 -m pytest tests/python/test_viewer.py -k screenshot`)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

import pytest
import torch

import dynview
from test_cli_disasm import cli
from conftest import run_with_display

pytestmark = pytest.mark.main_interpreter_only  # (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "screenshots")


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h) + x.sum()


def data_dependent(x):
    y = x.sin() * 2
    if y.max() > 0.5:
        y = y + 1
    return y.cos()


def scale(x):
    return x * 2 + x.mean()


CASES = {
    "toy": lambda: [dynview.compile(toy_example, backend="eager")(torch.randn(10), torch.randn(10)) for _ in range(2)],
    "mlp": lambda: dynview.compile(MLP(), backend="eager")(torch.randn(5, 8)),
    "break": lambda: dynview.compile(data_dependent, backend="eager")(torch.ones(4)),
    "dtype": lambda: [dynview.compile(scale, backend="eager")(torch.randn(4, dtype=dt)) for dt in (torch.float32, torch.float64)],
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("viewer")
    out = {}
    for name, run in CASES.items():
        torch.manual_seed(0)
        dynview.reset()
        path = str(d / f"{name}.dyn")
        with dynview.record(path):
            run()
        out[name] = (path, dynview.load_trace(path))
    dynview.reset()
    return out


def xvfb():
    exe = shutil.which("xvfb-run")
    assert exe, "xvfb-run is needed (make deps installs xvfb)"
    return [exe, "-a", "-s", "-screen 0 1600x1000x24"]


def script(path, lines, tmp_path, expect_ok=True):
    f = tmp_path / "script.txt"
    f.write_text("\n".join(lines) + "\n")
    p = run_with_display([*xvfb(), cli(), path, "--script", str(f)], capture_output=True, text=True, timeout=120)
    assert (p.returncode == 0) == expect_ok, p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(out) == len(lines)
    return out


def check_state(state, t):
    """The viewer's view of its cursor equals the trace's step (instruction, line, stack)."""
    step = t.steps[state["cursor"]]
    s = state["step"]
    assert (s["offset"], s["opname"], s["line"], s["depth"]) == (step.offset, step.opname, step.line, step.depth)
    assert [v["id"] for v in s["stack"]] == list(step.stack)
    for v in s["stack"]:
        ref = t.values[(step.compile, v["id"])]
        assert (v["repr"], v["kind"], v["source"]) == (ref["repr"], ref["kind"], ref["source"])
    if step.arg is not None:  # the highlighted line shows the instruction's argument after its name
        words = s["instruction"].split()
        assert words[words.index(step.opname) + 1] == str(step.arg), (s["instruction"], step.arg)
    assert f" {step.offset} {step.opname}" in " ".join(s["instruction"].split()).replace(">> ", "") or \
        s["instruction"].split()[s["instruction"].split().index(step.opname) - 1] == str(step.offset)


def test_guard_links_and_highlighted_instruction(traces, tmp_path):
    for name in ("toy", "mlp"):
        path, t = traces[name]
        guards = t.compiles[0].guards
        out = script(path, ["tab breaks"] + [f"click guard {i}" for i in range(len(guards))], tmp_path)
        assert out[0]["state"]["tab"] == "breaks"
        for i, (o, g) in enumerate(zip(out[1:], guards)):
            st = o["state"]
            assert st["selected_guard"] == i and st["cursor"] == g["step"] >= 0, (name, g)
            assert st["tab"] == "guards"  # following a guard shows the guards table
            check_state(st, t)


def test_node_link_and_graph_pane(traces, tmp_path):
    path, t = traces["mlp"]
    c = t.compiles[0]
    names = [n["name"] for n in c.graphs[0]["nodes"]]
    relu = next(n for n in c.graphs[0]["nodes"] if n["name"] == "relu")
    out = script(path, ["click compile 0", "click node relu", "click node linear_1"], tmp_path)
    st = out[1]["state"]
    assert st["node_name"] == "relu" and st["cursor"] == relu["step"] and st["graph_shown"] == 0
    assert st["graph_layout_nodes"] == len(names) and st["graph_layout_edges"] >= len(names) - 2
    check_state(st, t)
    # The step that created relu leaves its result on the stack: a tensor standing for that node.
    top = st["step"]["stack"][-1]
    assert top["kind"] == "tensor" and top["node"] >= 0
    assert out[2]["state"]["node_name"] == "linear_1" and out[2]["state"]["cursor"] > st["cursor"]
    # The pane's other tab shows the graph's Python code as FX printed it at capture.
    out = script(path, ["click compile 0", "fxtab code", "fxtab nodes"], tmp_path)
    assert out[0]["state"]["fx_tab"] == "nodes" and "fx_code" not in out[0]["state"]
    code = out[1]["state"]["fx_code"]
    assert out[1]["state"]["fx_tab"] == "code" and code == c.graphs[0]["code"]
    assert "def forward" in code and "relu" in code
    assert all(name in code for name in names if name != "output")
    assert out[2]["state"]["fx_tab"] == "nodes"


def test_value_link_goes_to_producing_step(traces, tmp_path):
    path, t = traces["mlp"]
    # The last root-frame step holding a tensor made by an earlier step.
    def older(s):
        return [i for i, v in enumerate(s.stack) if t.values[(s.compile, v)]["kind"] == "tensor" and t.values[(s.compile, v)]["step"] < s.index]
    step = max((s for s in t.steps if s.depth == 0 and older(s)), key=lambda s: s.index)
    slot = older(step)[0]
    vid = step.stack[slot]
    out = script(path, [f"goto {step.index}", f"click stack {slot}", "back", "forward"], tmp_path)
    assert out[0]["state"]["cursor"] == step.index
    check_state(out[0]["state"], t)
    st = out[1]["state"]
    assert st["cursor"] == t.values[(step.compile, vid)]["step"] and st["selected_value"] == vid
    assert vid in [v["id"] for v in st["step"]["stack"]]  # the producing step leaves it on the stack
    assert out[2]["state"]["cursor"] == step.index  # back: where the jump started
    assert out[3]["state"]["cursor"] == st["cursor"]


def test_break_link(traces, tmp_path):
    path, t = traces["break"]
    brk = t.breaks[0]
    out = script(path, ["click break 0"], tmp_path)
    st = out[0]["state"]
    assert st["selected_break"] == 0 and st["cursor"] == brk["step"]
    # The conditional jump on a tensor (3.11 POP_JUMP_FORWARD_IF_*, 3.12+ POP_JUMP_IF_*).
    assert st["step"]["line"] == brk["line"] and st["step"]["opname"] in (
        "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "COMPARE_OP")
    # The original-bytecode pane marks the break site: the instruction at the break's offset.
    assert f" {brk['offset']} " in st["break_instruction"] and st["step"]["opname"] in st["break_instruction"]
    check_state(st, t)
    # The breaks table is shown, and the source pane says why in words: id with its title (the
    # graph-break table's), line, message and hint.
    assert st["tab"] == "breaks"
    title = dynview.break_title(brk["break_id"])
    assert brk["break_id"] == "DV0002" and title == "data-dependent control flow"
    assert st["why"][0] == f"graph break {brk['break_id']} ({title}) at line {brk['line']}: {brk['message']}"
    assert brk["hint"] and st["why"][1] == "hint: " + brk["hint"]


def test_recompile_link_to_failing_guard(traces, tmp_path):
    path, t = traces["dtype"]
    assert [c.id for c in t.compiles] == ["0/0", "0/1"]
    rc = [e for e in t.runtime if e["kind"] == "recompile"][0]
    failing = t.compiles[rc["entry_c"]].guards[rc["guards"][0]]
    out = script(path, ["click recompile 0"], tmp_path)
    st = out[0]["state"]
    assert st["selected_recompile"] == 0 and st["compile"] == rc["entry_c"]
    assert st["cursor"] == failing["step"] and "TENSOR_MATCH" in failing["kind"]
    guards_before = sum(len(c.guards) for c in t.compiles[: rc["entry_c"]])
    assert st["selected_guard"] == guards_before + rc["guards"][0]
    assert st["tab"] == "guards" and st["why"] == []  # the first compile has no break and is no recompile
    # The recompile itself says which guard failed and with what value.
    st = script(path, ["click compile 1"], tmp_path)[0]["state"]
    assert st["compile"] == 1 and len(st["why"]) == 1
    assert st["why"][0].startswith("recompiled [0/1]: ") and rc["failures"][0] in st["why"][0] and "dtype" in st["why"][0]


MODULE = """import torch


def blend(x, w):
    h = torch.tanh(x @ w)
    if h.sum() > 0:
        h = h * 2
    return h + 1
"""


def test_source_from_the_trace(tmp_path):
    """The trace carries the recorded functions' lines: the source pane shows the code that ran
    when the file on disk has changed since, or is gone; the file itself when it still matches."""
    import importlib.util
    src = tmp_path / "blendmod.py"
    src.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("blendmod", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = str(tmp_path / "blend.dyn")
    dynview.reset()
    with dynview.record(path):
        dynview.compile(mod.blend, backend="eager")(torch.randn(3, 4), torch.randn(4, 4))
    dynview.reset()
    t = dynview.load_trace(path)
    lines = MODULE.splitlines()
    assert t.sources[str(src)] == {n: lines[n - 1] for n in range(4, 9)}  # def blend .. return, nothing else
    steps = [s.index for s in t.steps if s.line and s.line >= 5][:3]
    cmds = [f"goto {i}" for i in steps]
    def shown():
        return [o["state"]["step"] for o in script(path, cmds, tmp_path)]
    for st in shown():
        assert st["source_origin"] == "disk, matching the trace" and st["source_line"] == lines[st["line"] - 1]
    src.write_text("# edited since\n\n" + MODULE.replace("h * 2", "h * 3"))  # lines moved and changed
    for st in shown():
        assert st["source_origin"] == "trace; the file on disk has changed" and st["source_line"] == lines[st["line"] - 1]
    src.unlink()
    for st in shown():
        assert st["source_origin"] == "trace" and st["source_line"] == lines[st["line"] - 1]


def test_keys_history_bookmarks(traces, tmp_path):
    path, t = traces["mlp"]
    steps = t.steps
    # A step whose next step enters an inlined call (depth + 1).
    call = next(s for s in steps[:-1] if steps[s.index + 1].depth == s.depth + 1)
    after = next(s for s in steps[call.index + 1:] if s.depth <= call.depth)
    out = script(path, [f"key Ctrl+G {call.index}", "key Right", "key Left", "key Shift+Right", "key Alt+Left",
                        "key Alt+Right", "bookmark", "goto 0", "next-bookmark", "key End", "key Home"], tmp_path)
    cur = [o["state"]["cursor"] for o in out]
    assert cur[0] == call.index and cur[1] == call.index + 1 and out[1]["state"]["step"]["depth"] == call.depth + 1
    assert cur[2] == call.index
    assert cur[3] == after.index  # steps over the inlined call
    assert cur[4] == 0 and cur[5] == call.index  # history: Ctrl+G was the last jump
    assert out[6]["state"]["bookmarks"] == [call.index] and cur[7] == 0 and cur[8] == call.index
    assert cur[9] == t.compiles[0].first_step + t.compiles[0].steps - 1 and cur[10] == t.compiles[0].first_step
    for o in out:
        check_state(o["state"], t)


def test_search_hits_before_and_after(traces, tmp_path):
    path, t = traces["mlp"]
    n_tm = sum("TENSOR_MATCH" in g["kind"] or "TENSOR_MATCH" in g["text"] for g in t.guards)
    loads = [s.index for s in t.steps if s.opname == "LOAD_ATTR"]
    mid = loads[len(loads) // 2]
    out = script(path, ["search TENSOR_MATCH", "search LOAD_ATTR", f"goto {mid}", "search-next", "search-prev", "search-prev"], tmp_path)
    assert out[0]["state"]["hits"] == n_tm > 0
    assert out[1]["state"]["hits"] == len(loads) > 2
    assert out[3]["state"]["cursor"] == min(i for i in loads if i > mid)
    assert out[4]["state"]["cursor"] == mid
    assert out[5]["state"]["cursor"] == max(i for i in loads if i < mid)


def test_search_names_and_break_ids(traces, tmp_path):
    import dis
    import re
    path, t = traces["mlp"]
    # Instructions of MLP.forward whose argument names fc1 (LOAD_ATTR fc1), as dis shows them.
    argrepr = {i.offset: i.argrepr for i in dis.get_instructions(MLP.forward)}
    code = t.compiles[0].code
    named = [s.index for s in t.steps if s.code == code and re.search(r"\bfc1\b", argrepr.get(s.offset, ""))]
    assert len(named) >= 1
    others = [g["step"] for g in t.guards if "fc1" in g["text"].lower() or "fc1" in g["kind"].lower()]
    others += [n["step"] for c in t.compiles for gr in c.graphs for n in gr["nodes"] if "fc1" in n["name"] or "fc1" in n["target"]]
    out = script(path, ["click compile 0", "search fc1", "goto 0", "search-next", "search-next"], tmp_path)
    assert out[1]["state"]["hits"] == len(named) + len(others)
    after = sorted(set(named + others))
    assert out[3]["state"]["cursor"] == next(i for i in after if i > 0)
    assert out[4]["state"]["cursor"] == next(i for i in after if i > out[3]["state"]["cursor"])
    bpath, bt = traces["break"]
    brk = bt.breaks[0]
    out = script(bpath, [f"search {brk['break_id']}", "goto 0", "search-next"], tmp_path)
    assert out[0]["state"]["hits"] == 1 and out[2]["state"]["cursor"] == brk["step"]


def test_script_errors_and_bad_traces(traces, tmp_path):
    path, _ = traces["toy"]
    out = script(path, ["click node nosuchnode", "frobnicate", "key F3 99999999999999999999", "key Right x",
                        "key Right 0", "key Right 2"], tmp_path, expect_ok=False)
    assert "no graph node" in out[0]["error"] and "unknown command" in out[1]["error"]
    # a repeat count that overflows (the fuzzer's: it used to repeat F3 for ever) or is not 1..10^6
    assert all("TIMES must be 1 to 1000000" in o["error"] for o in out[2:5])
    assert "error" not in out[5] and out[5]["state"]["cursor"] == out[4]["state"]["cursor"] + 2
    bad = tmp_path / "bad.dyn"
    bad.write_text('{"not": "a trace"}')
    p = run_with_display([*xvfb(), cli(), str(bad), "--screenshot", str(tmp_path / "x.png")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "JSON text, not a dynview trace" in p.stderr
    cut = tmp_path / "cut.dyn"
    data = open(path, "rb").read()
    cut.write_bytes(data[: len(data) * 2 // 3])
    p = run_with_display([*xvfb(), cli(), str(cut), "--screenshot", str(tmp_path / "c.png")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and os.path.getsize(tmp_path / "c.png") > 1000


# ---- screenshots ------------------------------------------------------------------------------------

def read_png(path):
    """(width, height, bytes per pixel, pixel rows) of an 8-bit RGB/RGBA PNG (zlib + unfiltering)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


LAYOUTS = {  # name -> (trace, viewer arguments)
    "mlp_graph": ("mlp", ["--select", "node:relu"]),
    "break": ("break", ["--select", "break:0"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_screenshot(traces, tmp_path, layout):
    trace, args = LAYOUTS[layout]
    out = tmp_path / f"{layout}.png"
    p = run_with_display([*xvfb(), cli(), traces[trace][0], "--screenshot", str(out), "--size", "1280x800", "--scale", "1", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    golden = os.path.join(GOLDEN, f"{layout}.png")
    # The bytecode panes list this interpreter's code: a version whose listing moves the layout
    # enough has its own reference (screenshots/3.13/...); the others share the 3.11 one.
    versioned = os.path.join(GOLDEN, "%d.%d" % sys.version_info[:2], f"{layout}.png")
    if os.path.exists(versioned):
        golden = versioned
    if os.environ.get("DYNVIEW_UPDATE_SCREENSHOTS"):
        os.makedirs(os.path.dirname(golden), exist_ok=True)
        shutil.copyfile(out, golden)
    w, h, bpp, rows = read_png(out)
    gw, gh, gbpp, grows = read_png(golden)
    assert (w, h) == (gw, gh) == (1280, 800)
    # Tolerance: paths, pointer addresses and timings differ between machines; the layout may not.
    differ = sum(1 for y in range(0, h, 2) for x in range(0, w, 2)
                 if max(abs(rows[y][x * bpp + c] - grows[y][x * gbpp + c]) for c in range(3)) > 48)
    frac = differ / ((h // 2) * (w // 2))
    assert frac < 0.03, f"{layout}: {frac:.2%} of pixels differ from {golden}"
    # Not blank: the panes drew text and boxes.
    assert len({rows[y][x * bpp:(x + 1) * bpp] for y in range(0, h, 16) for x in range(0, w, 16)}) > 8


def test_demo_fx_graph_is_readable_at_default_zoom(tmp_path):
    """The demo model's FX graph (~50 nodes): at the default zoom node labels are at least the UI
    font's pixel height, the view opens on the graph's top and follows the selected node."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("demo", os.path.join(HERE, "..", "..", "assets", "examples", "demo.py"))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    torch.manual_seed(0)
    dynview.reset()
    path = str(tmp_path / "demo.dyn")
    with dynview.record(path):
        dynview.compile(demo.TinyModel(), backend="eager")(torch.randn(2, 5, 32))
    dynview.reset()
    t = dynview.load_trace(path)
    nodes = t.compiles[0].graphs[0]["nodes"]
    assert len(nodes) >= 40
    last = nodes[-2]["name"]
    shot = tmp_path / "demo_graph.png"
    out = script(path, ["click compile 0", f"click node {last}", "zoom 2", "zoom 0.5", f"screenshot {shot}"], tmp_path)
    for o in out:  # zoomed out too: labels are clipped to their boxes, never shrunk
        v = o["state"]["graph_view"]
        assert v["label_px"] >= v["font_px"] > 0, (o["command"], v)
    assert out[1]["state"]["graph_view"]["selected_visible"] and out[2]["state"]["graph_view"]["selected_visible"]
    assert shot.exists()


def test_guards_pane_shows_the_file_of_each_guards_line(tmp_path):
    """A guard added inside an inlined function of another file says that file and its line
    (helper_mod.py:5), not a bare line number that reads as the compiled frame's file."""
    (tmp_path / "helper_mod.py").write_text("K = 3\n\n\ndef scale(x, n):\n    return x * K\n")
    (tmp_path / "main.py").write_text(
        "import torch, dynview\n"
        "from helper_mod import scale\n"
        "\n"
        "def f(x, n):\n"
        "    return scale(x, n) + n\n"
        "\n"
        "with dynview.record('g.dyn'):\n"
        "    dynview.compile(f, backend='eager')(torch.ones(3), 2)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "python"), str(tmp_path)]))
    env.pop("DYNVIEW_TRACE", None)
    p = subprocess.run([os.sys.executable, "main.py"], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    path = str(tmp_path / "g.dyn")
    state = script(path, ["print"], tmp_path)[0]["state"]
    rows = state["guards_shown"]
    k = [g for g in rows if "['K']" in g["text"]]  # made by the inlined scale()'s LOAD_GLOBAL K
    assert k and k[0]["where"] == "helper_mod.py:5" and k[0]["file"].endswith("helper_mod.py"), rows
    n = [g for g in rows if g["text"].startswith("L['n']")]  # made in f, by the + that reads n
    assert n and n[0]["where"] == "main.py:5" and n[0]["file"].endswith("main.py"), rows
    # the reports carry the file too
    ex = json.loads(subprocess.run([cli(), "explain", path, "--json"], capture_output=True, text=True, timeout=60).stdout)
    files = {g["text"]: g["filename"] for c in ex["compiles"] for g in c["guards"]}
    assert [v.rsplit("/", 1)[-1] for t, v in files.items() if "['K']" in t] == ["helper_mod.py"], files
