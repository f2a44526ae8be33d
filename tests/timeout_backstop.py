"""A pytest plugin (pyproject.toml's addopts load it): the backstop behind pytest-timeout.

pytest-timeout's SIGALRM fails a test past its timeout and the run goes on, but a test stuck where no signal
reaches (in C code, the signal blocked) never sees it. faulthandler's watchdog thread then ends the process
`timeout_backstop` seconds (120) after the test's own timeout (its marker's, else the ini's), with every
thread's traceback: under xdist the worker dies, and scripts/test.sh's --max-worker-restart=0 ends the run
naming the test (tests/test_ci_bounds.py). One global faulthandler_timeout could not do it: some tests may
take 1200 s.
"""

from __future__ import annotations

import faulthandler
import os
import sys

import pytest

_stderr = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("timeout_backstop", "seconds past a test's timeout before its process is ended", default="120")


def pytest_configure(config: pytest.Config) -> None:
    global _stderr
    try:  # the real stderr, kept before a test's output capture replaces it
        _stderr = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    except (AttributeError, OSError, ValueError):
        _stderr = sys.__stderr__


def _timeout_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and (marker.args or "timeout" in marker.kwargs):
        return float(marker.args[0] if marker.args else marker.kwargs["timeout"])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    timeout = _timeout_of(item)
    if timeout > 0:
        backstop = float(item.config.getini("timeout_backstop"))
        faulthandler.dump_traceback_later(timeout + backstop, exit=True, file=_stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
