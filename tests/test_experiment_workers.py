"""`agentdata experiment --jobs N`: arms at once in worker processes, sharing their stages through the stage locks.

The same tiny recipe as tests/test_experiment.py (the fake teacher runs `print(6*7)` in the real sandbox;
the student is a tiny random Llama), so every stage runs for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentdata.events import listening
from agentdata.experiment import load_recipe, run_experiment
from agentdata.experiment.work import StageFailed, Workshop
from agentdata.experiment.workers import default_jobs
from tests.test_experiment import HELD_OUT_QUESTIONS, TRAIN_QUESTIONS, teacher, write_recipe  # noqa: F401 (fixture)
from tests.train_fixtures import tiny_model_dir, tokenizer  # noqa: F401 (fixtures)

SHARING_ARMS = {"real": {"sft.data": "real"}, "real_fast": {"sft.data": "real", "sft.learning_rate": 1e-3}}


@pytest.mark.slow  # collects, trains and evaluates tiny models for real, in two worker processes
@pytest.mark.timeout(1200)
def test_two_arms_at_once_share_their_collect_and_report_as_one_after_another_would(
    tmp_path,
    teacher,  # noqa: F811
    tiny_model_dir,  # noqa: F811
):
    recipe = load_recipe(write_recipe(tmp_path, teacher.url, tiny_model_dir, SHARING_ARMS))
    events = []
    with listening(events.append):
        report = run_experiment(recipe, tmp_path / "exp", jobs=2)
    rows = {row["arm"]: row for row in report.arms}
    assert all(row["status"] == "done" for row in rows.values())
    assert rows["real"]["responses"] == rows["real_fast"]["responses"] == len(HELD_OUT_QUESTIONS) * 2
    assert len(list((tmp_path / "exp" / "work").glob("collect-*/result.json"))) == 1  # one collect for both arms
    (collect,) = [run for run in report.shared if run["stage"] == "collect"]
    assert collect["arms"] == ["real", "real_fast"]
    records = [json.loads((tmp_path / "exp" / "arms" / arm / "seed-0.json").read_text()) for arm in SHARING_ARMS]
    assert sorted(record["stages"][0]["reused"] for record in records) == [False, True]  # one ran it, one waited
    assert len(teacher.requests) <= len(TRAIN_QUESTIONS) * 2 * 2  # 2 samples x at most 2 turns: one collect's worth
    assert {event.scope for event in events if event.kind == "start"} == {"real", "real_fast"}  # the workers' events
    assert sum(run["stage"] == "sft" for run in report.shared) == 2


def test_the_second_worker_wanting_a_stage_waits_for_the_first_and_reuses_it(tmp_path):
    started, release, calls = threading.Event(), threading.Event(), []

    def slow_stage(folder: Path) -> dict:
        calls.append(folder)
        started.set()
        release.wait(120)
        return {"value": 1}

    first = threading.Thread(target=Workshop(tmp_path).run, args=("profile", {"k": 4}, slow_stage))
    first.start()
    assert started.wait(120)
    results = []
    second = threading.Thread(target=lambda: results.append(Workshop(tmp_path).run("profile", {"k": 4}, slow_stage)))
    second.start()
    time.sleep(0.5)
    assert second.is_alive() and not results  # it waits on the stage's lock rather than running it too
    release.set()
    first.join(120)
    second.join(120)
    (run,) = results
    assert len(calls) == 1 and run.reused and run.result["value"] == 1


def test_a_failed_stage_fails_the_same_way_in_another_worker_of_the_run_and_a_new_run_tries_again(tmp_path):
    calls = []

    def failing(folder: Path) -> dict:
        calls.append(folder)
        raise ValueError("no GPU here")

    workshop = Workshop(tmp_path)
    with pytest.raises(StageFailed, match="no GPU here"):
        workshop.run("grpo", {"lr": 1}, failing)
    with pytest.raises(StageFailed, match="no GPU here"):  # another worker of the same run: not run again
        Workshop(tmp_path, workshop.run_id).run("grpo", {"lr": 1}, failing)
    assert len(calls) == 1
    run = Workshop(tmp_path).run("grpo", {"lr": 1}, lambda folder: {"ok": True})  # a new run tries it again
    assert run.result["ok"] and not (run.dir / "failed.json").exists()


@pytest.mark.parametrize("damaged", ["", "[1, 2]", '"done"', '{"cut": '])
def test_a_damaged_result_marker_is_a_stage_to_run_again_not_a_traceback(damaged, tmp_path):
    """Issue 41: a stage's result.json emptied (a full disk) or not a JSON object was a traceback."""
    first = Workshop(tmp_path).run("eval", {"k": 1}, lambda folder: {"answer": 1})
    (first.dir / "result.json").write_text(damaged)
    again = Workshop(tmp_path).run("eval", {"k": 1}, lambda folder: {"answer": 2})
    assert not again.reused and again.result["answer"] == 2
    assert json.loads((first.dir / "result.json").read_text())["answer"] == 2


@pytest.mark.parametrize("damaged", ["", "not json", "[]"])
def test_a_damaged_failure_marker_is_tried_again_not_a_traceback(damaged, tmp_path):
    """Issue 41: a failed.json that is not JSON was a traceback; it says nothing, so the stage is tried."""
    workshop = Workshop(tmp_path)
    key, folder = workshop.folder("grpo", {"lr": 1})
    folder.mkdir(parents=True)
    (folder / "failed.json").write_text(damaged)
    run = workshop.run("grpo", {"lr": 1}, lambda folder: {"ok": True})
    assert run.result["ok"] and not (folder / "failed.json").exists()


