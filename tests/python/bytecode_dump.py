"""Dump the stdlib bytecode corpus of the interpreter running this script, with what `dis` says.

Run by tests/python/test_bytecode_corpus.py (and the decode benchmark) under CPython 3.12 and 3.13,
for which dynview._C is not built: the 3.11 suite reads the dump and checks core/ against it.

    pythonX.Y tests/python/bytecode_dump.py OUT [--every K] [--modules M]

Every code object of every stdlib file (tests included), as the interpreter compiled it (its
__pycache__ .pyc when it matches the source, as import would use it; else compile()), is written as
one line of OUT: the code JSON that core/ reads (`dynview disasm` format, "version" included), a
tab, then the reference: null, or for a sample (every K-th code object, plus the first code object
holding each opcode that the sample has not met yet) dis.get_instructions' fields, the
dis.dis(depth=0) listing and the exception table. The last M lines are module code objects with
their nested code and the recursive dis.dis listing. The first line says what was dumped.
"""
import dis
import importlib.util
import io
import json
import marshal
import opcode
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stdlib_corpus  # noqa: E402

VERSION = "%d.%d" % sys.version_info[:2]
JUMPS = set(opcode.hasjrel) | set(opcode.hasjabs)


def load(path):
    """The module code object, as import would get it: from a matching .pyc, else compiled."""
    st = os.stat(path)
    try:
        with open(importlib.util.cache_from_source(path), "rb") as f:
            data = f.read()
        flags = int.from_bytes(data[4:8], "little")
        if (flags == 0 and int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF):
            return marshal.loads(data[16:])
    except OSError:
        pass
    with open(path, "rb") as f:
        return compile(f.read(), path, "exec", dont_inherit=True)


def localsplus(co):
    out = []
    while True:
        try:
            out.append(co._varname_from_oparg(len(out)))
        except (IndexError, ValueError):
            return out


def code_json(co, reprs, nested):
    consts = co.co_consts
    rec = {"version": VERSION, "name": co.co_name, "qualname": co.co_qualname,
           "filename": co.co_filename, "firstlineno": co.co_firstlineno, "argcount": co.co_argcount,
           "posonlyargcount": co.co_posonlyargcount, "kwonlyargcount": co.co_kwonlyargcount,
           "flags": co.co_flags, "stacksize": co.co_stacksize, "code": co.co_code.hex(),
           "linetable": co.co_linetable.hex(), "exceptiontable": co.co_exceptiontable.hex(),
           "names": list(co.co_names), "localsplusnames": localsplus(co),
           "const_reprs": [repr(c) for c in consts] if reprs else [""] * len(consts),
           "repr": repr(co) if reprs else ""}
    if nested:
        kids = [c for c in consts if hasattr(c, "co_code")]
        rec["nested"] = [code_json(k, True, True) for k in kids]
        ids = iter(range(len(kids)))
        rec["const_code"] = [next(ids) if hasattr(c, "co_code") else -1 for c in consts]
    return rec


def reference(co):
    ins = []
    for i in dis.get_instructions(co):
        if VERSION == "3.13":
            ins.append((i.opname, i.opcode, i.arg, i.argrepr, i.offset, i.starts_line, i.line_number,
                        i.is_jump_target, tuple(i.positions), i.jump_target))
        else:
            ins.append((i.opname, i.opcode, i.arg, i.argrepr, i.offset, i.starts_line, None,
                        i.is_jump_target, tuple(i.positions), i.argval if i.opcode in JUMPS else None))
    buf = io.StringIO()
    dis.dis(co, file=buf, depth=0)
    return {"instructions": ins, "listing": buf.getvalue(),
            "exception_table": [tuple(e) for e in dis._parse_exception_table(co)]}


def main():
    out_path = sys.argv[1]
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1
    n_modules = int(sys.argv[sys.argv.index("--modules") + 1]) if "--modules" in sys.argv else 0
    modules = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in stdlib_corpus.stdlib_files(include_tests=True):
            try:
                modules.append(load(path))
            except (SyntaxError, ValueError, UnicodeDecodeError):
                continue  # lib2to3/test data files written in other Python versions
    seen = set()
    n = sampled = 0
    with open(out_path, "w") as out:
        lines = []
        for m in modules:
            for co in stdlib_corpus.walk(m):
                ops = set(co.co_code[::2])
                take = n % every == 0 or not ops <= seen
                if take:
                    seen |= ops
                    sampled += 1
                lines.append(json.dumps(code_json(co, take, False)) + "\t" +
                             (json.dumps(reference(co)) if take else "null"))
                n += 1
        step = max(1, len(modules) // n_modules) if n_modules else 0
        mods = modules[::step][:n_modules] if n_modules else []
        for m in mods:
            buf = io.StringIO()
            dis.dis(m, file=buf)
            lines.append(json.dumps(code_json(m, True, True)) + "\t" + json.dumps({"recursive_listing": buf.getvalue()}))
        out.write(json.dumps({"version": VERSION, "python": sys.version.split()[0], "files": len(modules),
                              "code_objects": n, "sampled": sampled, "modules": len(mods),
                              "opcodes": sorted(opcode.opname[o] for o in seen)}) + "\n")
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
