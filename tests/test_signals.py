"""Signals and kill -9 during a collect run (a subprocess with a scripted engine, tests/collect_driver.py).

SIGINT and SIGTERM during a generation, a tool call and a shard write stop the run within
seconds, keep what finished, and the resumed run equals an uninterrupted one; `kill -9` at
random moments keeps every trajectory finished more than two seconds earlier.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentdata.agent.journal import read_journal
from agentdata.agent.rundir import RunDir
from agentdata.records import to_row

DRIVER = Path(__file__).with_name("collect_driver.py")
SIGNAL_PROBLEMS = 8
# With one trajectory in flight, what has finished when the driver blocks: p0-p3 before p4's
# generation or tool call; p0-p5 when the second shard (rows 4-6) is being written.
FINISHED_AT_BLOCK = {"generation": 4, "tool": 4, "shard": 6}


def start_driver(out: Path, problems: int, **env: str) -> subprocess.Popen:
    environment = {**os.environ, **{f"DRIVER_{key.upper()}": str(value) for key, value in env.items()}}
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(out), str(problems)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_driver(out: Path, problems: int, **env: str) -> None:
    process = start_driver(out, problems, **env)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output


def comparable(out: Path) -> list[dict]:
    """Every row of the run dir but its timings, by id: what an uninterrupted run would hold too."""
    rows = [{k: v for k, v in to_row(t).items() if k != "timings"} for t in RunDir(out).trajectories()]
    return sorted(rows, key=lambda row: row["id"])


def kept_ids(out: Path) -> set[str]:
    """What survived: committed shards plus the journal an interrupted run left behind."""
    run = RunDir(out)
    return run.done_ids() | {t.id for t in read_journal(run.journal_path).trajectories}


def wait_for(condition, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "the driver never reached the point to interrupt"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    run_driver(out, SIGNAL_PROBLEMS)
    return comparable(out)


@pytest.mark.parametrize("phase", ["generation", "tool", "shard"])
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_keeps_what_finished_and_resumes_to_the_same_result(tmp_path, uninterrupted, phase, signal_number):
    out, marker = tmp_path / "run", tmp_path / "reached"
    process = start_driver(out, SIGNAL_PROBLEMS, phase=phase, mark=marker)
    wait_for(marker.exists, process)
    sent = time.monotonic()
    process.send_signal(signal_number)
    output, _ = process.communicate(timeout=60)
    assert time.monotonic() - sent < 10, "the run did not stop within 10 s"
    assert process.returncode == 130, output
    assert "Traceback" not in output, output
    finished = {f"p{i}-0" for i in range(FINISHED_AT_BLOCK[phase])}
    assert finished <= RunDir(out).done_ids()  # in shards: a clean stop leaves no journal behind
    assert not RunDir(out).journal_path.exists() and not list(out.rglob(".*.tmp"))
    run_driver(out, SIGNAL_PROBLEMS)
    assert comparable(out) == uninterrupted


def test_kill_9_at_random_moments_keeps_everything_finished_two_seconds_earlier(tmp_path):
    problems, out, log = 40, tmp_path / "run", tmp_path / "finished.log"
    reference = tmp_path / "reference"
    run_driver(reference, problems)
    chooser = random.Random(os.environ.get("PYTEST_SEED", "16"))
    for _ in range(2):
        log.unlink(missing_ok=True)
        process = start_driver(out, problems, log=log, delay=0.1, concurrency=2, shard_size=64)
        wait_for(lambda: log.exists() and log.read_text().strip(), process)
        time.sleep(chooser.uniform(2.2, 3.5))
        killed_at = time.time()
        process.kill()
        process.wait()
        finished = [line.split() for line in log.read_text().splitlines()]
        old_enough = {f"{problem}-0" for at, problem in finished if float(at) < killed_at - 2}
        assert old_enough and old_enough <= kept_ids(out)
    run_driver(out, problems)
    assert comparable(out) == comparable(reference)


def test_a_signal_during_a_shard_write_waits_until_the_write_and_its_bookkeeping_are_done():
    from agentdata.agent.journal import signals_deferred

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # as the CLI sets it
    steps = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("the rest of the block ran")
        assert steps == ["the rest of the block ran"]
        assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
