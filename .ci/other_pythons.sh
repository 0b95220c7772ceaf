#!/usr/bin/env bash
# The Python suite on every other supported CPython (3.12, 3.13) this machine has: for each, a venv
# (.venv-X.Y, created once, with torch==2.13.0 and the test deps), dynview._C built for it alone
# (build-X.Y; no viewer or C++ tests: those do not depend on Python) into python/dynview beside the
# main interpreter's (_C.cpython-3XY-*.so: each interpreter loads its own), and the same pytest run
# as for the main interpreter, with the viewer built beside it. Used by `make test`.
# Prints which versions ran. REQUIRE_ALL=1 (CI) fails when one of them is missing.
# `other_pythons.sh demo 3.12`: the same set-up for one version, then the demo on it (make demo).
set -euo pipefail
mode=${1:-test}
versions="3.12 3.13"
if [ "$mode" = demo ]; then versions=$2; fi
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3}
ran=()
missing=()
for v in $versions; do
  exe=$("$PYTHON" -c "import sys; sys.path.insert(0, 'tests/python'); import other_pythons as o; print(o.find('$v') or '')")
  if [ -z "$exe" ]; then
    missing+=("$v")
    continue
  fi
  venv=.venv-$v
  if [ ! -x "$venv/bin/python" ]; then
    echo "== $v: creating $venv with torch==2.13.0 (first run only)"
    "$exe" -m venv "$venv"
  fi
  PYTHON="$ROOT/$venv/bin/python" bash .ci/deps.sh  # torch==2.13.0 and the test deps, as for python3
  bdir=$BUILD-$v
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF -DDV_PREBUILT_LIBS_DIR="$ROOT/$BUILD" \
      -DDV_PY_PACKAGE_DIR="$ROOT/python/dynview" -DPython3_EXECUTABLE="$ROOT/$venv/bin/python" \
      > "$bdir.configure.log" 2>&1 || { cat "$bdir.configure.log"; exit 1; }
  cmake --build "$bdir" -j"$JOBS" --target _C
  if [ "$mode" = demo ]; then
    DYNVIEW_BIN="$ROOT/$BUILD/dynview" PYTHONPATH="$ROOT/python" "$venv/bin/python" assets/examples/demo.py
    exit
  fi
  echo "== Python $v: tests/python"
  PYTHONPATH="$ROOT/python:$ROOT/tests/python" DYNVIEW_BIN="$ROOT/$BUILD/dynview" \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python
  ran+=("$v")
done
if [ "$mode" = demo ]; then echo "error: CPython $versions not found" >&2; exit 1; fi
main=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
echo "make test: the suite ran on CPython $main ${ran[*]}${missing:+ (not found: ${missing[*]})}"
if [ "${REQUIRE_ALL:-0}" = 1 ] && [ ${#missing[@]} -gt 0 ]; then
  echo "error: CPython ${missing[*]} not found (CI requires 3.11, 3.12 and 3.13)" >&2
  exit 1
fi
