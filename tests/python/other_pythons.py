"""The other CPython versions core/ supports, found on this machine (.ci/other_pythons.sh, run by
`make test`, builds dynview._C for each in its venv; the cross_version tests run them by subprocess).

An interpreter for X.Y is taken from $DYNVIEW_PYTHON_X_Y, else the newest pyenv install
($(pyenv root)/versions/X.Y.*/bin/pythonX.Y), else `pythonX.Y` on PATH (not a pyenv shim, which
fails when that version is not selected). Missing ones are skipped by the tests
that use them, which say so.
"""
import glob
import os
import shutil
import subprocess

OTHER_VERSIONS = ("3.12", "3.13")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def _pyenv_root():
    if os.environ.get("PYENV_ROOT"):
        return os.environ["PYENV_ROOT"]
    exe = shutil.which("pyenv")
    if exe:
        try:
            return subprocess.run([exe, "root"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            pass
    return os.path.expanduser("~/.pyenv")


def find(version):
    """Path of an interpreter for `version` ("3.12"), or None."""
    env = os.environ.get("DYNVIEW_PYTHON_" + version.replace(".", "_"))
    if env and os.path.exists(env):
        return env
    cands = glob.glob(os.path.join(_pyenv_root(), "versions", version + ".*", "bin", "python" + version))
    key = lambda p: [int(x) if x.isdigit() else 0 for x in p.split(os.sep)[-3].split(".")]
    if cands:
        return max(cands, key=key)
    exe = shutil.which("python" + version)
    return exe if exe and os.sep + "shims" + os.sep not in exe else None


def found():
    """{version: interpreter} for the other versions present."""
    return {v: p for v in OTHER_VERSIONS if (p := find(v))}


def dump_corpus(python, out, every=20, modules=20):
    """Runs bytecode_dump.py under `python`; returns (header dict, iterator over (code_json, ref_json))."""
    subprocess.run([python, os.path.join(HERE, "bytecode_dump.py"), str(out), "--every", str(every),
                    "--modules", str(modules)], check=True)
    import json
    f = open(out)
    header = json.loads(f.readline())

    def records():
        with f:
            for line in f:
                code, _, ref = line.rstrip("\n").partition("\t")
                yield code, ref
    return header, records()


def venv_python(version):
    """The interpreter of the venv `make test` creates for `version` (.venv-X.Y, with torch and
    dynview._C built for it), or None when there is none yet."""
    exe = os.path.join(ROOT, ".venv-" + version, "bin", "python")
    return exe if os.path.exists(exe) else None


def headline_per_version(script, headline, own):
    """Runs benchmark `script` under each other version's venv (DV_BENCH_CHILD=1: that run prints
    only its own lines) and prints one line per version, "<version>: <headline line>" (`own` is this
    interpreter's), or why a version was not measured."""
    import sys
    print(f"{sys.version_info.major}.{sys.version_info.minor}: {own}")
    for v in OTHER_VERSIONS:
        exe = venv_python(v)
        if not exe:
            print(f"{v}: not measured (no .venv-{v}: `make test` creates it)")
            continue
        env = dict(os.environ, DV_BENCH_CHILD="1", PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([exe, script], capture_output=True, text=True, env=env)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith(headline)]
        print(f"{v}: {lines[-1]}" if r.returncode == 0 and lines else f"{v}: failed ({(r.stderr or r.stdout).strip()[-300:]})")
