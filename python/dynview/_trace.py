"""Recording .dyn traces and reading them back.

    with dynview.record("run.dyn"):      # or DYNVIEW_TRACE=run.dyn for the whole process
        model(x)
    t = dynview.load_trace("run.dyn")    # compiles, steps, values, guards, breaks, graphs, runtime

The format is core/TRACE.md; the reader is core's (the same code as the dynview executable).
"""
import atexit
import dis
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

from . import _C

__all__ = ["record", "load_trace", "Trace"]


def _meta():
    import torch
    return json.dumps({
        "format": "dynview trace",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "dynview": "0.1.0",
        "opcode_table": "cpython-3.11",
        "argv": list(sys.argv),
        "pid": os.getpid(),
        "start_time": time.time(),
    })


class record:
    """Context manager (or decorator-free start/stop pair) that records every capture to `path`.

    Chunks are flushed when full, at each graph break and compile end, and at least every 100 ms,
    so a killed process loses at most the last chunk."""

    def __init__(self, path, *, flush_ms=100, chunk_steps=32768):
        self.path = os.fspath(path)
        self.flush_ms = flush_ms
        self.chunk_steps = chunk_steps
        self.stats = None

    def start(self):
        from ._engine import _ensure_installed
        _ensure_installed()
        _C._record_start(self.path, _meta(), self.flush_ms, self.chunk_steps)
        return self

    def stop(self):
        self.stats = _C._record_stop()
        if self.stats and self.stats["error"]:
            raise OSError(f"dynview: writing {self.path} failed: {self.stats['error']}")
        return self.stats

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _setup_env_trace():
    path = os.environ.get("DYNVIEW_TRACE")
    if not path or _C._record_stats() is not None:
        return
    rec = record(path)
    rec.start()
    atexit.register(rec.stop)


@dataclass
class Step:
    index: int
    compile: int
    depth: int
    frame_start: bool
    code: int
    offset: int
    opcode: int
    arg: Optional[int]
    line: int
    stack: tuple           # value ids after the step, bottom first
    locals_changed: tuple  # ((slot, value id), ...)

    @property
    def opname(self):
        return dis.opname[self.opcode]


@dataclass
class Compile:
    index: int
    id: str                # "frame/recompile", as TorchDynamo prints it inside [...]
    qualname: str
    filename: str
    firstlineno: int
    reason: str
    code: int
    first_step: int
    steps: int = 0
    outcome: str = ""
    seconds: float = 0.0
    guards: list = field(default_factory=list)
    breaks: list = field(default_factory=list)
    graphs: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    generated: list = field(default_factory=list)


class Trace:
    """A trace read back: plain Python objects over core's reader."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._f = _C.TraceFile(self.path)
        self.meta = json.loads(self._f.meta())
        self.version = self._f.version()
        self.problems: List[tuple] = list(self._f.problems())  # (what, byte offset)
        self.events = json.loads(self._f.events())
        self.num_steps = self._f.num_steps()
        self.chunks = self._f.chunks()
        self.compiles: List[Compile] = []
        self.codes = {}
        self.runtime = []
        self.sources = {}  # filename -> {line number: text} of the recorded functions' source
        for ev in self.events:
            t = ev["t"]
            if t == "code":
                self.codes[ev["id"]] = ev
            elif t == "source":
                lines = self.sources.setdefault(ev["filename"], {})
                for i, text in enumerate(ev["lines"]):
                    lines[ev["first"] + i] = text
            elif t == "compile_start":
                self.compiles.append(Compile(ev["c"], ev["id"], ev["qualname"], ev["filename"], ev["firstlineno"],
                                             ev["reason"], ev["code"], ev["step"]))
            elif t == "cache":
                self.runtime.append(ev)
            elif t in ("compile_end", "guard", "break", "graph", "node", "gen_code"):
                c = ev.get("c", -1)
                if not (0 <= c < len(self.compiles)):
                    continue
                comp = self.compiles[c]
                if t == "compile_end":
                    comp.outcome, comp.seconds, comp.steps = ev["outcome"], ev["seconds"], ev["steps"]
                else:
                    {"guard": comp.guards, "break": comp.breaks, "graph": comp.graphs, "node": comp.nodes,
                     "gen_code": comp.generated}[t].append(ev)
        self._steps = None
        self._values = None

    def _decode(self):
        steps, values = [], {}
        for k in range(len(self.chunks)):
            s, v = self._f.chunk(k)
            steps.extend(Step(*t) for t in s)
            for d in v:
                values[(d["compile"], d["id"])] = d
        self._steps, self._values = steps, values

    @property
    def steps(self) -> List[Step]:
        """Every step, in order (decodes every chunk on first use)."""
        if self._steps is None:
            self._decode()
        return self._steps

    @property
    def values(self) -> dict:
        """(compile index, value id) -> {kind, repr, type, source, meta, node, step}."""
        if self._values is None:
            self._decode()
        return self._values

    @property
    def guards(self):
        return [g for c in self.compiles for g in c.guards]

    @property
    def breaks(self):
        return [b for c in self.compiles for b in c.breaks]

    @property
    def graphs(self):
        return [g for c in self.compiles for g in c.graphs]

    def state(self, step):
        """Frames after `step`, outermost first: [(code id, stack value ids, locals value ids)]."""
        return self._f.state(step)

    def hits(self):
        """Cache hits per entry: {compile index of the entry: count}."""
        out = {}
        for ev in self.runtime:
            if ev["kind"] == "hit":
                out[ev["entry_c"]] = out.get(ev["entry_c"], 0) + ev["count"]
        return out


def load_trace(path) -> Trace:
    """Reads a .dyn trace. Raises ValueError naming what is wrong and where for a file that is not
    a readable trace; a damaged tail is listed in `.problems` and the intact prefix is returned."""
    return Trace(path)
