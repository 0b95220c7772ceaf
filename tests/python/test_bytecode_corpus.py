"""core/'s decoder, disassembler and assembler against `dis` over the whole stdlib corpus.

Every code object of every stdlib source file (tests included: ~78k code objects) is decoded,
listed and re-assembled; each must equal what CPython and `dis` say, field by field. `dis` (pure
Python, most of the time) is asked on every code object of the library itself (~21k on 3.11) and on
a sample of the stdlib's own test suites' (~57k): see DIS_EVERY; in the secondary runs on 3.12 and
3.13, on a sample of both.

The same on CPython 3.12 and 3.13 when they are installed (test_other_version_corpus): that
interpreter dumps its own stdlib corpus by subprocess (bytecode_dump.py: code JSON plus what `dis`
says), and core/ reads the code JSON as `dynview disasm` does. Every code object is decoded and
re-assembled; dis's fields and listings are compared on a sample (every 20th code object plus the
first one holding each opcode the sample had not met, so every opcode of the corpus is covered)
to keep the suite fast.

Documented freedom: co_stacksize. CPython's compiler computes the stack depth before it removes
handlers whose protected range turned out empty, so it can count blocks that are unreachable in the
final code. dynview computes the exact maximum over the reachable control-flow graph, which is never
larger. Those code objects are counted; test_stacksize_freedom_executes_identically runs the same
patterns with both stack sizes.
"""
import dis
import io
import json
import os
import types

import pytest

import other_pythons
import stdlib_corpus
from dynview import _C


@pytest.fixture(scope="module")
def corpus():
    return stdlib_corpus.module_codes(include_tests=True)


def same_value(a, b):
    return a is b or a == b or (a != a and b != b)


# Every code object is decoded, listed and re-assembled. `dis` (pure Python: 80% of this test's time)
# is asked on every DIS_EVERY-th code object plus the first one holding each opcode not met yet: 1 for
# the library itself on the main interpreter, 5 for the stdlib's test suites (`dis` over all of them
# took 100 s of each `make test`), and 5 for everything in the secondary runs (.ci/other_pythons.sh
# runs this suite on 3.12 and 3.13 after the main interpreter's run, whose test_other_version_corpus
# already decoded and re-assembled their whole corpus by subprocess and compared dis on a sample).
SECONDARY = os.environ.get("DV_SECONDARY_RUN") == "1"
DIS_EVERY, DIS_EVERY_IN_TESTS = (5, 5) if SECONDARY else (1, 5)


def test_whole_stdlib_corpus(corpus, report):
    n = sampled = 0
    failures = {}
    stack_freedom = 0
    fields_checked = 0
    opcodes_seen = set()

    def fail(kind, co, detail=""):
        failures.setdefault(kind, []).append(f"{co.co_filename}:{co.co_firstlineno} {co.co_qualname} {detail}")

    seen = {False: 0, True: 0}  # code objects of the library itself, of its test suites
    for module in corpus:
        in_tests = stdlib_corpus.is_test_file(module.co_filename)
        every = DIS_EVERY_IN_TESTS if in_tests else DIS_EVERY
        for co in stdlib_corpus.walk(module):
            n += 1
            seen[in_tests] += 1
            ours = _C.instructions(co)
            re = _C.reassemble(co)
            for f in ("co_code", "co_linetable", "co_exceptiontable"):
                if getattr(re, f) != getattr(co, f):
                    fail(f, co)
            if re.co_stacksize != co.co_stacksize:
                if re.co_stacksize < co.co_stacksize:
                    stack_freedom += 1
                else:
                    fail("co_stacksize larger than CPython's", co, f"{re.co_stacksize} > {co.co_stacksize}")
            listing = _C.disassemble(co, False)
            new_ops = {a[0] for a in ours} - opcodes_seen
            if (seen[in_tests] - 1) % every and not new_ops:
                continue
            opcodes_seen |= new_ops
            sampled += 1
            theirs = list(dis.get_instructions(co))
            if len(ours) != len(theirs):
                fail("instruction count", co)
            for a, b in zip(ours, theirs):
                ref = (b.opname, b.opcode, b.arg, b.argrepr, b.offset, b.starts_line, b.is_jump_target,
                       tuple(b.positions))
                got = (a[0], a[1], a[2], a[4], a[5], a[6], a[7], tuple(a[8]))
                fields_checked += 8
                if got != ref:
                    fail("instruction", co, f"{got} != {ref}")
                    break
                if b.opname != "KW_NAMES" and not same_value(a[3], b.argval):  # dis: UNKNOWN
                    fail("argval", co, f"{a[3]!r} != {b.argval!r}")
                    break
            if [tuple(e) for e in _C.exception_table(co)] != [tuple(e) for e in dis._parse_exception_table(co)]:
                fail("exception table", co)
            buf = io.StringIO()
            dis.dis(co, file=buf, depth=0)
            if listing != buf.getvalue():
                fail("listing", co)
    library = seen[False]
    report(f"bytecode corpus: {n} code objects from {len(corpus)} stdlib files; "
           f"{fields_checked} instruction fields compared against dis on "
           f"{'all' if sampled == n else f'{sampled}'} code objects "
           f"({'every one of the library' if DIS_EVERY == 1 else f'a 1/{DIS_EVERY} sample of the library'}'s "
           f"{library}, a 1/{DIS_EVERY_IN_TESTS} sample of its test suites' {n - library}, and the first holding each opcode); "
           f"{n - stack_freedom}/{n} byte-identical incl. co_stacksize, {stack_freedom} smaller "
           f"co_stacksize (documented freedom: unreachable handlers); failures: "
           f"{sum(len(v) for v in failures.values())}")
    assert n > 50000 and library > 15000 and sampled >= library // DIS_EVERY + (n - library) // DIS_EVERY_IN_TESTS
    assert not failures, {k: v[:5] for k, v in failures.items()}


