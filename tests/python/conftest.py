"""pytest configuration: puts tests/python on sys.path and lets tests add lines to the summary.

`make test` runs the suite with pytest-xdist (`-n`, one worker per core, `--dist loadfile`: a test
file's module fixtures are built once, on one worker). A figure a test reports travels to the
controller in its test report (user_properties), so the summary is the same with or without -n."""
import os
import subprocess
import sys
import zlib

import pytest

sys.path.insert(0, os.path.dirname(__file__))

_summary = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cross_version: runs another CPython (3.12, 3.13) by subprocess and checks what it says "
        "against core/, which is one library linked into every version's dynview._C; the main "
        "interpreter's suite runs these for every version and the other versions' suites deselect them "
        "(.ci/other_pythons.sh: -m 'not cross_version'): each would re-check its own version, which its "
        "in-process tests check in full, and the others with the same code")
    config.addinivalue_line(
        "markers", "main_interpreter_only: checks what the dynview executable and core/ do (the viewer, "
        "the CLI's errors, TORCH_TRACE import, reading traces of killed processes); the captures they "
        "make only feed it, and each version's engine suites check those. The other versions' suites "
        "deselect them (.ci/other_pythons.sh), as their outcome cannot depend on the interpreter")
    config.addinivalue_line(
        "markers", "shared_by_versions: the suite's slowest comparisons (TorchDynamo's counts for each "
        "case, real models, recorder faults across processes). When `make test` runs the suite on "
        "several versions it shares them out (DV_SHARE=k/n: 3.11 runs the first third, 3.12 the "
        "second, 3.13 the last, by a hash of the test's id), so each runs once; everything else runs "
        "on every version, and a run without DV_SHARE runs them all")
    config.addinivalue_line(
        "markers", "every_version: runs on every version in a module marked shared_by_versions (a tally "
        "over the share of the module's comparisons that this version ran)")


# Under pytest-xdist (make test) the files that take longest go first, so that no worker is left
# with one of them at the end while the other idles. Whole files: `--dist loadfile` keeps a file on
# one worker. (Measured with --durations; order only, every test still runs.)
SLOW_FILES = ("test_bytecode_corpus.py", "test_trace_crash.py", "test_torch_trace_import.py", "test_faults.py",
              "test_engine_cases.py", "test_dynamic_shapes.py", "test_hf_models.py", "test_cli_errors.py")


def _share():
    """(k, n) from DV_SHARE=k/n, or None: this run takes the shared tests whose id hashes to k mod n."""
    spec = os.environ.get("DV_SHARE", "")
    if not spec:
        return None
    k, n = (int(x) for x in spec.split("/"))
    if not 0 <= k < n:
        raise pytest.UsageError(f"DV_SHARE={spec}: want k/n with 0 <= k < n")
    return k, n


def in_share(nodeid):
    """Whether this run takes the shared test `nodeid` (every one without DV_SHARE)."""
    share = _share()
    return share is None or zlib.crc32(nodeid.encode()) % share[1] == share[0]


def pytest_collection_modifyitems(config, items):
    share = _share()
    if share and share[1] > 1:
        k, n = share
        keep, drop = [], []
        for item in items:
            mine = (item.get_closest_marker("shared_by_versions") is None or item.get_closest_marker("every_version") is not None
                    or in_share(item.nodeid))
            (keep if mine else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(SLOW_FILES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))  # stable: file order kept


@pytest.fixture
def fresh_engine():
    """Empty caches and records before and after a test (modules opt in with
    `pytestmark = pytest.mark.usefixtures("fresh_engine")`)."""
    import dynview
    import torch
    dynview.reset()
    dynview._C.take_records()
    torch._dynamo.reset()
    yield
    dynview.reset()
    torch._dynamo.reset()


@pytest.fixture
def report(request):
    """report(line): printed in pytest's terminal summary (counts a test wants on record)."""
    return lambda line: request.node.user_properties.append(("dynview figure", line))


def pytest_runtest_logreport(report):
    if report.when == "teardown":  # the last report of a test carries all its properties
        _summary.extend(v for k, v in report.user_properties if k == "dynview figure")


def pytest_terminal_summary(terminalreporter):
    if _summary:
        terminalreporter.section("dynview figures")
        for line in _summary:
            terminalreporter.write_line(line)


_XVFB_CLEANUP = "xvfb-run: error: problem while cleaning up temporary directory"


def run_with_display(cmd, **kwargs):
    """subprocess.run of a command under xvfb-run. When xvfb-run itself fails to remove its temporary
    directory after the command ended (exit 5 with that message, the command's own status lost; seen
    when several X servers start and stop at once), the run is repeated, at most twice more."""
    for _ in range(3):
        p = subprocess.run(cmd, **kwargs)
        if not (p.returncode == 5 and _XVFB_CLEANUP in (p.stderr or "")):
            break
    return p
