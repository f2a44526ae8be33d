"""The test run ends in bounded time: a test stuck where pytest-timeout's signal cannot reach it, or a dead xdist
worker, fails the run instead of hanging it (pyproject.toml's timeouts, scripts/test.sh's pytest flags)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUCK = """
import signal, time

def test_stuck_where_no_signal_reaches():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])  # pytest-timeout's signal never arrives
    time.sleep(600)

def test_after():
    pass
"""


def test_scripts_test_sh_ends_the_run_at_the_first_dead_worker():
    line = next(line for line in (ROOT / "scripts/test.sh").read_text().splitlines() if "-m pytest" in line)
    assert "--max-worker-restart=0" in line.split()


def test_a_test_stuck_beyond_the_signal_ends_the_run_in_bounded_time(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "test_stuck.py").write_text(STUCK)
    # the project's settings and scripts/test.sh's flags, the timeouts scaled from 300 s and 120 s more to 2 s and 4 s
    args = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path)]
    args += ["-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "--max-worker-restart=0"]
    args += ["-o", "timeout=2", "-o", "timeout_backstop=4", str(tmp_path / "test_stuck.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the backstop plugin is tests/timeout_backstop.py
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode != 0
    assert re.search(r"crashed while running .*test_stuck_where_no_signal_reaches", done.stdout), done.stdout[-3000:]