def test_recursive_listing_equals_dis_dis(corpus):
    checked = 0
    for module in corpus[::10]:
        buf = io.StringIO()
        dis.dis(module, file=buf)
        assert _C.disassemble(module) == buf.getvalue(), module.co_filename
        checked += 1
    assert checked > 100


def _patterns():
    def try_pass_except():
        try:
            pass
        except Exception:
            return 2
        return 1

    def in_finally_normal():
        try:
            x = 1
        finally:
            return x + 1

    def loop_continue_in_try(n):
        out = []
        for i in range(n):
            try:
                continue
            finally:
                out.append(i)
        return out

    def try_except_else_finally(a):
        try:
            pass
        except ZeroDivisionError:
            a = 0
        else:
            a = a * 2
        finally:
            a += 1
        return a

    def assert_in_function(v):
        assert v, "needs v"
        return v

    def nested_try(a):
        try:
            try:
                pass
            except KeyError:
                return -1
            else:
                return a
        finally:
            a += 1

    return [(try_pass_except, ()), (in_finally_normal, ()), (loop_continue_in_try, (5,)),
            (try_except_else_finally, (3,)), (assert_in_function, (7,)), (assert_in_function, (0,)),
            (nested_try, (4,))]


def _call(f, args):
    try:
        return ("ok", f(*args))
    except Exception as e:  # compare exceptions like results
        return ("raise", type(e), str(e))


def test_stacksize_freedom_executes_identically(report):
    smaller = 0
    for f, args in _patterns():
        re = _C.reassemble(f.__code__)
        assert re.co_code == f.__code__.co_code
        assert re.co_stacksize <= f.__code__.co_stacksize
        smaller += re.co_stacksize < f.__code__.co_stacksize
        g = types.FunctionType(re, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
        assert _call(g, args) == _call(f, args)
    report(f"stack-size freedom: {smaller} of {len(_patterns())} hand patterns get a smaller, exact "
           f"co_stacksize and run identically")
    assert smaller >= 2


@pytest.mark.cross_version
@pytest.mark.parametrize("version", other_pythons.OTHER_VERSIONS)
def test_other_version_corpus(version, tmp_path, report):
    python = other_pythons.find(version)
    if not python:
        pytest.skip(f"CPython {version} not found (set DYNVIEW_PYTHON_{version.replace('.', '_')})")
    header, records = other_pythons.dump_corpus(python, tmp_path / "corpus.jsonl")
    assert header["version"] == version
    failures = {}
    n = sampled = fields = stack_freedom = recursive = 0
    opcodes = set()

    def fail(kind, code, detail=""):
        c = json.loads(code)
        failures.setdefault(kind, []).append(f"{c['filename']}:{c['firstlineno']} {c['qualname']} {detail}")

    for code, ref_text in records:
        ref = json.loads(ref_text)
        if ref and "recursive_listing" in ref:
            recursive += 1
            if _C.from_json(code, True)["listing"] != ref["recursive_listing"]:
                fail("recursive listing", code)
            continue
        n += 1
        ours = _C.from_json(code, False, ref is not None)
        orig, re = ours["original"], ours["reassembled"]
        for f in ("code", "linetable", "exceptiontable"):
            if re[f] != orig[f]:
                fail(f"co_{f}", code)
        if re["stacksize"] != orig["stacksize"]:
            if re["stacksize"] < orig["stacksize"]:
                stack_freedom += 1
            else:
                fail("co_stacksize larger than CPython's", code, f"{re['stacksize']} > {orig['stacksize']}")
        if ref is None:
            continue
        sampled += 1
        if len(ours["instructions"]) != len(ref["instructions"]):
            fail("instruction count", code)
        for a, b in zip(ours["instructions"], ref["instructions"]):
            b = list(b)
            b[8] = tuple(b[8])
            got = list(a[:10])
            if version != "3.13":
                got[6] = None  # line_number is 3.13's field
            fields += 10
            opcodes.add(a[0])
            if got != b:
                fail("instruction", code, f"{got} != {b}")
                break
        if [list(e) for e in ours["exception_table"]] != ref["exception_table"]:
            fail("exception table", code)
        if ours["listing"] != ref["listing"]:
            fail("listing", code)
    report(f"bytecode corpus {version} (CPython {header['python']}, by subprocess): {n} code objects from "
           f"{header['files']} stdlib files decoded and re-assembled; {n - stack_freedom}/{n} byte-identical "
           f"incl. co_stacksize, {stack_freedom} smaller co_stacksize (documented freedom); dis fields and "
           f"listing compared on {sampled} sampled code objects ({fields} instruction fields, "
           f"{len(opcodes)} distinct opcodes = every opcode of the corpus) and {recursive} recursive "
           f"module listings; failures: {sum(len(v) for v in failures.values())}")
    assert n > 50000 and sampled > 2000 and recursive > 0
    assert set(header["opcodes"]) <= opcodes | {"CACHE"}, set(header["opcodes"]) - opcodes
    assert not failures, {k: v[:5] for k, v in failures.items()}
