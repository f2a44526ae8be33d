"""experiment --report-to: every arm's SFT reaches train's trackers (TRL's report_to) through the recipe's
stages, each run named after its arm; turning a tracker on changes no stage's key, so the work is reused."""

from __future__ import annotations

import json

import pytest

from agentdata.errors import UserError
from agentdata.experiment import load_recipe
from agentdata.experiment.runner import run_experiment
from tests.cli_helpers import run_cli
from tests.test_command_tracking import tensorboard_run
from tests.test_experiment import teacher, write_recipe  # noqa: F401 (the fake teacher server fixture)
from tests.train_fixtures import tiny_model_dir, tokenizer  # noqa: F401 (fixtures)


@pytest.mark.slow  # collects, trains and evaluates tiny models for real: about a minute of CPU
@pytest.mark.timeout(1200)
def test_each_arms_sft_logs_to_tensorboard_under_its_arms_name_and_a_rerun_reuses_it(
    tmp_path,
    teacher,  # noqa: F811
    tiny_model_dir,  # noqa: F811
    capsys,
    monkeypatch,
):
    pytest.importorskip("tensorboard")
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    arms = {"real": {"sft.data": "real"}, "fast": {"sft.data": "real", "sft.learning_rate": 1e-3}}
    path = write_recipe(tmp_path, teacher.url, tiny_model_dir, arms, sft={"max_steps": 2, "batch_size": 2})
    out = tmp_path / "exp"
    assert run_cli(["experiment", str(path), "--out", str(out), "--report-to", "tensorboard", "--json"]) == 0
    capsys.readouterr()
    runs = sorted({event.parent for event in (out / "work").rglob("events.out.tfevents.*")})
    assert len(runs) == 2  # one TensorBoard run per arm's SFT, written by TRL's callback in its stage folder
    names = set()
    for run in runs:
        scalars, texts = tensorboard_run(run)
        assert "train/loss" in scalars
        names.add(json.loads(texts["args"])["run_name"])
    assert names == {"real-sft", "fast-sft"}  # not train's default `model-sft` for both

    report = run_experiment(load_recipe(path), out)  # the same recipe without a tracker: nothing trains again
    sft_runs = [run for run in report.shared if run["stage"] == "sft"]
    assert len(sft_runs) == 2 and all(run["reused"] for run in sft_runs)


def test_an_unknown_tracker_is_refused_before_any_work(tmp_path, capsys):
    path = write_recipe(tmp_path, "http://127.0.0.1:9/v1", tmp_path / "no-model", {"a": {"sft.data": "real"}, "b": {}})
    with pytest.raises(UserError, match="report_to"):
        run_experiment(load_recipe(path, {"sft.report_to": ["tensorbored"]}), tmp_path / "exp")
    code = run_cli(["experiment", str(path), "--out", str(tmp_path / "exp2"), "--report-to", "tensorbored"])
    assert code == 2 and "report_to" in capsys.readouterr().err
    assert not (tmp_path / "exp" / "work").exists() and not (tmp_path / "exp2" / "work").exists()


@pytest.mark.parametrize("tracker", ["nosuchtracker", "wandb"])
def test_a_tracker_is_checked_before_any_work_even_when_no_arm_trains(tracker, tmp_path, capsys, monkeypatch):
    """Issue 41: --report-to nosuchtracker was accepted silently by a recipe whose arms train nothing (only a
    training stage read it); it is one line before any work, as is a tracker whose package is missing."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name))
    path = write_recipe(tmp_path, "http://127.0.0.1:9/v1", tmp_path / "no-model", {"a": {"eval.seed": 3}, "b": {}})
    code = run_cli(["experiment", str(path), "--out", str(tmp_path / "exp"), "--report-to", tracker])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and tracker in err, err
    assert not (tmp_path / "exp").exists()
