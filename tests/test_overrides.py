"""Dotted overrides (`rl.max_steps=3`) on every settings command; `--print-config` says where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.test_provenance import made_run


def printed(capsys, args: list[str]) -> dict:
    assert run_cli([*args, "--print-config", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_train_overrides_set_one_stage_or_every_stage_and_say_so(capsys):
    tree = printed(capsys, ["train", "rl.max_steps=3", "sft.learning_rate=2e-5"])
    assert tree["rl"]["max_steps"] == {"value": 3, "source": "override rl.max_steps"}
    assert tree["sft"]["learning_rate"] == {"value": 2e-5, "source": "override sft.learning_rate"}
    assert tree["sft"]["max_steps"]["source"] == "default"
    both = printed(capsys, ["train", "max_steps=4"])
    assert both["sft"]["max_steps"]["value"] == both["rl"]["max_steps"]["value"] == 4


@pytest.mark.parametrize("order", [["max_steps=3", "rl.max_steps=4"], ["rl.max_steps=4", "max_steps=3"]])
def test_a_sections_own_key_wins_over_the_every_section_name_in_either_order(tmp_path, capsys, order):
    """In one source a stage's key is the more specific: neither the command line's order nor the file's decides."""
    tree = printed(capsys, ["train", *order])
    assert (tree["rl"]["max_steps"]["value"], tree["sft"]["max_steps"]["value"]) == (4, 3)
    config = tmp_path / "train.yaml"
    lines = ["max_steps: 3\n", "rl:\n  max_steps: 4\n"]
    config.write_text("".join(lines if order[0] == "max_steps=3" else lines[::-1]))
    tree = printed(capsys, ["train", "--config", str(config)])
    assert (tree["rl"]["max_steps"]["value"], tree["sft"]["max_steps"]["value"]) == (4, 3)


def test_file_then_override_then_flag(tmp_path, capsys):
    config = tmp_path / "train.yaml"
    config.write_text("rl:\n  max_steps: 2\n  num_generations: 4\nsft:\n  max_steps: 7\n")
    tree = printed(capsys, ["train", "--config", str(config), "rl.max_steps=3", "sft.max_steps=8", "--max-steps", "9"])
    assert tree["rl"]["num_generations"] == {"value": 4, "source": f"file {config} rl"}
    assert tree["rl"]["max_steps"] == {"value": 9, "source": "flag --max-steps"}  # a flag over an override
    assert tree["sft"]["max_steps"]["value"] == 9
    tree = printed(capsys, ["train", "--config", str(config), "rl.max_steps=3"])
    assert tree["rl"]["max_steps"]["value"] == 3 and tree["sft"]["max_steps"]["value"] == 7


