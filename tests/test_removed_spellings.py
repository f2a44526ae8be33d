"""The spellings of 0.4 and older are no aliases: each is one line naming its new spelling (CHANGELOG.md)."""

from __future__ import annotations

import importlib

import pytest

from tests.cli_helpers import run_cli


@pytest.mark.parametrize(
    "args, new",
    [
        (["train", "--rl-max-steps", "3"], "rl.max_steps=VALUE"),
        (["train", "--sft-learning-rate", "1e-5"], "sft.learning_rate=VALUE"),
        (["train", "--sft-lora"], "sft.lora=true"),
        (["train", "--eval-every", "5"], "rl.eval_every=N"),
        (["filter", "problems.jsonl", "--profile-seed", "3"], "profile.seed=VALUE"),
        (["curate", "runs/x", "--max-tool-calls", "5"], "--tool-calls MIN,MAX"),
        (["collect", "problems.jsonl", "--top-p", "0.9"], "top_p=VALUE"),
        (["eval", "smollm2", "bench.jsonl", "--ray-cpus", "2"], "ray_cpus=VALUE"),
        (["train", "--tool-timeout", "5"], "tool_timeout=VALUE"),
        (["collect", "problems.jsonl", "--no-retry-errors"], "retry_errors=false"),
        (["curate", "runs/x", "--prm-option", "head=lm"], """prm_options='{"KEY": VALUE}'"""),
        (["collect", "problems.jsonl", "--max-turns", "3"], "max_turns=VALUE"),
        (["train", "--epsilon-high", "0.3"], "epsilon_high=VALUE"),
        (["train", "--lora-r", "8"], "lora_r=VALUE"),
        (["train", "--packing"], "packing=true"),
        (["train", "--no-plots"], "plots=false"),
        (["train", "--temperature", "0.9"], "temperature=VALUE"),
        (["train", "--sft-save-steps", "3"], "sft.save_steps=VALUE"),
        (["filter", "problems.jsonl", "--embedding", "tfidf"], "embedding=VALUE"),
        (["filter", "problems.jsonl", "--push-to-hub", "me/pool"], "push_to_hub=VALUE"),
        (["eval", "smollm2", "bench.jsonl", "--run-name", "x"], "run_name=VALUE"),
    ],
)
def test_a_flag_of_an_older_release_is_one_line_naming_its_new_spelling(capsys, args, new):
    assert run_cli(args) == 2
    error = capsys.readouterr().err.strip()
    old = next(arg for arg in reversed(args) if arg.startswith("--")).replace("--no-", "--")
    assert error.count("\n") == 0 and f"{old} is gone: write {new}" in error


def test_an_end_of_a_band_in_a_file_names_the_band(tmp_path, capsys):
    config = tmp_path / "curate.yaml"
    config.write_text("max_tool_calls: 5\n")
    assert run_cli(["curate", "runs/x", "--config", str(config)]) == 2
    assert "max_tool_calls is gone: write tool_calls: [MIN, MAX]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, said",
    [
        (["collect", "teacher=hf:m"], "teacher is gone: write model"),
        (["filter", "profile.teacher=hf:m"], "profile: teacher is gone: write model"),
        (
            ["experiment", "sft-data", "--dry-run", "collect.teacher=hf:m"],
            "collect.teacher is gone: write collect.model",
        ),
    ],
)
def test_the_rollouts_model_of_0_4_named_teacher_is_one_line_naming_model(capsys, args, said):
    assert run_cli(args) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and said in error


def test_experiments_set_of_0_4_is_one_line_naming_the_positional_overrides(capsys):
    assert run_cli(["experiment", "sft-data", "--dry-run", "--set", "eval.samples=8", "--set", "loop.top_p=0.9"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--set is gone: write eval.samples=8 loop.top_p=0.9" in error


def test_a_teacher_key_in_a_file_or_in_code_names_model(tmp_path, capsys):
    from agentdata.agent.config import CollectConfig
    from agentdata.errors import UserError
    from agentdata.settings import build

    config = tmp_path / "collect.yaml"
    config.write_text("teacher: hf:m\n")
    assert run_cli(["collect", "--config", str(config)]) == 2
    assert f"{config}: teacher is gone: write model" in capsys.readouterr().err
    with pytest.raises(UserError, match="teacher is gone: write model"):
        build(CollectConfig, {"teacher": "hf:m"})
    assert build(CollectConfig, {"model": "hf:m"}).model == "hf:m"


def test_the_old_module_name_says_where_the_steps_are():
    with pytest.raises(ImportError, match="agentdata.filters is now agentdata.steps"):
        importlib.import_module("agentdata.filters")


def test_no_removed_flag_is_listed_in_help(capsys):
    assert run_cli(["train", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--rl-max-steps" not in shown and "--sft-learning-rate" not in shown and "--eval-every" not in shown
    assert "--lora-r" not in shown and "--epsilon-high" not in shown


def test_a_setting_without_a_flag_is_an_override(capsys):
    assert run_cli(["train", "lora_r=8", "rl.epsilon_high=0.3", "--print-config"]) == 0
    shown = capsys.readouterr().out
    assert "lora_r: 8  # override lora_r" in shown and "epsilon_high: 0.3  # override rl.epsilon_high" in shown


def test_a_recipes_eval_k_of_0_4_names_eval_samples_as_eval_takes_it(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("base:\n  eval: {k: 3}\narms:\n  a: {sft.data: real}\n  b: {}\n")
    for args in (["experiment", str(recipe), "--dry-run"], ["experiment", "pool", "eval.k=8", "--dry-run"]):
        assert run_cli(args) == 2
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0 and "eval.k is gone: write eval.samples" in error, error
    assert f"{recipe} base: eval.k is gone" in run_and_read(["experiment", str(recipe)], capsys)


def run_and_read(args, capsys) -> str:
    run_cli(args)
    return capsys.readouterr().err
