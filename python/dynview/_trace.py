"""Recording .dyn traces and reading them back.

    with dynview.record("run.dyn"):      # or DYNVIEW_TRACE=run.dyn for the whole process
        model(x)
    t = dynview.load_trace("run.dyn")    # compiles, steps, values, guards, breaks, graphs, runtime

The format is core/TRACE.md; the reader is core's (the same code as the dynview executable).
"""
import atexit
import errno
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
    rank = os.environ.get("RANK", "")  # torchrun / torch.distributed: the viewer shows it beside the pid
    return json.dumps({**({"rank": int(rank)} if rank.isdigit() else {}),
        "format": "dynview trace",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "dynview": "0.1.0",
        "opcode_table": "cpython-%d.%d" % sys.version_info[:2],  # the steps' opcodes and offsets
        "argv": list(sys.argv),
        "pid": os.getpid(),
        "start_time": time.time(),
    })


def _process_path(spec):
    """Where this process records for a user-given path: `dir/` (or an existing directory) holds one
    trace per process, named by pid (and torch.distributed's RANK when set)."""
    if spec.endswith(os.sep) or os.path.isdir(spec):
        os.makedirs(spec, exist_ok=True)
        rank = os.environ.get("RANK")
        name = (f"rank{rank}-" if rank is not None else "") + f"pid{os.getpid()}.dyn"
        return os.path.join(spec, name)
    return spec


def _sibling(path):
    """run.dyn -> run.<pid>.dyn: the name a process records to when `path` is another's."""
    root, ext = os.path.splitext(path)
    return f"{root}.{os.getpid()}{ext or '.dyn'}"


_active = None  # the record running in this process


class record:
    """Context manager (or start/stop pair) that records every capture to `path`.

    Chunks are flushed when full, at each graph break and compile end, and at least every
    `flush_ms`, so a killed process loses at most the last chunk. `path` may be a directory (one
    trace per process in it). A path another live process is recording to is not overwritten:
    this process records to `run.<pid>.dyn` beside it and says so. A process forked while
    recording records on to its own file (`run.<pid>.dyn`, or its own name in the directory)."""

    def __init__(self, path, *, flush_ms=100, chunk_steps=32768):
        self.spec = os.fspath(path)
        if not isinstance(self.spec, str):
            raise TypeError(f"dynview.record: path must be str or os.PathLike[str], not {type(self.spec).__name__}")
        if isinstance(flush_ms, bool) or not isinstance(flush_ms, int) or not 1 <= flush_ms <= 3_600_000:
            raise ValueError(f"dynview.record: flush_ms must be an int from 1 to 3600000 (ms), got {flush_ms!r}")
        if isinstance(chunk_steps, bool) or not isinstance(chunk_steps, int) or not 1 <= chunk_steps <= 1 << 24:
            raise ValueError(f"dynview.record: chunk_steps must be an int from 1 to {1 << 24}, got {chunk_steps!r}")
        self.path = self.spec
        self.env = False  # started by DYNVIEW_TRACE
        self.flush_ms = flush_ms
        self.chunk_steps = chunk_steps
        self.stats = None

    def start(self):
        global _active
        from ._engine import _ensure_installed
        _ensure_installed()
        if _C._record_stats() is not None:  # one recording per process: say which one wins
            where = _active.path if _active is not None else _C._record_stats()["path"]
            env = " (DYNVIEW_TRACE)" if _active is not None and _active.env else ""
            raise RuntimeError(f"dynview is already recording to {where}{env}; captures go there, not to "
                               f"{self.spec} (one recording per process)")
        self.path = _process_path(self.spec)
        try:
            _C._record_start(self.path, _meta(), self.flush_ms, self.chunk_steps)
        except BlockingIOError:
            alt = _sibling(self.path)
            sys.stderr.write(f"dynview: {self.path} is being written by another process; recording to {alt}\n")
            _C._record_start(alt, _meta(), self.flush_ms, self.chunk_steps)
            self.path = alt
        _active = self
        return self

    def stop(self):
        global _active
        if _active is self:
            _active = None
        self.stats = _C._record_stop()
        if self.stats and self.stats["error"]:
            raise OSError(f"dynview: writing {self.path} failed: {self.stats['error']}; the trace is incomplete")
        return self.stats

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _stop_at_exit(rec):
    """DYNVIEW_TRACE's end of process: a failed trace is one warning line, not a traceback."""
    try:
        rec.stop()
    except OSError as e:
        sys.stderr.write(f"{e}\n")


def _setup_env_trace():
    path = os.environ.get("DYNVIEW_TRACE")
    if not path or _C._record_stats() is not None:
        return
    rec = record(path)
    rec.env = True
    try:
        rec.start()
    except OSError as e:
        sys.stderr.write(f"dynview: DYNVIEW_TRACE={path}: cannot record ({e}); this process is not recorded\n")
        return
    atexit.register(_stop_at_exit, rec)


def _before_fork():
    _C._record_fork_prepare()


def _after_fork_in_parent():
    _C._record_fork_parent()


def _after_fork_in_child():
    """The child never writes the parent's file: it records on to its own."""
    global _active
    settings = _C._record_fork_child()
    rec = _active
    if settings is None or rec is None:
        return
    parent_path = rec.path
    rec.path = _process_path(rec.spec)
    if rec.path == parent_path:
        rec.path = _sibling(rec.spec)
    try:
        _C._record_start(rec.path, _meta(), rec.flush_ms, rec.chunk_steps)
    except OSError as e:
        _active = None
        sys.stderr.write(f"dynview: forked process {os.getpid()} is not recorded: {e}\n")
        return
    # multiprocessing's forked workers end with os._exit (no atexit): threading's shutdown hook
    # still runs there, so the child's trace gets its footer.
    try:
        import threading
        threading._register_atexit(_stop_at_exit, rec)
    except Exception:  # noqa: BLE001 (a private hook; atexit below still covers ordinary exits)
        pass
    atexit.register(_stop_at_exit, rec)


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


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
    version: str = "3.11"  # the CPython version of the step's code (its opcode numbers are that version's)

    @property
    def opname(self):
        return _opnames(self.version)[self.opcode]


_OPNAMES = {}


def _opnames(version):
    """Opcode number -> name in `version`'s table (core's, so a trace of any version reads the same
    on every interpreter; "<N>" for numbers that version does not use, as dis.opname)."""
    names = _OPNAMES.get(version)
    if names is None:
        names = [f"<{i}>" for i in range(256)]
        for row in _C.opcode_table(version):
            names[row["opcode"]] = row["name"]
        _OPNAMES[version] = names
    return names


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

    def code_version(self, code_id):
        """The CPython version ("3.12") of a recorded code object (3.11: recorded before versions were)."""
        co = self.codes.get(code_id, {}).get("json")  # core's code JSON text
        try:
            co = json.loads(co) if isinstance(co, str) else None
        except ValueError:
            co = None
        v = co.get("version") if isinstance(co, dict) else None
        return v if v in _C.VERSIONS else "3.11"

    def _decode(self):
        steps, values = [], {}
        versions = {}
        for k in range(len(self.chunks)):
            s, v = self._f.chunk(k)
            for t in s:
                st = Step(*t)
                if st.code not in versions:
                    versions[st.code] = self.code_version(st.code)
                st.version = versions[st.code]
                steps.append(st)
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
    a readable trace, FileNotFoundError for a missing one; a damaged tail is listed in `.problems`
    and the intact prefix is returned."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such trace file", path)
    return Trace(path)