def test_print_config_is_yaml_with_the_sources_as_comments(capsys):
    assert run_cli(["curate", "nothing-here", "keep_incorrect=true", "--print-config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "keep_incorrect: true  # override keep_incorrect" in lines
    assert [line for line in lines if line.startswith("max_per_problem:")][0].endswith("  # default")


def test_a_typo_is_one_line_naming_the_closest_key(capsys):
    assert run_cli(["train", "rl.max_stepz=3"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "rl.max_stepz=3" in error and "did you mean rl.max_steps=" in error


def test_a_bad_value_names_the_override_as_written(capsys):
    assert run_cli(["train", "rl.max_steps=0", "--print-config"]) == 2
    assert "rl.max_steps=0: must be at least 1" in capsys.readouterr().err


def test_an_options_value_is_never_an_override(capsys):
    tree = printed(capsys, ["collect", "problems.jsonl", "--engine-option", "max_turns=9", "max_turns=3"])
    assert tree["engine_options"]["value"] == {"max_turns": 9} and tree["max_turns"]["value"] == 3


@pytest.mark.parametrize("keep", [False, True])
def test_an_override_changes_what_the_command_does(tmp_path, monkeypatch, keep):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))  # 8 trajectories, one of them incorrect
    override = f"keep_incorrect={str(keep).lower()}"
    assert run_cli(["curate", "run", "--out", "sft.jsonl", "--for", "openai", override]) == 0
    assert len(Path("sft.jsonl").read_text().splitlines()) == (8 if keep else 7)


def test_evals_name_equals_spec_models_stay_models(capsys):
    args = ["eval", "base=smollm2", "bench.jsonl", "--compare", "trained=hf:x", "max_turns=3", "rl.x=1"]
    assert run_cli([*args[:-1], "--print-config", "--json"]) == 0  # base=smollm2 is the model, max_turns a setting
    assert json.loads(capsys.readouterr().out)["max_turns"]["value"] == 3
    assert run_cli(args) == 2  # a dotted key is always an override: this one is told as unknown
    assert "rl.x=1: unknown setting 'rl.x'" in capsys.readouterr().err


def test_did_you_mean_is_written_once():
    """A file, an override and a recipe name an unknown key with the one helper (settings.unknown_setting)."""
    import agentdata

    root = Path(agentdata.__file__).parent
    users = [path.relative_to(root).as_posix() for path in root.rglob("*.py") if "close_matches" in path.read_text()]
    assert users == ["settings/fields.py"]


@pytest.mark.parametrize(
    "args, typo, closest",
    [
        (["curate", "runs/x", "keep_incorect=true"], "keep_incorect", "keep_incorrect=..."),
        (["eval", "smollm2", "bench.jsonl", "max_turn=3"], "max_turn", "max_turns=..."),
        (["import", "sts", "a.jsonl", "concurency=3"], "concurency", "concurrency=..."),
        (["view", "runs/x", "hots=1"], "hots", "host=..."),
    ],
)
@pytest.mark.parametrize("print_config", [False, True])
def test_an_unknown_key_after_the_paths_is_named_as_a_key_not_read_as_a_path(capsys, args, typo, closest, print_config):
    assert run_cli(args + ["--print-config"] * print_config) == 2  # --print-config never shows the defaults instead
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"unknown setting {typo!r}; did you mean {closest}" in error, error


def test_a_path_that_looks_like_a_key_stays_a_path(tmp_path, monkeypatch):
    import typer

    from agentdata.cli.app import app
    from agentdata.cli.options import split_overrides

    monkeypatch.chdir(tmp_path)
    Path("keep=x.parquet").touch()
    curate = typer.main.get_command(app).commands["curate"]
    rest, overrides = split_overrides(["keep=x.parquet", "run", "max_per_problem=2", "a=b"], curate.params)
    assert rest == ["keep=x.parquet", "run"] and overrides == ["max_per_problem=2", "a=b"]


def test_import_applies_its_overrides(tmp_path, capsys):
    trace = tmp_path / "a.jsonl"
    trace.write_text("")
    tree = printed(capsys, ["import", "sts", str(trace), "concurrency=3"])
    assert tree["concurrency"] == {"value": 3, "source": "override concurrency"}
    assert run_cli(["import", "sts", str(trace), "shard_size=0", "--out", str(tmp_path / "run")]) == 2
    assert "shard_size=0: must be in [1, 1000000]" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args, key",
    [
        (["train", "rl.max_steps=3", "rl.max_steps=4"], "rl.max_steps"),
        (["train", "rl.max-steps=3", "rl.max_steps=4"], "rl.max_steps"),
        (["curate", "runs/x", "keep_incorrect=true", "keep_incorrect=false"], "keep_incorrect"),
    ],
)
def test_a_key_given_twice_on_the_command_line_is_refused_as_in_a_file(capsys, args, key):
    assert run_cli([*args, "--print-config"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"{key} is given twice" in error, error


@pytest.mark.parametrize(
    "args, says",
    [
        (["train", "--max-steps", "3", "--max-steps", "4"], "--max-steps is given twice on the command line"),
        (["train", "--lora", "--no-lora"], "--lora and --no-lora set one setting"),
        (["curate", "runs/x", "--out=a.parquet", "-o", "b.parquet"], "--out and -o set one setting"),
    ],
)
def test_a_flag_given_twice_is_refused_as_a_key_is(capsys, args, says):
    assert run_cli([*args, "--print-config"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and says in error, error


def test_a_repeatable_flag_still_repeats(capsys):
    tree = printed(capsys, ["eval", "smollm2", "bench.jsonl", "--compare", "a=hf:x", "--compare", "b=hf:y"])
    assert tree["max_turns"]["source"] == "default"  # both --compare taken, nothing refused


def test_model_is_the_engine_options_model_key_over_the_file_and_the_engine_option_flag(tmp_path, capsys):
    config = tmp_path / "collect.yaml"
    config.write_text("engine_options:\n  model: from-file\n  api_key: k\n")
    collect = ["collect", "--teacher", "openai:http://127.0.0.1:9/v1", "--config", str(config)]
    tree = printed(capsys, [*collect, "--model", "served"])
    assert tree["engine_options"] == {"value": {"model": "served", "api_key": "k"}, "source": "flag --model"}
    tree = printed(
        capsys, [*collect, "--engine-option", "model=flag", "--model", "served"]
    )  # the flag replaced the file's
    assert tree["engine_options"]["value"] == {"model": "served"}
    eval_tree = printed(capsys, ["eval", "openai:http://127.0.0.1:9/v1", "a.jsonl", "--model", "served"])
    profile = printed(capsys, ["filter", "--student", "openai:http://127.0.0.1:9/v1", "--model", "served"])["profile"]
    assert eval_tree["engine_options"]["value"] == profile["engine_options"]["value"] == {"model": "served"}
