"""examples/slurm/ run through tests/fake_slurm/sbatch, a stand-in that runs the array on this machine
(every task at once, with the SLURM_ARRAY_* variables Slurm sets), one task killed mid-run and requeued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentdata.agent.rundir import RunDir
from agentdata.agent.shard_status import read_sharded
from agentdata.agent.shards import Shard

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "examples" / "slurm"


def _problems(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "problems.jsonl"
    rows = [{"id": f"p{i}", "question": f"What is 6 times 7? (take {i})", "answer": "42"} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    agentdata = tmp_path / "agentdata"  # the CLI of this checkout, as a site's module would put it on PATH
    agentdata.write_text(f'#!/bin/sh\nexec {sys.executable} -m agentdata.cli.app "$@"\n')
    agentdata.chmod(0o755)
    path = f"{REPO / 'tests' / 'fake_slurm'}:{tmp_path}:{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "FAKE_SLURM_DIR": str(tmp_path / "slurm"), "PYTHONPATH": str(REPO), **extra}


@pytest.mark.slow  # four CLI processes, one after the other
def test_a_sharded_collect_as_a_slurm_array_with_a_task_killed_and_requeued_then_merged(tmp_path):
    from bench.fake_openai_server import FakeOpenAIServer

    problems, out = _problems(tmp_path, 12), tmp_path / "run"
    killed_part = out / "shard-00001-of-00002.journal.jsonl"  # task 1 dies once 2 trajectories are journaled
    with FakeOpenAIServer(latency=0.02) as server:
        step = ["collect", str(problems), "--teacher", f"openai:{server.url}", "--model", "fake-model"]
        step += ["--protocol", "hermes", "--samples", "2", "--concurrency", "1", "--out", str(out), "--json"]
        env = _env(tmp_path, FAKE_SLURM_KILL=f"1:3:{killed_part}")
        submitted = subprocess.run(
            ["bash", str(SLURM / "submit.sh"), "2", *step], env=env, capture_output=True, text=True, timeout=300
        )
        requests = len(server.requests)
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.strip() == "array job 1000 (2 shards), merge job 1001 after it"
    logs = tmp_path / "slurm"
    assert (logs / "1000_1.killed").exists()  # the node died under task 1; it ran again and resumed
    for task in range(2):
        text = (logs / ("1000_1.requeued.out" if task == 1 else f"1000_{task}.out")).read_text()
        assert f"agentdata collect --shard {task}/2" in text
        summary = json.loads(text[text.index("{") :])
        owned = 2 * len(Shard(task, 2).select([f"p{i}" for i in range(12)], key=str))
        assert summary["total"] == owned
        if task == 1:
            assert summary["new"] < owned  # what the killed task finished was kept, not redone
    merged = json.loads((logs / "1001_job.out").read_text())
    assert merged["total"] == 24 and merged["new"] == 0 and merged["correct"] == 24
    ids = [t.id for t in RunDir(out).trajectories()]
    assert sorted(ids) == sorted(f"p{i}-{s}" for i in range(12) for s in range(2))  # each once
    assert read_sharded(out).complete
    assert requests <= 2 * 24 + 2  # two calls a trajectory; at most the one in flight at the kill is asked again


def test_the_merge_step_never_runs_after_a_failed_task(tmp_path):
    env = _env(tmp_path, AGENTDATA="false")  # every task fails
    submitted = subprocess.run(
        ["bash", str(SLURM / "submit.sh"), "2", "collect", "--out", str(tmp_path / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode != 0 and "DependencyNeverSatisfied" in submitted.stderr
    assert (tmp_path / "slurm" / "1000.rc").read_text() == "1" and not (tmp_path / "slurm" / "1001_job.out").exists()
    bad = subprocess.run(["bash", str(SLURM / "submit.sh"), "x", "collect"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "SHARDS must be a whole number" in bad.stderr


def test_the_array_script_counts_shards_from_the_arrays_first_index(tmp_path):
    env = _env(tmp_path, AGENTDATA="echo")
    variables = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_MAX": "8"}
    ran = subprocess.run(
        ["bash", str(SLURM / "shard.sbatch"), "eval", "--models", "m"],
        env={**env, **variables},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.splitlines()[-1] == "eval --models m --shard 2/4"
    alone = subprocess.run(["bash", str(SLURM / "shard.sbatch"), "collect"], env=env, capture_output=True, text=True)
    assert alone.returncode != 0 and "not an array task" in alone.stderr
