"""--report-to through TRL's own report_to: each tracker's local files written and read back offline, with the
run name, TRL's scalars, our tool-call metrics and the table of sampled rollouts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata.errors import UserError
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import build
from agentdata.sft.config import SFTStageConfig
from agentdata.training.config import TrackingConfig
from tests.test_rl import crafted_trajectory

pytest.importorskip("tensorboard")


def tensorboard_events(folder: Path):
    """Every scalar and text of the one TensorBoard run under `folder`, read with tensorboard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sorted({path.parent for path in folder.rglob("events.out.tfevents.*")})
    assert len(runs) == 1, runs
    events = EventAccumulator(str(runs[0]), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = {tag: [event.value for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    texts = {tag: events.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in events.Tags()["tensors"]}
    return scalars, texts


def test_sft_reports_to_tensorboard_with_its_run_name_settings_and_held_out_accuracy(tmp_path, tiny_model_dir):
    from agentdata.sft.run import run_sft
    from tests.test_sft import write_sft_set
    from tests.test_validation import write_eval_problems

    config = build(
        SFTStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            sft_data=str(write_sft_set(tmp_path / "sft.jsonl", count=4)),
            out=str(tmp_path / "out"),
            max_steps=2,
            batch_size=2,
            logging_steps=1,
            max_length=512,
            report_to=["tensorboard"],
            run_name="tiny-sft",
            eval_problems=str(write_eval_problems(tmp_path / "held_out.jsonl")),
            eval_k=2,
        ),
    )
    run_sft(config)
    scalars, texts = tensorboard_events(tmp_path / "out")
    held_out = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    (record,) = [entry for entry in held_out if "eval/avg@2" in entry]
    assert scalars["eval/avg@2"] == [pytest.approx(record["eval/avg@2"])]  # the held-out accuracy, as recorded
    assert scalars["eval/tools/call_frequency"] == [pytest.approx(record["eval/tools/call_frequency"])]
    assert len(scalars["train/loss"]) == 2 and all(loss > 0 for loss in scalars["train/loss"])
    assert "train/learning_rate" in scalars
    arguments = json.loads(texts["args/text_summary"])
    assert arguments["run_name"] == "tiny-sft" and arguments["max_steps"] == 2  # the effective settings


def test_grpo_reports_tool_metrics_and_a_table_of_sampled_rollouts(tmp_path, tiny_model_dir):
    from agentdata.rl.run import build_grpo_trainer

    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            out=str(tmp_path),
            max_steps=1,
            num_generations=2,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            rewards=["correctness"],
            report_to=["tensorboard"],
        ),
    )
    trainer, rollout, _ = build_grpo_trainer(config, sandbox=None)
    outcomes = [True, False, True, True]
    rollout._run = lambda prompts, trainer: [
        replace(crafted_trajectory(), correct=correct, id=f"t{index}") for index, correct in enumerate(outcomes)
    ][: len(prompts)]
    trainer.train()
    scalars, texts = tensorboard_events(tmp_path)
    assert scalars["train/tools/call_frequency"] == [pytest.approx(1.0)]
    assert "train/reward" in scalars and "train/rewards/correctness/mean" in scalars
    assert "train/frac_reward_zero_std" in scalars  # TRL's share of flat groups (all rewards equal)
    assert json.loads(texts["args/text_summary"])["run_name"] == f"{tmp_path.name}-grpo"
    tables = sorted((tmp_path / "checkpoints" / "completions").glob("*.parquet"))
    rows = pq.read_table(tables[0]).to_pylist()
    assert {"question", "conversation", "tool_calls", "verdict", "num_tool_calls", "prompt", "completion"} <= set(
        rows[0]
    )
    assert {row["verdict"] for row in rows} <= {"correct", "wrong"} and rows[0]["question"] == "What is 17 * 23?"
    assert json.loads(rows[0]["tool_calls"])[0]["name"] == "code_interpreter"
    assert json.loads(rows[0]["conversation"])[1]["role"] == "user"


def test_no_tracker_is_trls_none_and_an_unknown_one_is_refused():
    assert TrackingConfig().trl_arguments("runs/x", "sft") == {"report_to": "none", "run_name": "x-sft"}
    assert TrackingConfig(report_to=["mlflow"]).trl_arguments("runs/train/rl", "grpo") == {
        "report_to": ["mlflow"],
        "run_name": "train-grpo",
    }
    assert TrackingConfig(report_to=["none"]).report_to == []
    with pytest.raises(UserError, match="report_to"):
        build(TrackingConfig, {"report_to": ["tensorbored"]})
