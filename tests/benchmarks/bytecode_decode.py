"""Decode + disassemble the stdlib corpus with dynview's C++ core and with `dis`, in one run.

Corpus: every code object of the stdlib sources (tests excluded), compiled by this interpreter.
  decode:       dynview._C.decode_count(co)        vs  list(dis.get_instructions(co))
  disassemble:  dynview._C.disassemble(co, False)  vs  dis.dis(co, depth=0) into a StringIO
Each side runs the whole corpus; the best of REPEAT runs is kept. Last line is the headline:
decode_speedup_vs_dis = (dis decode + dis listing) / (dynview decode + dynview listing), on 3.11.

Then one line per other version found (CPython 3.12, 3.13; tests/python/other_pythons.py): that
interpreter compiles its own stdlib corpus and times its `dis` on it, and writes the code objects as
code JSON; dynview's core decodes and lists them here (dynview._C.time_json_corpus: JSON parsed
before the clock starts, so both sides time decode and listing only).
"""
import dis
import io
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import other_pythons  # noqa: E402
import stdlib_corpus  # noqa: E402
from dynview import _C  # noqa: E402

# Run by the other interpreter: time its dis over its corpus, write the corpus as code JSON lines.
OTHER = r"""
import dis, io, json, sys, time
sys.path.insert(0, sys.argv[1])
import bytecode_dump, stdlib_corpus
repeat = int(sys.argv[3])
codes = stdlib_corpus.all_codes(include_tests=False)
def best(fn):
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); t = min(t, time.perf_counter() - t0)
    return t
def decode():
    for co in codes:
        for _ in dis.get_instructions(co):
            pass
def listing():
    for co in codes:
        dis.dis(co, file=io.StringIO(), depth=0)
times = {"dis decode": best(decode), "dis listing": best(listing)}
with open(sys.argv[2], "w") as f:
    for co in codes:
        f.write(json.dumps(bytecode_dump.code_json(co, True, False)) + "\n")
print(json.dumps({"python": sys.version.split()[0], "codes": len(codes), **times}))
"""


def other_version_line(version, python):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "codes.jsonl")
        ref = json.loads(subprocess.run([python, "-c", OTHER, other_pythons.HERE, path, str(REPEAT)],
                                        capture_output=True, text=True, check=True).stdout)
        with open(path) as f:
            texts = f.read().splitlines()
    dec, lst, n_ins = _C.time_json_corpus(texts, REPEAT)
    speedup = (ref["dis decode"] + ref["dis listing"]) / (dec + lst)
    return (f"{version} (CPython {ref['python']}): {ref['codes']} code objects, {n_ins} instructions; "
            f"dynview decode {dec * 1e3:.1f} ms, listing {lst * 1e3:.1f} ms; dis decode "
            f"{ref['dis decode'] * 1e3:.1f} ms, listing {ref['dis listing'] * 1e3:.1f} ms; "
            f"decode_speedup_vs_dis {speedup:.1f}")

REPEAT = int(os.environ.get("DV_BENCH_REPEAT", "3"))


def best(fn, codes):
    t_best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn(codes)
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best


def dv_decode(codes):
    for co in codes:
        _C.decode_count(co)


def dis_decode(codes):
    for co in codes:
        for _ in dis.get_instructions(co):
            pass


def dv_listing(codes):
    for co in codes:
        _C.disassemble(co, False)


def dis_listing(codes):
    for co in codes:
        dis.dis(co, file=io.StringIO(), depth=0)


def main():
    codes = stdlib_corpus.all_codes(include_tests=False)
    n_ins = sum(_C.decode_count(c) for c in codes)
    print(f"corpus: {len(codes)} code objects, {n_ins} instructions; best of {REPEAT}")
    t = {}
    for name, fn in (("dynview decode", dv_decode), ("dis decode", dis_decode),
                     ("dynview listing", dv_listing), ("dis listing", dis_listing)):
        t[name] = best(fn, codes)
        print(f"{name:16s} {t[name] * 1e3:9.1f} ms  {t[name] / n_ins * 1e9:8.1f} ns/instruction")
    print(f"decode speedup:  {t['dis decode'] / t['dynview decode']:.1f}x")
    print(f"listing speedup: {t['dis listing'] / t['dynview listing']:.1f}x")
    total = (t["dis decode"] + t["dis listing"]) / (t["dynview decode"] + t["dynview listing"])
    print(f"3.11 (CPython {sys.version.split()[0]}): {len(codes)} code objects, {n_ins} instructions; "
          f"decode_speedup_vs_dis {total:.1f}")
    for version, python in other_pythons.found().items():
        print(other_version_line(version, python), flush=True)
    for version in sorted(set(other_pythons.OTHER_VERSIONS) - set(other_pythons.found())):
        print(f"{version}: not found, skipped")
    print(f"decode_speedup_vs_dis: {total:.1f}")


if __name__ == "__main__":
    main()
