"""Decode + disassemble the stdlib corpus with dynview's C++ core and with `dis`, in one run.

Corpus: every code object of the stdlib sources (tests excluded), compiled by this interpreter.
  decode:       dynview._C.decode_count(co)        vs  list(dis.get_instructions(co))
  disassemble:  dynview._C.disassemble(co, False)  vs  dis.dis(co, depth=0) into a StringIO
Each side runs the whole corpus; the best of REPEAT runs is kept. Last line is the headline:
decode_speedup_vs_dis = (dis decode + dis listing) / (dynview decode + dynview listing).
"""
import dis
import io
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import stdlib_corpus  # noqa: E402
from dynview import _C  # noqa: E402

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
    print(f"decode_speedup_vs_dis: {total:.1f}")


if __name__ == "__main__":
    main()
