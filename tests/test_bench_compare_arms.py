"""bench/compare_arms.py: one arm of two experiment runs, paired by held-out problem (issue 48's async against sync)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_arm(run: Path, arm: str, correct: dict[str, int], status: str = "done") -> None:
    folder = run / "arms" / arm
    folder.mkdir(parents=True)
    average = sum(correct.values()) / (3 * len(correct)) if correct else 0.0
    record = {"status": status, "eval": {"samples": 3, "avg@3": average, "mean_tool_calls": 1.0}}
    record["scores"] = {"correct": correct}
    (folder / "seed-0.json").write_text(json.dumps(record))


def compare(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "bench" / "compare_arms.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}, timeout=120)


def test_the_difference_is_paired_by_problem_and_an_unfinished_arm_is_refused(tmp_path):
    problems = [f"p{index}" for index in range(20)]
    write_arm(tmp_path / "async", "grpo", {pid: index % 4 for index, pid in enumerate(problems)})  # 1.5 of 3 a problem
    write_arm(tmp_path / "sync", "grpo", {pid: index % 2 for index, pid in enumerate(problems)})  # 0.5 of 3
    done = compare(str(tmp_path / "async"), "grpo", str(tmp_path / "sync"), "grpo")
    assert done.returncode == 0, done.stderr
    assert "async/grpo − sync/grpo: +33.3 points [" in done.stdout and "20 problems" in done.stdout
    write_arm(tmp_path / "failed", "grpo", {}, status="failed")
    refused = compare(str(tmp_path / "failed"), "grpo", str(tmp_path / "sync"), "grpo")
    assert refused.returncode != 0 and "failed, not done" in refused.stderr
