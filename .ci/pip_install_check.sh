#!/usr/bin/env bash
# `pip install --no-build-isolation .` on CPython X.Y, offline, into a throwaway venv, then a smoke
# test of what it installed (dynview.compile, a recorded trace read back, the `dynview` executable
# on it). Not part of `make test`: it builds the whole project once more (about 10 minutes on 2
# cores per version); run it after changing pyproject.toml or CMakeLists.txt.
#   .ci/pip_install_check.sh 3.12 [3.13 ...]
# PIP_BUILD_DIR_3_12=DIR (per version) keeps that version's CMake build in DIR between runs.
# The venv is made by .venv-X.Y's interpreter with --system-site-packages; that flag gives it the
# *base* interpreter's site-packages, not .venv-X.Y's, so a .pth file adds .venv-X.Y's (torch,
# pybind11, scikit-build-core: the build requirements, which --no-build-isolation does not fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -gt 0 ] || { echo "usage: $0 3.12 [3.13 ...]" >&2; exit 64; }
for v in "$@"; do
  base=$ROOT/.venv-$v/bin/python
  [ -x "$base" ] || { echo "error: no .venv-$v (make test creates it)" >&2; exit 1; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/dynview-pip-$v.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$base" -m venv --system-site-packages "$tmp/venv"
  purelib=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$purelib" > "$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/parent-venv.pth"
  t0=$SECONDS
  echo "== $v: pip install --no-build-isolation . (offline)"
  CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} "$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-index \
      -C build-dir="$(bdir=PIP_BUILD_DIR_${v/./_}; echo "${!bdir:-$tmp/build}")" .
  # Away from the checkout, so that the installed package is the one imported.
  (cd "$tmp" && "$tmp/venv/bin/python" - <<'EOF'
import os, subprocess, sys, sysconfig
import torch
import dynview
assert dynview.__file__.startswith(sys.prefix), dynview.__file__
f = dynview.compile(lambda x: x.sin() * 2, backend="eager")
torch.testing.assert_close(f(torch.ones(3)), torch.ones(3).sin() * 2)
with dynview.record("run.dyn"):
    dynview.compile(lambda x: x.cos() + 1, backend="eager")(torch.ones(3))
t = dynview.load_trace("run.dyn")
assert t.num_steps > 0 and t.meta["opcode_table"] == "cpython-%d.%d" % sys.version_info[:2]
exe = os.path.join(sysconfig.get_path("scripts"), "dynview")
out = subprocess.run([exe, "explain", "run.dyn", "--json"], capture_output=True, text=True, check=True)
print("installed dynview works:", dynview.__file__, "and", exe)
EOF
  )
  echo "== $v: pip install and smoke test $((SECONDS - t0)) s"
  rm -rf "$tmp"
  trap - EXIT
done
