"""pytest configuration: puts tests/python on sys.path and lets tests add lines to the summary."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

_summary = []


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
def report():
    """report(line): printed in pytest's terminal summary (counts a test wants on record)."""
    return _summary.append


def pytest_terminal_summary(terminalreporter):
    if _summary:
        terminalreporter.section("dynview figures")
        for line in _summary:
            terminalreporter.write_line(line)
