"""GRPO stage: the rollout bridge's masks, rewards, dynamic sampling, and a real training run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from agentdata.errors import UserError
from agentdata.records import Trajectory
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.rewards import reward_functions
from agentdata.rl.rollout import trajectory_tokens
from agentdata.rl.trainer import FLAT_GROUPS_KEY, GRADIENT_SAMPLES_KEY, drop_flat_groups, flat_group_share
from agentdata.settings import build
from agentdata.sft.config import SFTStageConfig
from agentdata.verify import CorrectnessReward, OverlongReward
from tests.train_fixtures import tool_conversation


def crafted_trajectory(finish_reason: str = "answer") -> Trajectory:
    messages = [{"role": "system", "content": "Use the tool."}, *tool_conversation()]
    return Trajectory(
        id="t",
        problem_id="p",
        question="What is 17 * 23?",
        answer="391",
        messages=messages,
        correct=True,
        num_tool_calls=1,
        finish_reason=finish_reason,
    )


@pytest.mark.parametrize("protocol", ["hermes", "codeblock", "qwen3coder"])
def test_rollout_tokens_mask_tool_output_and_end_at_end_of_turn(tokenizer, protocol):
    tokens = trajectory_tokens(crafted_trajectory(), tokenizer, protocol)
    assert tokenizer.decode(tokens.prompt_ids).endswith("What is 17 * 23?<|im_end|>\n<|im_start|>assistant\n")
    assert len(tokens.env_mask) == len(tokens.completion_ids)
    model_text = tokenizer.decode([t for t, bit in zip(tokens.completion_ids, tokens.env_mask) if bit])
    env_text = tokenizer.decode([t for t, bit in zip(tokens.completion_ids, tokens.env_mask) if not bit])
    assert "391\n" in env_text and "print(17 * 23)" in model_text and "\\boxed{391}" in model_text
    assert "391" not in model_text.replace("\\boxed{391}", "")  # the tool's output is never a model token
    assert tokens.completion_ids[-1] == tokenizer.eos_token_id and tokens.env_mask[-1] == 1


def test_a_rollout_cut_by_the_token_budget_is_not_taught_to_stop(tokenizer):
    tokens = trajectory_tokens(crafted_trajectory("max_tokens"), tokenizer, "hermes")
    assert tokens.completion_ids[-1] != tokenizer.eos_token_id


def test_rewards_follow_the_findings():
    # Rollout completions arrive judged by the loop (`correct`): the reward does not re-read their text.
    plain = CorrectnessReward()
    assert plain([], [None] * 2, correct=[True, False], num_tool_calls=[3, 3]) == [1.0, -1.0]
    tcr = CorrectnessReward(use_tool_call_reward=True)
    assert tcr([], [None] * 3, correct=[False, False, True], num_tool_calls=[2, 6, 2]) == pytest.approx(
        [-0.8, -0.6, 1.0]
    )
    penalised = CorrectnessReward(penalty_per_extra_call=0.1, free_calls=1)
    assert penalised([], [None], correct=[True], num_tool_calls=[3]) == pytest.approx([0.8])
    overlong = OverlongReward(max_len=100, buffer=20)
    assert overlong([], [None] * 3, model_token_counts=[80, 90, 120]) == pytest.approx([0.0, -0.5, -1.0])


def test_the_stage_builds_its_rewards_from_the_settings():
    rewards = reward_functions(
        build(GRPOStageConfig, {"tool_call_reward": True, "max_new_tokens": 100, "overlong_buffer": 20})
    )
    assert [reward.__name__ for reward in rewards] == ["correctness", "overlong"]
    assert rewards[0]([], [None], correct=[False], num_tool_calls=[2]) == pytest.approx([-0.8])
    assert rewards[1]([], [None], model_token_counts=[90]) == pytest.approx([-0.5])
    no_shaping = reward_functions(GRPOStageConfig(overlong_buffer=0))
    assert [reward.__name__ for reward in no_shaping] == ["correctness"]
    with pytest.raises(UserError, match="unknown reward 'brevity'.*correctness, overlong"):
        reward_functions(GRPOStageConfig(rewards=["brevity"]))


def test_a_reward_plugin_from_a_file(tmp_path):
    plugin = tmp_path / "my_rewards.py"
    plugin.write_text(
        "def brevity(prompts, completions, model_token_counts, **kwargs):\n"
        "    return [-count / 100 for count in model_token_counts]\n"
    )
    rewards = reward_functions(GRPOStageConfig(rewards=["correctness", f"{plugin}:brevity"]))
    assert [reward.__name__ for reward in rewards] == ["correctness", "brevity"]
    assert rewards[1]([], [None], model_token_counts=[30]) == pytest.approx([-0.3])


def test_dynamic_sampling_drops_only_groups_with_equal_rewards():
    output = {"advantages": torch.tensor([0.0, 0.0, 0.5, -0.5]), "completion_mask": torch.ones(4, 3, dtype=torch.long)}
    kept = drop_flat_groups(output, group_size=2)
    assert kept == 0.5
    assert output["completion_mask"].sum(dim=1).tolist() == [0, 0, 3, 3]


def test_config_explains_bad_combinations():
    with pytest.raises(ValueError, match="clip-higher"):
        GRPOStageConfig(epsilon=0.3, epsilon_high=0.2)
    with pytest.raises(ValueError, match="at least 2"):
        GRPOStageConfig(num_generations=1)
    with pytest.raises(ValueError, match="pick one"):
        GRPOStageConfig(tool_call_reward=True, extra_call_penalty=0.1)
    defaults = GRPOStageConfig()
    assert (defaults.epsilon, defaults.epsilon_high, defaults.beta, defaults.num_generations) == (0.2, 0.28, 0.0, 8)


def test_rollouts_use_the_configured_system_prompt(tmp_path, tiny_model_dir):
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
            system_prompt="Use the tool.",
        ),
    )
    _, rollout, _ = build_grpo_trainer(config, sandbox=None)
    assert rollout.loop_config.system_prompt == "Use the tool."


def test_a_failed_rollout_is_masked_out_of_its_group_not_scored_wrong(tmp_path, tiny_model_dir):
    """Against the installed TRL: the failed row gets no reward, no advantage and no loss tokens, and its
    group's baseline is the valid members' mean (a right and a wrong answer: advantages +a and -a)."""
    from dataclasses import replace

    from agentdata.rl.run import build_grpo_trainer

    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            out=str(tmp_path),
            max_steps=1,
            num_generations=3,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            rewards=["correctness"],
        ),
    )
    trainer, rollout, _ = build_grpo_trainer(config, sandbox=None)
    outcomes = ["right", "wrong", "failed", "right", "wrong", "wrong"]
    rollout._run = lambda prompts, trainer: [
        replace(crafted_trajectory("error" if outcome == "failed" else "answer"), correct=outcome == "right")
        for outcome in outcomes
    ]
    trainer.model.train()
    inputs = [dict(trainer.train_dataset[index]) for index in (0, 0, 0, 1, 1, 1)]
    output = trainer._generate_and_score_completions(inputs)
    advantages = output["advantages"].tolist()
    assert advantages[2] == 0.0 and advantages[0] == pytest.approx(-advantages[1]) and advantages[0] > 0.5
    assert advantages[3] > 0 > advantages[4] and advantages[3] != pytest.approx(-advantages[4])  # the unmasked group
    assert output["completion_mask"].sum(dim=1).tolist()[2] == 0
    assert all(length > 0 for length in output["completion_mask"].sum(dim=1).tolist()[:2])
    assert trainer._metrics["train"]["rollouts/failed_ratio"] == [pytest.approx(1 / 6)]
    assert trainer._metrics["train"]["accuracy"] == [pytest.approx(2 / 5)]  # over the valid rollouts


def test_a_group_is_flat_when_its_scorable_rewards_are_all_equal():
    nan = float("nan")
    rewards = torch.tensor([1.0, 1.0, nan, 1.0, -1.0, 1.0, nan, nan, 0.5, 0.2, 0.2, 0.2])
    assert flat_group_share(rewards, group_size=3) == 0.75  # the third: one scorable rollout, no baseline
    assert flat_group_share(torch.ones(4), group_size=2) == 1.0
    assert math.isnan(flat_group_share(torch.ones(3), group_size=2))  # groups split across processes


def test_every_grpo_step_logs_its_flat_groups_and_gradient_samples_without_dynamic_sampling(tmp_path, tiny_model_dir):
    """The pool recipe's mechanism: a flat group (all rewards equal) gives no gradient. Logged every step
    whether or not dynamic sampling drops such groups; a failed rollout is no reward of its group."""
    from dataclasses import replace

    from agentdata.rl.run import build_grpo_trainer

    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            out=str(tmp_path),
            max_steps=1,
            num_generations=3,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            rewards=["correctness"],
        ),
    )
    trainer, rollout, _ = build_grpo_trainer(config, sandbox=None)
    assert not trainer.dynamic_sampling
    outcomes = ["wrong", "wrong", "failed", "right", "wrong", "wrong"]  # flat (the failure left out), then not
    rollout._run = lambda prompts, trainer: [
        replace(crafted_trajectory("error" if outcome == "failed" else "answer"), correct=outcome == "right")
        for outcome in outcomes
    ]
    trainer.model.train()
    trainer._generate_and_score_completions([dict(trainer.train_dataset[index]) for index in (0, 0, 0, 1, 1, 1)])
    assert trainer._metrics["train"][FLAT_GROUPS_KEY] == [0.5]
    assert trainer._metrics["train"][GRADIENT_SAMPLES_KEY] == [3.0]  # the second group's three: advantage not 0


def test_config_reads_the_online_band_from_text_or_a_list():
    assert GRPOStageConfig(online_band="0.05,0.8").online_band == (0.05, 0.8)
    assert GRPOStageConfig(online_band=[0.1, 0.9]).online_band == (0.1, 0.9)
    with pytest.raises(ValueError, match="LO,HI"):
        GRPOStageConfig(online_band="0.5")
    with pytest.raises(ValueError, match="online_band '0.8,0.05': needs LO < HI"):
        GRPOStageConfig(online_band="0.8,0.05")
    with pytest.raises(ValueError, match="online_band 1.5: must be in"):
        GRPOStageConfig(online_band="0.5,1.5")


def test_the_online_band_replaces_groups_outside_it_with_fresh_prompts(tmp_path, tiny_model_dir):
    """Through the installed TRL: the batch's two groups (all wrong, all right) are replaced by the
    groups of two fresh pool prompts solved half the time, and TRL trains on the fresh prompts."""
    from dataclasses import replace

    from agentdata.rl.rollout import question_of
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
            online_band="0.05,0.8",
            limit=4,
        ),
    )
    trainer, rollout, _ = build_grpo_trainer(config, sandbox=None)
    questions = [problem.question for problem in rollout.problems]
    solved = {
        questions[0]: lambda i: False,
        questions[1]: lambda i: True,
        questions[2]: lambda i: i % 2 == 0,
        questions[3]: lambda i: i % 2 == 1,
    }
    runs = []

    def fake_run(prompts, trainer):
        runs.append([question_of(prompt) for prompt in prompts])
        problems = [rollout.problem_for(prompt) for prompt in prompts]
        return [
            replace(
                crafted_trajectory(),
                id=f"{problem.id}-{i}",
                problem_id=problem.id,
                question=problem.question,
                answer=problem.answer,
                messages=tool_conversation(problem.question, problem.answer),
                correct=solved[problem.question](i),
            )
            for i, problem in enumerate(problems)
        ]

    rollout._run = fake_run
    trainer.model.train()
    inputs = [dict(trainer.train_dataset[index]) for index in (0, 0, 1, 1)]
    output = trainer._generate_and_score_completions(inputs)
    assert len(runs) == 2 and sorted(set(runs[1])) == sorted(questions[2:])  # one replacement round, fresh prompts only
    trained_on = {trainer.processing_class.decode(ids, skip_special_tokens=True) for ids in output["prompt_ids"]}
    assert all(any(question in text for question in questions[2:]) for text in trained_on)
    assert all(abs(advantage) > 0.5 for advantage in output["advantages"].tolist())  # every group carries signal
    metrics = trainer._metrics["train"]
    assert (metrics["online_band/resampled_groups"], metrics["online_band/unfilled_groups"]) == ([2.0], [0.0])
    assert rollout.last_trajectories[0].answer == rollout.problem_for(runs[1][0]).answer


def test_a_section_key_that_is_neither_ours_nor_trls_is_refused_with_the_closest_keys():
    from agentdata.train.settings import TRAIN_SETTINGS

    section = {"max_steps": 3, "num_iterations": 2, "scale_rewards": "batch"}
    layer, _ = TRAIN_SETTINGS.layer({"rl": section}, "cfg.yaml")
    assert {name: given.value for name, given in layer["rl"].items()} == {
        "max_steps": 3,
        "trl": {"num_iterations": 2, "scale_rewards": "batch"},
    }
    with pytest.raises(UserError, match=r"cfg.yaml rl: unknown setting 'num_iteration'; did you mean num_iterations"):
        TRAIN_SETTINGS.layer({"rl": {"num_iteration": 2}}, "cfg.yaml")


def test_a_trl_only_field_reaches_the_trl_config_and_a_bad_value_is_a_user_error(tmp_path):
    from trl import GRPOConfig

    from agentdata.rl.run import trl_grpo_config
    from agentdata.training.trl_settings import trl_arguments, write_trl_settings

    computed = trl_grpo_config(GRPOStageConfig(), tmp_path, use_vllm=False).to_dict()
    computed = {
        key: value
        for key, value in computed.items()
        if key in {"output_dir", "per_device_train_batch_size", "num_generations", "use_cpu", "report_to", "bf16"}
    }
    arguments = trl_arguments(GRPOConfig, computed, {"num_iterations": 3, "max_grad_norm": 0.5})
    assert (arguments.num_iterations, arguments.max_grad_norm, arguments.num_generations) == (3, 0.5, 8)
    recorded = json.loads(write_trl_settings(arguments, tmp_path).read_text())
    assert recorded["num_iterations"] == 3
    with pytest.raises(UserError, match=r"refused the settings \['num_generations'\]"):  # 8 per device: not divisible
        trl_arguments(GRPOConfig, computed, {"num_generations": 3})


def test_trl_configs_are_built_without_our_own_deprecation_and_pinning_warnings(tmp_path):
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing; pinned memory needs an accelerator
    import warnings

    import torch

    from agentdata.rl.run import trl_grpo_config
    from agentdata.sft.config import SFTStageConfig
    from agentdata.sft.run import trl_sft_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grpo = trl_grpo_config(GRPOStageConfig(gradient_checkpointing=True), tmp_path, use_vllm=False)
        sft = trl_sft_config(SFTStageConfig(), tmp_path)
    assert not [str(w.message) for w in caught if "deprecated" in str(w.message)]
    assert (grpo.activation_checkpointing, grpo.gradient_checkpointing, sft.activation_checkpointing) == (
        True,
        True,
        False,
    )
    assert grpo.dataloader_pin_memory is sft.dataloader_pin_memory is torch.accelerator.is_available()
    with pytest.raises(ValueError, match="activation_checkpointing is computed from `gradient_checkpointing`"):
        GRPOStageConfig(trl={"activation_checkpointing": True})


def test_a_trl_only_field_reaches_the_grpo_trainer(tmp_path, tiny_model_dir):
    from agentdata.rl.run import build_grpo_trainer
    from agentdata.train.settings import train_settings

    section = {
        "num_generations": 2,
        "num_iterations": 2,
        "max_grad_norm": 0.5,
        "scale_rewards": "batch",
        "max_new_tokens": 16,
        "overlong_buffer": 0,
    }
    own = {"model": f"hf:{tiny_model_dir}", "out": str(tmp_path), "max_steps": 1, "use_vllm": "no"}
    config = train_settings(settings={"rl": {**section, **own}})["rl"]
    assert config.trl == {"num_iterations": 2, "max_grad_norm": 0.5, "scale_rewards": "batch"}
    trainer, _, _ = build_grpo_trainer(config, sandbox=None)
    assert (trainer.args.num_iterations, trainer.args.max_grad_norm, trainer.args.scale_rewards) == (2, 0.5, "batch")
    assert trainer.num_iterations == 2  # what the trainer itself runs with, not only its args
    assert (trainer.args.max_completion_length, trainer.args.num_generations) == (16, 2)  # the stage's own still set


def test_a_trl_field_the_stage_computes_is_refused_naming_the_setting_to_use():
    with pytest.raises(ValueError, match="computed from `max_new_tokens`.*set max_new_tokens instead"):
        GRPOStageConfig(trl={"max_completion_length": 64})
    with pytest.raises(ValueError, match="set out instead"):
        GRPOStageConfig(trl={"output_dir": "elsewhere"})
    with pytest.raises(ValueError, match="learning_rate is a setting of the stage itself"):
        GRPOStageConfig(trl={"learning_rate": 0.1})
    with pytest.raises(UserError, match="cfg.yaml: max_completion_length is computed"):
        build(GRPOStageConfig, {"trl": {"max_completion_length": 64}}, source="cfg.yaml")


def test_settings_that_depend_on_another_follow_it_unless_set():
    assert GRPOStageConfig().overlong_buffer == 128  # a quarter of the default 512
    assert build(GRPOStageConfig, {"max_new_tokens": 128}).overlong_buffer == 32  # was refused: buffer 128 >= 128
    assert build(GRPOStageConfig, {"max_new_tokens": 128, "overlong_buffer": 0}).overlong_buffer == 0
    with pytest.raises(UserError, match="overlong_buffer 128 must be below max_new_tokens 128: leave it unset"):
        build(GRPOStageConfig, {"max_new_tokens": 128, "overlong_buffer": 128})
    lora = build(GRPOStageConfig, {"lora": True, "lora_r": 8}).optimiser  # the stages' shared block
    assert (lora.lora_alpha, lora.learning_rate, GRPOStageConfig().optimiser.learning_rate) == (16, 1e-5, 1e-6)
    assert (
        build(GRPOStageConfig, {"lora": True, "learning_rate": 3e-6, "lora_alpha": 7}).optimiser.learning_rate == 3e-6
    )
    assert (lora.lora_dropout, SFTStageConfig().optimiser.lora_dropout) == (0.0, 0.05)  # each stage's own default


def test_train_with_a_small_max_new_tokens_scales_the_buffer_and_refuses_an_explicit_misfit(tmp_path, capsys):
    from agentdata.train.run import TrainRequest, plan_train
    from tests.cli_helpers import run_cli

    assert plan_train(TrainRequest(stage="rl", settings={"max_new_tokens": 128})).rl.overlong_buffer == 32
    assert (
        run_cli(
            ["train", "--stage", "rl", "--max-new-tokens", "64", "overlong_buffer=64", "--out", str(tmp_path / "out")]
        )
        == 2
    )
    assert "overlong_buffer 64 must be below max_new_tokens 64" in capsys.readouterr().err


def test_grpo_takes_every_text_protocol_the_registry_knows_and_refuses_native_naming_those(tmp_path):
    assert build(GRPOStageConfig, {"protocol": "qwen3coder"}).loop.protocol == "qwen3coder"
    plugin = tmp_path / "protocols.py"
    plugin.write_text(
        "from agentdata.formats.hermes import HermesProtocol\n\n"
        "class Shouting(HermesProtocol):\n    name = 'shouting'\n"
    )
    assert build(GRPOStageConfig, {"protocol": f"{plugin}:Shouting"}).loop.protocol.endswith(":Shouting")
    with pytest.raises(
        UserError, match="protocol native cannot drive GRPO rollouts.*use one of hermes, codeblock, qwen3coder"
    ):
        build(GRPOStageConfig, {"protocol": "native"})
    with pytest.raises(UserError, match="hermez.*hermes, codeblock, qwen3coder, native"):
        build(GRPOStageConfig, {"protocol": "hermez"})


def test_a_pool_smaller_than_a_step_is_repeated_and_trains(tmp_path, tiny_model_dir):
    """One problem in the pool, two prompts a step: TRL's sampler dropped the incomplete batch and the stage
    trained 0 steps without a word (the quickstart's band once kept 1 of 8)."""
    from agentdata.events import listening
    from agentdata.rl.run import run_grpo

    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"question": "What is 17 * 23?", "answer": "391"}) + "\n")
    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            out=str(tmp_path / "rl"),
            rl_pool=str(pool),
            max_steps=2,
            prompts_per_step=2,
            num_generations=2,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            plots=False,
        ),
    )
    events = []
    with listening(events.append):
        result = run_grpo(config)
    assert result.steps == 2
    assert any("fewer than prompts_per_step 2" in event.message for event in events)
