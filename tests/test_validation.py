"""Validation during training: held-out avg@k / pass@k per evaluation step in metrics.jsonl, a checkpoint
kept at every evaluation, and the one-page scaling plot (tiny random model, 2 problems, fast)."""

from __future__ import annotations

import json

import pytest

from agentdata.evaluation.curves import PANELS, scaling_figure
from agentdata.settings import build
from agentdata.training.metrics import read_metrics

EVAL_PROBLEMS = [("What is 2 + 2?", "4"), ("What is 3 * 3?", "9")]


def write_eval_problems(path):
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in EVAL_PROBLEMS))
    return path


def eval_records(out_dir):
    return [entry for entry in read_metrics(out_dir / "metrics.jsonl") if any(k.startswith("eval/") for k in entry)]


def checkpoints(out_dir):
    return sorted(path.name for path in (out_dir / "checkpoints").glob("checkpoint-*"))


def test_grpo_evaluates_at_step_0_every_step_and_keeps_each_checkpoint(tmp_path, tiny_model_dir):
    from agentdata.rl import GRPOStageConfig, run_grpo

    out = tmp_path / "rl"
    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            out=str(out),
            max_steps=2,
            num_generations=2,
            prompts_per_step=1,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            limit=2,
            learning_rate=1e-3,
            eval_problems=str(write_eval_problems(tmp_path / "held_out.jsonl")),
            eval_every=1,
            eval_k=2,
        ),
    )
    result = run_grpo(config)
    records = eval_records(out)
    assert [entry["step"] for entry in records] == [0, 1, 2]
    for key in (
        "eval/avg@2",
        "eval/pass@2",
        "eval/maj@2",
        "eval/tools/call_frequency",
        "eval/completions/model_tokens",
        "eval/rollouts/failed",
    ):
        assert all(isinstance(entry[key], (int, float)) for entry in records), key
    assert all(0 <= entry["eval/avg@2"] <= entry["eval/pass@2"] <= 1 for entry in records)
    assert all(entry["eval/avg@2/low"] <= entry["eval/avg@2"] <= entry["eval/avg@2/high"] for entry in records)
    assert all(entry["eval/completions/model_tokens"] > 0 for entry in records)
    # each evaluation is a collect run dir of k responses per problem, kept for `agentdata inspect`
    from agentdata.agent.rundir import RunDir

    assert len(RunDir(out / "eval" / "step-000002").trajectories()) == 2 * len(EVAL_PROBLEMS)
    assert checkpoints(out) == ["checkpoint-1", "checkpoint-2"]  # save_steps is 50: saved because evaluated
    assert (out / "plots" / "scaling.png").stat().st_size > 10_000
    assert out / "plots" / "scaling.png" in result.plots
    assert any("loss" in entry for entry in result.history)  # training logs kept beside the evaluations


def test_sft_evaluates_after_its_last_step_and_save_total_limit_is_honored(tmp_path, tiny_model_dir):
    from agentdata.sft import SFTStageConfig, run_sft
    from tests.train_fixtures import write_sft_set

    held_out = write_eval_problems(tmp_path / "held_out.jsonl")
    common = dict(
        model=f"hf:{tiny_model_dir}",
        sft_data=str(write_sft_set(tmp_path / "sft.jsonl", count=6)),
        max_steps=3,
        batch_size=2,
        max_length=512,
        eval_problems=str(held_out),
        eval_k=2,
    )
    at_end = tmp_path / "at_end"
    run_sft(build(SFTStageConfig, {**common, "out": str(at_end)}))
    assert [entry["step"] for entry in eval_records(at_end)] == [3]
    assert "eval/avg@2" in eval_records(at_end)[0] and checkpoints(at_end) == ["checkpoint-3"]

    every_step = tmp_path / "every_step"
    run_sft(build(SFTStageConfig, {**common, "out": str(every_step), "eval_every": 1, "save_total_limit": 2}))
    assert [entry["step"] for entry in eval_records(every_step)] == [1, 2, 3]
    assert checkpoints(every_step) == ["checkpoint-2", "checkpoint-3"]  # three saved, the oldest deleted


def test_an_evaluation_leaves_the_training_state_as_it_was(tmp_path, tiny_model_dir):
    """Train mode restored, the global torch RNG untouched (the engine reseeds it to sample), no grads."""
    import torch

    from agentdata.agent.config import LoopConfig
    from agentdata.evaluation.during_training import ValidationCallback, model_engine
    from agentdata.evaluation.validation import ValidationConfig
    from agentdata.training.model import load_model, load_tokenizer

    model, tokenizer = load_model(tiny_model_dir), load_tokenizer(tiny_model_dir)
    model.train()
    settings = ValidationConfig(eval_problems=str(write_eval_problems(tmp_path / "p.jsonl")), eval_k=1)
    callback = ValidationCallback(
        settings,
        LoopConfig(max_new_tokens=8),
        tmp_path,
        lambda: model_engine(model, tokenizer),
        "SFT",
        every=None,
        at_start=False,
    )
    rng = torch.get_rng_state()
    record = callback.evaluate(5)
    assert model.training and torch.equal(torch.get_rng_state(), rng)
    assert all(parameter.grad is None for parameter in model.parameters())
    assert record["step"] == 5 and read_metrics(tmp_path / "metrics.jsonl") == [record]


def test_a_missing_eval_file_is_refused_before_training(tmp_path):
    from agentdata.errors import UserError
    from agentdata.rl import GRPOStageConfig

    with pytest.raises(UserError, match="eval_problems: no such file"):
        build(GRPOStageConfig, {"eval_problems": str(tmp_path / "missing.jsonl")})


def test_the_scaling_plot_has_its_four_panels_with_train_and_eval_lines():
    history = [
        {"step": 0, "eval/avg@4": 0.1, "eval/tools/call_frequency": 0.5, "eval/completions/model_tokens": 90.0},
        {"step": 1, "accuracy": 0.2, "tools/call_frequency": 0.6, "completions/model_tokens": 80.0, "entropy": 1.5},
        {"step": 2, "accuracy": 0.4, "tools/call_frequency": 0.9, "completions/model_tokens": 70.0, "entropy": 1.2},
        {"step": 2, "eval/avg@4": 0.3, "eval/tools/call_frequency": 0.8, "eval/completions/model_tokens": 60.0},
    ]
    figure = scaling_figure(history)
    assert [axis.get_title() for axis in figure.axes] == [title for title, _, _ in PANELS]
    accuracy = figure.axes[0]
    labels = {line.get_label(): list(line.get_ydata()) for line in accuracy.lines}
    assert labels == {"train rollouts": [0.2, 0.4], "held-out eval avg@4": [0.1, 0.3]}
    assert [len(axis.lines) for axis in figure.axes] == [2, 2, 2, 1]  # entropy: training only


def test_the_plot_is_redrawn_from_a_run_dir(tmp_path):
    from agentdata.evaluation.curves import plot_run

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "accuracy": 0.5, "eval/avg@2": 0.25}) + "\n")
    assert plot_run(tmp_path) == tmp_path / "plots" / "scaling.png" and (tmp_path / "plots" / "scaling.png").is_file()
