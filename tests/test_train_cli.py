"""`agentdata train --stage all` on a tiny model: both stages change the weights and write metrics."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from agentdata.cli.app import app
from tests.cli_helpers import run_cli
from tests.train_fixtures import write_sft_set

# A reward plug-in (a file, given with --reward) whose rewards differ within a group, so a random
# tiny model still gets a gradient.
LENGTH_REWARD = """
class LengthReward:
    __name__ = "length"

    def __call__(self, prompts, completions, **kwargs):
        texts = [c if isinstance(c, str) else "".join(m["content"] for m in c) for c in completions]
        return [float(len(text) % 7) for text in texts]
"""


def _weights(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir).state_dict()


def test_train_all_runs_sft_then_grpo_with_the_sandbox(tmp_path, tiny_model_dir):
    reward_file = tmp_path / "length_reward.py"
    reward_file.write_text(LENGTH_REWARD)
    sft_data = write_sft_set(tmp_path / "sft.jsonl", count=4)
    pool = tmp_path / "pool.jsonl"
    pool.write_text(
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": q}], "answer": a}) + "\n"
            for q, a in [("What is 2 + 2?", "4"), ("What is 3 * 3?", "9")]
        )
    )
    config = tmp_path / "train.yaml"
    config.write_text(
        "sft:\n  batch_size: 2\n  learning_rate: 0.01\n  max_length: 512\n  lr_scheduler_type: constant\n"
        "rl:\n  prompts_per_step: 1\n  learning_rate: 0.01\n  temperature: 1.0\n  max_grad_norm: 0.5\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--model",
            f"hf:{tiny_model_dir}",
            "--sft-data",
            str(sft_data),
            "--rl-pool",
            str(pool),
            "--out",
            str(out),
            "--max-steps",
            "2",
            "--num-generations",
            "2",
            "--max-new-tokens",
            "24",
            "overlong_buffer=8",
            "--config",
            str(config),
            "--reward",
            f"{reward_file}:LengthReward",
            "--eval-problems",
            str(pool),
            "eval_k=1",
        ],
    )
    assert result.exit_code == 0, result.output
    base, sft, rl = _weights(tiny_model_dir), _weights(out / "sft"), _weights(out / "rl")
    assert any(not torch.equal(base[name], sft[name]) for name in base)
    assert any(not torch.equal(sft[name], rl[name]) for name in sft)
    rl_metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    step_logs = [entry for entry in rl_metrics if "reward" in entry]
    assert len(step_logs) == 2
    for key in (
        "accuracy",
        "tools/call_frequency",
        "tools/error_rate",
        "completions/model_tokens",
        "entropy",
        "clip_ratio/high_mean",
        "rewards/correctness/mean",
        "rewards/overlong/mean",
        "rewards/length/mean",
    ):
        assert key in step_logs[-1], key
    assert {path.name for path in (out / "rl" / "plots").iterdir()} == {"scaling.png"}  # every curve on one page
    # --eval-problems reaches both stages: SFT evaluates after its last step, GRPO at step 0 and after its last
    sft_metrics = [json.loads(line) for line in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in sft_metrics if "eval/avg@1" in entry] == [sft_metrics[-1]["step"]]
    assert [entry["step"] for entry in rl_metrics if "eval/avg@1" in entry] == [0, 2]
    assert "agentdata train" in result.output
    for stage in ("sft", "rl"):  # the effective TRL settings, every field, in each run dir
        recorded = json.loads((out / stage / "trl_config.json").read_text())
        assert recorded["output_dir"].endswith("checkpoints") and "max_grad_norm" in recorded
    for stage in ("sft", "rl"):  # what the model was taught, beside its weights: later runs default to it
        taught = json.loads((out / stage / "agentdata.json").read_text())
        assert (taught["protocol"], taught["system_prompt"], taught["stage"]) == ("codeblock", None, stage)
    recorded_rl = json.loads((out / "rl" / "trl_config.json").read_text())
    assert (recorded_rl["num_generations"], recorded_rl["max_grad_norm"]) == (2, 0.5)  # a TRL-only field, from the file
    assert json.loads((out / "sft" / "trl_config.json").read_text())["lr_scheduler_type"] == "constant"


def test_train_rejects_a_missing_sft_set_in_one_line(tmp_path, capsys):
    assert run_cli(["train", "--stage", "sft", "--sft-data", str(tmp_path / "none.parquet")]) == 2
    error = capsys.readouterr().err
    assert "none.parquet: no SFT set" in error and error.count("\n") == 1


def test_train_rejects_unknown_config_fields(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("rl:\n  not_a_field: 1\n")
    assert run_cli(["train", "--stage", "rl", "--config", str(config)]) == 2
    assert f"{config} rl: unknown setting 'not_a_field'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "section, key, suggestion",
    [
        ("rl", "num_iteration", "num_iterations"),
        ("sft", "max_grad_nrom", "max_grad_norm"),
        ("rl", "rl_problem", "rl_problems"),
    ],
)
def test_a_misspelled_config_key_exits_2_naming_it_and_the_closest_keys(tmp_path, capsys, section, key, suggestion):
    config = tmp_path / "c.yaml"
    config.write_text(f"{section}:\n  {key}: 1\n")
    assert run_cli(["train", "--stage", section, "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert f"unknown setting {key!r}; did you mean {suggestion}" in error and str(config) in error
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.slow  # stitching, SFT and GRPO in one run: ~20 s of CPU
def test_train_without_data_runs_the_demo_sft_on_stitched_solutions_then_grpo(tmp_path, tiny_model_dir, monkeypatch):
    """No SFT set and no pool: the demo stitches worked solutions, trains on them, then runs GRPO."""
    import polars as pl

    from agentdata.train import run as train_pipeline

    monkeypatch.chdir(tmp_path)  # no sft.parquet / pool.parquet here
    monkeypatch.setattr(train_pipeline, "DEMO_SFT_CONVERSATIONS", 4)
    out = tmp_path / "demo"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--model",
            f"hf:{tiny_model_dir}",
            "--out",
            str(out),
            "--max-steps",
            "1",
            "--num-generations",
            "2",
            "--max-new-tokens",
            "24",
            "overlong_buffer=8",
        ],
    )
    assert result.exit_code == 0, result.output
    stitched = pl.read_parquet(out / "demo_sft.parquet")
    assert len(stitched) == 4 and stitched["correct"].all() and (stitched["num_tool_calls"] >= 1).all()
    assert (out / "sft" / "config.json").is_file() and (out / "rl" / "config.json").is_file()
    rl_metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert len([entry for entry in rl_metrics if "reward" in entry]) == 1
    assert "demonstration" in result.output
