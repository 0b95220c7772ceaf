"""The graph-break table (core/break_ids.inc): every id the engine can emit is in it, the engine fills
the default hint, the reports (`dynview explain`/`check`/`stats`) and dynview.explain show titles,
and docs/graph-breaks.md is the table (`dynview break-ids --markdown`)."""
import json
import os
import re
import subprocess

import pytest
import torch

import dynview
from test_cli_disasm import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ID = re.compile(r'"(DV\d{4})"')


def table():
    return {b["id"]: b for b in dynview.break_ids()}


def run(*args):
    p = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (args, p.stderr)
    return p.stdout


def test_every_id_in_the_engine_is_in_the_table():
    # Translator::brk takes a BreakId checked at compile time; this also covers ids written as
    # strings anywhere else (Break::of, python/, recorder/).
    known = table()
    used = {}
    for folder in ("tracer", "python", "recorder"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".cpp", ".h", ".py")):
                    path = os.path.join(dirpath, name)
                    for i in ID.findall(open(path, encoding="utf-8").read()):
                        used.setdefault(i, path)
    assert len(used) >= 20
    assert {i: p for i, p in used.items() if i not in known} == {}


def test_table_shape_and_cli_agree():
    t = dynview.break_ids()
    assert [b["id"] for b in t] == [f"DV{n:04d}" for n in range(1, len(t) + 1)]
    assert all(b["title"] and b["hint"] for b in t)
    assert json.loads(run("break-ids", "--json")) == t
    text = run("break-ids")
    assert all(f"{b['id']}  {b['title']}\n        hint: {b['hint']}\n" in text for b in t)
    assert dynview.break_title("DV0002") == "data-dependent control flow" and dynview.break_title("GB0170") == ""


def test_doc_page_is_the_table():
    doc = open(os.path.join(ROOT, "docs", "graph-breaks.md"), encoding="utf-8").read()
    m = re.search(r"<!-- break-ids:begin[^\n]*-->\n(.*?)<!-- break-ids:end -->", doc, re.S)
    assert m, "docs/graph-breaks.md lost its break-ids markers"
    assert m.group(1) == run("break-ids", "--markdown"), "regenerate the table with `dynview break-ids --markdown`"
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "(docs/graph-breaks.md)" in readme


def fstring(x):
    return f"{x!r}"  # (an f-string of a tensor is made after the graph; its repr() is not)


def dict_get_by_list(x):
    d = {"a": x}
    return d.get([x], x)  # (a list is no key: eager raises TypeError)


def data_dependent(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@pytest.mark.parametrize("fn,break_id,site_hint", [
    (fstring, "DV0023", False),           # split from DV0007: an f-string of a tensor's repr()
    (dict_get_by_list, "DV0024", False),  # split from DV0018: a dict key that is not a hashable constant
    (data_dependent, "DV0002", True),     # its call site gives its own hint
])
def test_break_ids_and_default_hints(fn, break_id, site_hint):
    dynview.reset()
    with pytest.raises(dynview.Unsupported) as ei:
        dynview.compile(fn, backend="eager", fullgraph=True)(torch.ones(3))
    e = ei.value
    assert e.break_id == break_id, e.message
    assert e.title == table()[break_id]["title"] and str(e).startswith(f"{break_id} ({e.title}): {e.message}")
    assert e.hint
    assert (e.hint != table()[break_id]["hint"]) == site_hint  # no hint at the call site: the table's
    dynview.reset()


def test_explain_shows_titles(tmp_path):
    path = tmp_path / "run.dyn"
    dynview.reset()
    with dynview.record(str(path)):
        f = dynview.compile(data_dependent, backend="eager")
        f(torch.ones(3))
        f(-torch.ones(3))
    e = dynview.explain(data_dependent)(torch.ones(3))
    dynview.reset()
    assert e.break_reasons and e.break_reasons[0].title == "data-dependent control flow"
    assert "Reason: DV0002 (data-dependent control flow): " in str(e)

    text = run("explain", path)
    assert "graph break DV0002 (data-dependent control flow): " in text
    by_id = re.search(r"graph breaks by id:\n((?:  .*\n)+)", text)
    assert by_id and re.search(r"^\s+1\s+DV0002\s+data-dependent control flow$", by_id.group(1), re.M), text
    j = json.loads(run("explain", path, "--json"))
    assert [b["title"] for c in j["compiles"] for b in c["breaks"]] == ["data-dependent control flow"]
    assert j["breaks_by_id"] == [{"break_id": "DV0002", "title": "data-dependent control flow", "count": 1}]
    assert json.loads(run("check", path, "--json"))["breaks_by_id"] == j["breaks_by_id"]
    assert "DV0002   data-dependent control flow" in run("check", path)
    assert json.loads(run("stats", path, "--json"))["breaks_by_id"] == j["breaks_by_id"]
    assert "breaks     1 x DV0002 (data-dependent control flow)\n" in run("stats", path)
