"""GRPO's asynchronous mode: TRL's AsyncGRPOTrainer with agentdata's rollout worker and weight transfer.

On the transformers engine (a copy of the policy refreshed after every step) with the tiny random Llama; the
run through a real vLLM server is in tests/test_vllm_real.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import torch

from agentdata.errors import UserError
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import build
from tests.test_rl import crafted_trajectory

HELD_OUT = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 * 5?", "answer": "15"}]


def async_config(tmp_path, tiny_model_dir, **changes) -> GRPOStageConfig:
    settings = dict(
        model=f"hf:{tiny_model_dir}",
        out=str(tmp_path / "rl"),
        max_steps=2,
        prompts_per_step=2,
        num_generations=2,
        max_new_tokens=16,
        overlong_buffer=0,
        use_vllm="no",
        plots=False,
        limit=6,
        mode="async",
    )
    return build(GRPOStageConfig, {**settings, **changes})


# --- the one override of TRL's trainer: its packed-tree attention off CUDA


def test_tree_attention_off_cuda_gives_each_packed_sample_its_own_forward(tiny_model_dir):
    """TRL packs a group's samples into a prefix tree whose shared prompt is forwarded once; its kernel is
    flash-attention 3 (CUDA only). The CPU attention must give every sample exactly the logits of a plain forward
    of that sample alone: two samples sharing a prompt, grouped-query heads (4 query, 2 key/value)."""
    from transformers import AutoModelForCausalLM
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow, register_tree_attention

    from agentdata.rl.async_trainer import register_tree_attention as register_ours

    register_tree_attention()
    register_ours()
    tree_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=TREE_ATTENTION).eval()
    plain_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager").eval()
    prompt = [1, 504, 3458, 314, 2, 198, 77]
    completions = [[900, 901, 902, 903], [900, 905, 906]]
    row = TreeRow()
    samples = []
    for completion in completions:
        ids = torch.tensor(prompt + completion)
        sample = {
            "input_ids": ids,
            "completion_mask": torch.tensor([0] * len(prompt) + [1] * len(completion)),
            "old_log_probs": torch.zeros(len(ids)),
            "advantage": 1.0,
            "group_id": 0,
        }
        row.add(sample)
        samples.append(sample)
    packed = row.pack()
    assert packed["input_ids"].numel() < sum(len(sample["input_ids"]) for sample in samples)  # the prompt is shared
    with torch.no_grad():
        tree_logits = tree_model(
            input_ids=packed["input_ids"].unsqueeze(0),
            position_ids=packed["position_ids"].unsqueeze(0),
            tree_kv_index=packed["tree_kv_index"],
            tree_cu_seqlens_q=packed["tree_cu_seqlens_q"],
            tree_cu_seqlens_k=packed["tree_cu_seqlens_k"],
            tree_max_seqlen_q=int(packed["tree_max_seqlens"][0]),
            tree_max_seqlen_k=int(packed["tree_max_seqlens"][1]),
        ).logits[0]
        # each trained target's prediction, at the packed position TRL scores it from
        tree_scores = tree_logits[packed["token_index"]].log_softmax(-1).gather(1, target_ids(samples).unsqueeze(1))
        plain_scores = torch.cat(
            [
                plain_model(sample["input_ids"].unsqueeze(0))
                .logits[0, len(prompt) - 1 : -1]
                .log_softmax(-1)
                .gather(1, sample["input_ids"][len(prompt) :].unsqueeze(1))
                for sample in samples
            ]
        )
    torch.testing.assert_close(tree_scores, plain_scores, atol=1e-5, rtol=1e-5)


def target_ids(samples: list[dict]) -> torch.Tensor:
    return torch.cat([sample["input_ids"][sample["completion_mask"].bool()] for sample in samples])


# --- the stage end to end


def test_async_grpo_trains_and_logs_what_the_synchronous_stage_logs_with_staleness_and_waits(tmp_path, tiny_model_dir):
    from agentdata.rl.run import run_grpo
    from agentdata.training.trl_settings import TRL_SETTINGS_FILE

    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(problem) + "\n" for problem in HELD_OUT))
    config = async_config(tmp_path, tiny_model_dir, eval_problems=str(held_out), eval_every=1, eval_k=1)
    result = run_grpo(config)
    assert (result.steps, result.rollouts) == (2, "async-policy-copy")
    assert result.weight_pushes == 3  # the start and after each of the 2 steps
    steps = [entry for entry in result.history if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2]
    logged = set().union(*steps)
    for key in (
        "reward",
        "rewards/correctness/mean",
        "accuracy",
        "tools/call_frequency",
        "tools/error_rate",
        "completions/model_tokens",
        "rollouts/failed_ratio",
        "groups/flat_share",
        "entropy",
        "sample/staleness_mean",
        "sample/staleness_max",
        "perf/rollout_wait_s",
        "async/engine_wait_s",
    ):
        assert key in logged, key
    staleness = [entry["sample/staleness_max"] for entry in steps if "sample/staleness_max" in entry]
    assert staleness and max(staleness) <= config.max_staleness
    evaluations = [entry for entry in result.history if "eval/avg@1" in entry]
    assert [entry["step"] for entry in evaluations] == [0, 1, 2]
    recorded = json.loads((tmp_path / "rl" / TRL_SETTINGS_FILE).read_text())
    assert (recorded["max_staleness"], recorded["per_device_train_batch_size"]) == (1, 2)
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(tmp_path / "rl") is not None  # a plain model, loadable anywhere


def test_a_resumed_async_run_goes_on_from_its_checkpoint_with_the_next_groups(tmp_path, tiny_model_dir):
    from agentdata.rl.async_stage import ROLLOUT_STATE_FILE
    from agentdata.rl.run import run_grpo

    first = run_grpo(async_config(tmp_path, tiny_model_dir, save_steps=1))
    checkpoint = tmp_path / "rl" / "checkpoints" / "checkpoint-2"
    next_group = json.loads((checkpoint / ROLLOUT_STATE_FILE).read_text())["next_group"]
    assert first.steps == 2 and next_group >= 4  # two steps of two groups were trained
    resumed = run_grpo(async_config(tmp_path, tiny_model_dir, save_steps=1, max_steps=3, resume_from_checkpoint="last"))
    assert resumed.steps == 3
    assert [entry["step"] for entry in resumed.history if "loss" in entry] == [1, 2, 3]
    third = json.loads((tmp_path / "rl" / "checkpoints" / "checkpoint-3" / ROLLOUT_STATE_FILE).read_text())
    assert third["next_group"] > next_group  # the resumed worker went on with new groups


# --- the worker: the staleness bound, rewards, dynamic sampling


class FixedScorer:
    def score(self, sequences):
        return [[0.0] * len(ids) for ids in sequences]


def worker_with(tmp_path, tiny_model_dir, outcomes, **changes):
    """A worker whose rollouts are crafted trajectories (`outcomes`: per rollout right, wrong or failed)."""
    from agentdata.rl.async_worker import AgentRolloutWorker
    from agentdata.rl.rewards import reward_functions
    from agentdata.rl.rollout import AgentRollout
    from agentdata.rl.run import load_pool
    from agentdata.training.model import load_tokenizer

    config = async_config(tmp_path, tiny_model_dir, rewards=["correctness"]).for_run()
    rollout = AgentRollout(load_pool(config), None, None, config.loop, config.num_generations)
    rollout._run = lambda prompts, trainer: [
        replace(crafted_trajectory("error" if outcome == "failed" else "answer"), correct=outcome == "right")
        for outcome in outcomes
    ]
    tokenizer = load_tokenizer(tiny_model_dir, "auto")
    settings = {"prompts_per_batch": 2, "max_staleness": 1, **changes}
    return AgentRolloutWorker(rollout, tokenizer, reward_functions(config), FixedScorer(), **settings)


def test_the_worker_scores_groups_as_the_synchronous_trainer_and_leaves_failures_out(tmp_path, tiny_model_dir):
    worker = worker_with(tmp_path, tiny_model_dir, ["right", "wrong", "failed", "wrong"])
    samples, metrics = worker.generate_batch([0, 1], version=3)
    assert len(samples) == 3  # the failed rollout is no sample: a failure is no wrong answer
    assert [sample.group_id for sample in samples] == [0, 0, 1]
    assert samples[0].advantage > 0 > samples[1].advantage and samples[2].advantage == 0.0
    assert all(sample.model_version == 3 for sample in samples)
    assert [sample.metrics["rewards/correctness/mean"] for sample in samples] == [1.0, -1.0, -1.0]
    assert metrics["groups/flat_share"] == 0.5 and metrics["rollouts/failed_ratio"] == 0.25
    completion = samples[0].completion_mask
    assert completion[0] == 0 and completion.sum() > 0  # the prompt is context, the model's turns are trained


def test_dynamic_sampling_keeps_flat_groups_off_the_queue_unless_every_group_is_flat(tmp_path, tiny_model_dir):
    worker = worker_with(tmp_path, tiny_model_dir, ["right", "wrong", "wrong", "wrong"], dynamic_sampling=True)
    samples, metrics = worker.generate_batch([0, 1], version=1)
    assert {sample.group_id for sample in samples} == {0}
    assert metrics["dynamic_sampling/kept_group_ratio"] == 0.5
    flat = worker_with(tmp_path, tiny_model_dir, ["wrong"] * 4, dynamic_sampling=True)
    samples, metrics = flat.generate_batch([0, 1], version=1)
    assert len(samples) == 4 and metrics["dynamic_sampling/kept_group_ratio"] == 0.0  # the trainer never starves


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_the_worker_runs_at_most_max_staleness_batches_ahead_of_the_policy(tmp_path, tiny_model_dir, max_staleness):
    """A trainer stand-in takes one batch per step and publishes a new version after each; every sample it takes
    is at most max_staleness versions old, and the worker did run ahead (the overlap is real). Without the bound
    the worker would fill the queue from the first version."""
    worker = worker_with(tmp_path, tiny_model_dir, ["right", "wrong"] * 2, max_staleness=max_staleness)
    worker.update_model_version(1)
    worker.start()
    taken: list[tuple[int, int]] = []  # (version at consumption, sample's version)
    try:
        for step in range(5):
            version = 1 + step
            for _ in range(4):  # one batch: 2 groups of 2
                taken.append((version, worker.rollout_buffer.get(timeout=600)))
            worker.update_model_version(version + 1)
            worker.check_health(600)
        deadline = time.monotonic() + 600
        while worker.rollout_buffer.qsize() < 4 * (max_staleness + 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        ahead = worker.rollout_buffer.qsize()
    finally:
        worker.stop()
    staleness = [version - sample.model_version for version, sample in taken]
    assert max(staleness) <= max_staleness
    # the batch of the step the new version trains, and max_staleness more ahead of it: no more
    assert ahead == 4 * (max_staleness + 1)
    assert worker.engine_wait_s > 0


def test_a_failing_worker_stops_the_trainer_with_its_error(tmp_path, tiny_model_dir):
    worker = worker_with(tmp_path, tiny_model_dir, ["right", "wrong"] * 2)

    def broken(prompts, trainer):
        raise ValueError("sandbox gone")

    worker.rollout._run = broken
    worker.start()
    worker._thread.join(timeout=60)
    with pytest.raises(RuntimeError, match="sandbox gone"):
        worker.check_health(600)


# --- settings


def test_async_settings_that_trls_asynchronous_trainer_has_no_place_for_are_refused(tmp_path, tiny_model_dir):
    with pytest.raises(UserError, match="beta"):
        async_config(tmp_path, tiny_model_dir, beta=0.1)
    with pytest.raises(UserError, match="loss_type"):
        async_config(tmp_path, tiny_model_dir, loss_type="grpo")
    with pytest.raises(UserError, match="max_staleness"):
        async_config(tmp_path, tiny_model_dir, max_staleness=0)
    from agentdata.rl.async_stage import async_grpo_arguments

    config = async_config(tmp_path, tiny_model_dir, trl={"num_iterations": 2})
    with pytest.raises(UserError, match="num_iterations"):
        async_grpo_arguments(config, tmp_path)


def test_print_config_shows_the_asynchronous_mode_and_a_bad_bound_is_one_line(capsys):
    from tests.cli_helpers import run_cli

    assert run_cli(["train", "--stage", "rl", "rl.mode=async", "rl.max_staleness=2", "--print-config", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["rl"]["mode"] == {"value": "async", "source": "override rl.mode"}
    assert tree["rl"]["max_staleness"] == {"value": 2, "source": "override rl.max_staleness"}
    assert run_cli(["train", "--stage", "rl", "rl.mode=async", "rl.max_staleness=0", "--print-config"]) == 2
    assert "max_staleness" in capsys.readouterr().err


def test_vllm_rollouts_at_another_temperature_are_refused_before_sft_trains(tmp_path, capsys, monkeypatch):
    """vLLM's prompt log-probabilities (the behaviour policy's, in the loss) are at temperature 1.0."""
    from agentdata.rl import rollout_engines
    from tests.cli_helpers import run_cli

    monkeypatch.setattr(rollout_engines, "plan_rollouts", lambda *_: rollout_engines.RolloutPlan("file-push"))
    out = tmp_path / "run"
    args = ["train", "--out", str(out), "rl.mode=async", "rl.temperature=0.7", "--max-steps", "1"]
    assert run_cli(args) == 2
    assert "temperature 0.7" in capsys.readouterr().err
    assert not (out / "sft").exists()
