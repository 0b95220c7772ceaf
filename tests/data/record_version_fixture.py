"""Records tests/data/recorded-cpython-X.Y.dyn and the truth beside it (recorded-cpython-X.Y.json) on
the interpreter that runs it, so that a machine with one CPython still reads traces of the others
(tests/python/test_trace_versions.py). The truth comes from that interpreter, not from dynview's
readers: dis.dis of each code object the trace holds (taken live: the function, the transformed code
and the resume functions it calls), dis.get_instructions' name at each step's offset, and what
dynview.explain counted. Regenerate on each version, with its dynview._C built (make test builds them):
    .venv-3.12/bin/python tests/data/record_version_fixture.py  # likewise .venv-3.13; python3 for 3.11
run from the repository root (the recorded code is filed under its path from there).
"""
import dis
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

import dynview  # noqa: E402


def sample(x, y):
    w = [x.sin() + k for k in range(2)]  # a comprehension (inlined into the frame on 3.12+)
    z = w[0] + w[1] + y
    if z.sum() > 0:  # data-dependent: a graph break and a resume function per branch
        z = z * 2
    return z.cos()


# The traces and listings name the recorded code's file: compiled here under its path from the
# repository root (run from there), so that no machine's absolute path is recorded.
REL = "tests/data/record_version_fixture.py"
if __name__ == "__main__":
    _ns = {"__name__": "record_version_fixture_relative", "__file__": __file__}
    with open(__file__) as _f:
        exec(compile(_f.read(), REL, "exec"), _ns)
    sample = _ns["sample"]  # noqa: F811  (the same function, its code filed under REL)


def listing(co):
    buf = io.StringIO()
    dis.dis(co, file=buf)
    return buf.getvalue()


def run_collecting_codes(fn, *args):
    """Calls fn and returns every code object that ran in a Python frame (sys.setprofile 'call')."""
    seen = {}

    def profile(frame, event, arg):
        if event == "call":
            seen.setdefault(id(frame.f_code), frame.f_code)

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return list(seen.values())


def main():
    version = "%d.%d" % sys.version_info[:2]
    path = os.path.join(HERE, f"recorded-cpython-{version}.dyn")
    if os.path.exists(path):
        os.remove(path)
    x, y = torch.ones(3), torch.ones(3)
    dynview.reset()
    with dynview.record(path):
        cf = dynview.compile(sample, backend="eager")
        cf(x, y)  # compiles the function and the resume function of the branch taken
        cf(x, y)  # a cache hit
    ran = run_collecting_codes(cf, x, y)  # another hit, unrecorded: runs the transformed codes
    # The code objects the trace should hold, live: the function, the transformed codes that ran,
    # and the resume functions a transformed code calls (constants of it).
    live = {sample.__code__.co_qualname: sample.__code__}
    for co in ran:
        if co.co_qualname.startswith("__transformed_code_"):
            live[co.co_qualname] = co
            for c in co.co_consts:
                fc = getattr(c, "__code__", None)
                if fc is not None and fc.co_qualname.startswith("__resume_at_"):
                    live[fc.co_qualname] = fc
    for co in list(live.values()):  # nested code (3.11's comprehension, inlined in the trace)
        for c in co.co_consts:
            if isinstance(c, type(co)):
                live[c.co_qualname] = c
    ex = dynview.explain(sample)(x, y)

    t = dynview.load_trace(path)
    names = {}  # qualname -> {offset: opname} from this interpreter's dis
    for q, co in live.items():
        names[q] = {i.offset: i.opname for i in dis.get_instructions(co)}
    steps = []
    for s in t.steps:
        q = t.codes[s.code]["qualname"]
        steps.append([q, s.depth, s.offset, s.opcode, names[q][s.offset], dis.opname[s.opcode], s.line])
    truth = {
        "python": sys.version.split()[0],
        "version": version,
        "torch": torch.__version__,
        "regenerate": f"tests/data/record_version_fixture.py run by CPython {version} (see its head)",
        "listings": {q: listing(co) for q, co in live.items()},
        "steps": steps,
        "compiles": [[c.id, c.qualname, c.outcome] for c in t.compiles],
        "breaks": [b["break_id"] for b in t.breaks],
        "guards": [g["text"] for g in t.guards],
        "explain": {"graph_count": ex.graph_count, "graph_break_count": ex.graph_break_count,
                    "ops_per_graph": [len(o) for o in ex.ops_per_graph]},
    }
    dynview.reset()
    with open(path[:-4] + ".json", "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes), {len(steps)} steps, codes {sorted(live)}")


if __name__ == "__main__":
    main()
