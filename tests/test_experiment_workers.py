"""`agentdata experiment --jobs N`: arms at once in worker processes, sharing their stages through the stage locks.

The same tiny recipe as tests/test_experiment.py (the fake teacher runs `print(6*7)` in the real sandbox;
the student is a tiny random Llama), so every stage runs for real.
"""

from __future__ import annotations

import json
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
        release.wait(10)
        return {"value": 1}

    first = threading.Thread(target=Workshop(tmp_path).run, args=("profile", {"k": 4}, slow_stage))
    first.start()
    assert started.wait(10)
    results = []
    second = threading.Thread(target=lambda: results.append(Workshop(tmp_path).run("profile", {"k": 4}, slow_stage)))
    second.start()
    time.sleep(0.5)
    assert second.is_alive() and not results  # it waits on the stage's lock rather than running it too
    release.set()
    first.join(10)
    second.join(10)
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