def test_jobs_default_to_the_cores_and_memory_and_to_one_with_vllm(monkeypatch):
    from agentdata.experiment import workers

    monkeypatch.setattr(workers, "usable_cores", lambda: 8)
    monkeypatch.setattr(workers, "available_memory", lambda: 20 * workers.GB)
    assert default_jobs(3, {"hf"}) == 2  # 20 GB holds two arms of about 8 GB
    assert default_jobs(1, {"hf"}) == 1
    assert default_jobs(3, {"hf", "vllm"}) == 1  # each vLLM engine takes most of the accelerator's memory
    monkeypatch.setattr(workers, "available_memory", lambda: 200 * workers.GB)
    assert default_jobs(3, {"hf"}) == 3
    monkeypatch.setattr(workers, "usable_cores", lambda: 1)
    assert default_jobs(3, {"hf"}) == 1


def start_cli(recipe: Path, out: Path, jobs: int = 2) -> subprocess.Popen:
    command = [sys.executable, "-m", "agentdata.cli.app", "experiment", str(recipe), "--out", str(out)]
    return subprocess.Popen([*command, "--jobs", str(jobs), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def worker_pids(out: Path, arms, parent: subprocess.Popen, deadline_s: float = 240) -> dict[str, int]:
    """Each arm's worker pid, from its record, once every arm's worker has started its first stage."""
    deadline = time.monotonic() + deadline_s
    while True:
        records = [out / "arms" / arm / "seed-0.json" for arm in arms]
        if all(path.exists() for path in records):
            pids = {arm: json.loads(path.read_text())["pid"] for arm, path in zip(arms, records)}
            if all(pids.values()) and parent.pid not in pids.values():
                return pids
        assert time.monotonic() < deadline and parent.poll() is None, parent.stderr.read().decode()[-2000:]
        time.sleep(0.2)


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state  # ended, waiting for init to reap it


def recorded_stages(record: Path) -> list[str]:
    """The stages an arm's record lists as done; none while it is missing or half written."""
    try:
        return [stage["stage"] for stage in json.loads(record.read_text())["stages"]]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return []


@pytest.mark.slow  # collects, trains and evaluates tiny models for real
@pytest.mark.timeout(1200)
def test_a_worker_killed_fails_its_arm_alone_and_the_same_command_completes_it(
    tmp_path,
    teacher,  # noqa: F811
    tiny_model_dir,  # noqa: F811
):
    arms = {"real": {"sft.data": "real"}, "none": {}}
    path = write_recipe(tmp_path, teacher.url, tiny_model_dir, arms)
    out = tmp_path / "exp"
    parent = start_cli(path, out)
    pids = worker_pids(out, arms, parent)
    deadline = time.monotonic() + 240
    # The real arm's own record lists its collect as done (written after the stage's result.json, so a kill
    # between the two, on a busy machine, would find the arm still in its collect): kill it after.
    while "collect" not in recorded_stages(out / "arms" / "real" / "seed-0.json"):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.2)
    os.kill(pids["real"], signal.SIGKILL)  # as the kernel's OOM killer would
    stdout, stderr = parent.communicate(timeout=600)
    assert parent.returncode == 1, stderr.decode()[-2000:]  # an arm failed: the others' report, then exit 1
    rows = {row["arm"]: row for row in json.loads(stdout)["arms"]}
    assert rows["none"]["status"] == "done"
    assert rows["real"]["status"] == "failed"
    (failure,) = rows["real"]["failures"]
    assert "killed by signal 9" in failure["reason"] and "OOM" in failure["reason"]
    assert failure["stage"] in ("curate", "sft_sets", "sft", "eval")  # where it was: after its collect
    requests = len(teacher.requests)

    report = run_experiment(load_recipe(path), out)  # the same experiment again: the killed arm resumes
    assert {row["arm"]: row["status"] for row in report.arms} == {"real": "done", "none": "done"}
    assert len(teacher.requests) == requests  # its finished collect was kept


@pytest.mark.timeout(300)
def test_killing_the_experiment_stops_its_workers(tmp_path, tiny_model_dir):  # noqa: F811
    """SIGKILL leaves the parent no time to stop them: the workers notice it is gone and stop themselves."""
    arms = {"a": {}, "b": {"loop.temperature": 0.7}}
    path = write_recipe(tmp_path, "http://127.0.0.1:9/v1", tiny_model_dir, arms, eval={"samples": 64, "concurrency": 2})
    parent = start_cli(path, tmp_path / "exp")
    pids = worker_pids(tmp_path / "exp", arms, parent)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60
    try:
        while not all(gone(pid) for pid in pids.values()):
            assert time.monotonic() < deadline, f"workers {pids} still running 60 s after their parent was killed"
            time.sleep(0.5)
    finally:  # never leave them running past the test
        for pid in pids.values():
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_arm_that_would_wait_for_a_running_arms_first_stage_starts_after_one_that_would_not():
    from agentdata.experiment.workers import ArmJob, next_job

    def job(index: int, opens_with: str | None) -> ArmJob:
        return ArmJob(index, None, [], None, Path("work"), "run", Path("arms"), 1, [], opens_with)

    band, random, everything = job(0, "profile-0"), job(1, "profile-0"), job(2, None)
    assert next_job([band, random, everything], []) is band
    assert next_job([random, everything], [band]) is everything  # random would wait idle for band's profile
    assert next_job([random], [band]) is random  # nothing else to run: it waits, then reuses the profile
