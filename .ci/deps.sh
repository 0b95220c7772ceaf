#!/usr/bin/env bash
# Installs what dynview needs and is missing, and nothing else: Debian packages with apt-get,
# Python packages with pip into the Python named by $PYTHON (default python3). Idempotent and fast
# when everything is present. Used by `make demo` / `make test` (README) and so by CI.
set -euo pipefail
PYTHON=${PYTHON:-python3}
APT_PKGS=(build-essential cmake ninja-build pkg-config libzstd-dev nlohmann-json3-dev catch2 clang-14 libclang-rt-14-dev
          libimgui-dev libglfw3-dev libgl-dev graphviz libgraphviz-dev libpng-dev xvfb xauth)
installed=()

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  installed+=("${missing[@]}")
fi

pymissing=$("$PYTHON" - <<'PY'
import importlib.util, shutil
need = []
try:
    import torch
    if not torch.__version__.startswith("2.13.0"):
        need.append("torch==2.13.0")
except ImportError:
    need.append("torch==2.13.0")
for mod, pkg in (("pybind11", "pybind11"), ("pytest", "pytest"),
                 ("xdist", "pytest-xdist"),  # make test runs each suite on every core (pytest -n)
                 ("scikit_build_core", "scikit-build-core"), ("numpy", "numpy")):
    if importlib.util.find_spec(mod) is None:
        need.append(pkg)
# Real model code for the engine tests (tiny configs, offline), one release on every interpreter:
# the tests hold its models to TorchDynamo's counts, and a new release changes that code (5.24 put a
# keyword-renaming wrapper on every forward), so an upgrade is a deliberate change made here.
TRANSFORMERS = "5.24.0"
DIFFUSERS = "0.42.1"  # the same for diffusers (its tests: tests/python/test_diffusers_models.py)
try:
    from importlib.metadata import version
    if version("transformers") != TRANSFORMERS:
        need.append("transformers==" + TRANSFORMERS)
except Exception:
    need.append("transformers==" + TRANSFORMERS)
try:
    if version("diffusers") != DIFFUSERS:
        need.append("diffusers==" + DIFFUSERS)
except Exception:
    need.append("diffusers==" + DIFFUSERS)
# einops, as model code uses it (tests/python/python_cases_einops.py); peft's adapters on transformers
# models, with the accelerate it imports (tests/python/test_peft_models.py)
for pkg, want in (("einops", "0.8.2"), ("peft", "0.21.2"), ("accelerate", "1.16.0")):
    try:
        if version(pkg) != want:
            need.append(pkg + "==" + want)
    except Exception:
        need.append(pkg + "==" + want)
if shutil.which("tlparse") is None:  # TORCH_TRACE reference parser: the import tests compare with it
    need.append("tlparse")
print(" ".join(need))
PY
)
if [ -n "$pymissing" ]; then
  # --no-cache-dir: on 3.12/3.13 torch is a CUDA build, several GB with its nvidia-* wheels; pip's
  # cache would keep a second copy of every wheel, and CI has run out of disk with it.
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q --no-cache-dir $pymissing
  installed+=($pymissing)
fi

if [ ${#installed[@]} -gt 0 ]; then echo "deps: installed ${installed[*]}"; else echo "deps: all present"; fi
