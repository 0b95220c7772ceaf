"""pytest configuration: puts tests/python on sys.path and lets tests add lines to the summary."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

_summary = []


@pytest.fixture
def report():
    """report(line): printed in pytest's terminal summary (counts a test wants on record)."""
    return _summary.append


def pytest_terminal_summary(terminalreporter):
    if _summary:
        terminalreporter.section("dynview figures")
        for line in _summary:
            terminalreporter.write_line(line)
