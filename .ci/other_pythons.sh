#!/usr/bin/env bash
# The Python suite on every other supported CPython (3.11, 3.12, 3.13 but the one running `make test`)
# this machine has: for each, a venv (.venv-X.Y, created once, with torch==2.13.0 and the test deps
# from .ci/deps.sh), dynview._C built for it alone (build-X.Y; no viewer or C++ tests: those do not
# depend on Python) into python/dynview beside the main interpreter's (_C.cpython-3XY-*.so: each
# interpreter loads its own), and the same pytest run as for the main interpreter, with the viewer
# built beside it, minus the cross_version tests (tests/python/conftest.py: they run other
# interpreters by subprocess, which the main suite did for every version) and the
# main_interpreter_only ones (the viewer, the CLI's errors, TORCH_TRACE import, killed recordings:
# what they check is the executable and core/), and with the slowest comparisons shared out among all
# the versions (DV_SHARE, marker shared_by_versions); DV_SECONDARY_RUN=1 tells test_bytecode_corpus.py to
# ask `dis` on a sample of the corpus it still re-assembles whole.
# Used by `make test`.
# Prints which versions ran. REQUIRE_ALL=1 (CI) fails when one of 3.11, 3.12, 3.13 is missing.
#   other_pythons.sh [test]    the above
#   other_pythons.sh venvs     only the venvs (.ci/run starts this first, in the background: the
#                              downloads overlap the main build; `test` waits for it per venv)
#   other_pythons.sh build     the venvs and each one's dynview._C, no tests: `make test` runs this
#                              before the main interpreter's suite, so that its tests that run another
#                              version's dynview by subprocess (test_trace_versions.py) find it built
#   other_pythons.sh demo 3.12 the same set-up for one version, then the demo on it (make demo)
#   other_pythons.sh venv 3.12 the same venv for one version; prints its interpreter (make sanitize)
#   other_pythons.sh share     the main interpreter's DV_SHARE (0/n, n = 1 + the versions found), or
#                              nothing when no other version is found (make test)
set -euo pipefail
mode=${1:-test}
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3}
main=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case $main in
  3.11|3.12|3.13) ;;
  *) echo "error: $PYTHON is CPython $main; dynview supports 3.11, 3.12 and 3.13" >&2; exit 1 ;;
esac
versions=""
for v in 3.11 3.12 3.13; do [ "$v" = "$main" ] || versions="$versions $v"; done
if [ "$mode" = demo ] || [ "$mode" = venv ]; then versions=$2; fi

# The venv for $1 at $2 with torch==2.13.0 and the test deps; one process at a time per venv
# (flock), so `test` waits for a `venvs` run still installing it.
venv_ready() {
  local v=$1 exe=$2 venv=.venv-$1
  (
    flock 9
    if [ ! -x "$venv/bin/python" ]; then
      echo "== $v: creating $venv with torch==2.13.0 (first run only)"
      "$exe" -m venv "$venv"
    fi
    PYTHON="$ROOT/$venv/bin/python" bash .ci/deps.sh  # torch==2.13.0 and the test deps, as for python3
  ) 9>"$venv.lock"
}

ran=()
missing=()
# The tests marked shared_by_versions (tests/python/conftest.py) are shared out among the versions
# that run: the main interpreter's run takes the first share (DV_SHARE, `share` mode below, which
# `make test` asks), the k-th other version found the (k+1)-th, so that each runs once.
found=()
for v in $versions; do
  if [ -n "$("$PYTHON" -c "import sys; sys.path.insert(0, 'tests/python'); import other_pythons as o; print(o.find('$v') or '')")" ]; then
    found+=("$v")
  fi
done
# The main interpreter's run takes share 0 of 1 + the number found; the k-th found, share k.
share_of() {
  local i
  for i in "${!found[@]}"; do
    if [ "${found[$i]}" = "$1" ]; then echo "$((i + 1))/$((${#found[@]} + 1))"; fi
  done
}
if [ "$mode" = share ]; then
  if [ ${#found[@]} -gt 0 ]; then echo "0/$((${#found[@]} + 1))"; fi
  exit 0
fi
for v in $versions; do
  exe=$("$PYTHON" -c "import sys; sys.path.insert(0, 'tests/python'); import other_pythons as o; print(o.find('$v') or '')")
  if [ -z "$exe" ]; then
    missing+=("$v")
    continue
  fi
  t0=$SECONDS
  if [ "$mode" = venv ]; then
    venv_ready "$v" "$exe" >&2
    echo "$ROOT/.venv-$v/bin/python"
    exit
  fi
  venv_ready "$v" "$exe"
  if [ "$mode" = venvs ]; then
    echo "== $v: .venv-$v ready ($((SECONDS - t0)) s)"
    continue
  fi
  venv=.venv-$v
  t1=$SECONDS
  bdir=$BUILD-$v
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF -DDV_PREBUILT_LIBS_DIR="$ROOT/$BUILD" \
      -DDV_PY_PACKAGE_DIR="$ROOT/python/dynview" -DPython3_EXECUTABLE="$ROOT/$venv/bin/python" \
      > "$bdir.configure.log" 2>&1 || { cat "$bdir.configure.log"; exit 1; }
  cmake --build "$bdir" -j"$JOBS" --target _C
  if [ "$mode" = demo ]; then
    DYNVIEW_BIN="$ROOT/$BUILD/dynview" PYTHONPATH="$ROOT/python" "$venv/bin/python" assets/examples/demo.py
    exit
  fi
  if [ "$mode" = build ]; then
    echo "== $v: .venv-$v and its dynview._C ready ($((SECONDS - t0)) s)"
    ran+=("$v")
    continue
  fi
  t2=$SECONDS
  share=$(share_of "$v")
  echo "== Python $v: tests/python (share $share of the tests marked shared_by_versions)"
  PYTHONPATH="$ROOT/python:$ROOT/tests/python" DYNVIEW_BIN="$ROOT/$BUILD/dynview" \
      DV_SECONDARY_RUN=1 DV_SHARE="$share" "$venv/bin/python" -m pytest -q -p no:cacheprovider -p no:benchmark -n "$JOBS" --dist loadfile -m "not cross_version and not main_interpreter_only" tests/python
  echo "== Python $v: venv $((t1 - t0)) s, dynview._C $((t2 - t1)) s, pytest $((SECONDS - t2)) s"
  ran+=("$v")
done
if [ "$mode" = demo ] || [ "$mode" = venv ]; then echo "error: CPython $versions not found" >&2; exit 1; fi
if [ "$mode" = test ]; then
  echo "make test: the suite ran on CPython $main ${ran[*]}${missing:+ (not found: ${missing[*]})}"
fi
if [ "${REQUIRE_ALL:-0}" = 1 ] && [ ${#missing[@]} -gt 0 ]; then
  echo "error: CPython ${missing[*]} not found: CI requires 3.11, 3.12 and 3.13" >&2
  exit 1
fi
