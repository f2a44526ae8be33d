"""One run, one protocol: GRPO and the closed loop speak to the model as its SFT set taught it, and a model
agentdata trained records its protocol and system prompt, so later runs on it default to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.engines.trained import TRAINED_FILE, TrainedPrompt, write_trained_prompt
from agentdata.evaluation.config import EvalConfig
from agentdata.formats import get_protocol
from agentdata.records import CODE_TOOL
from agentdata.train.run import TrainRequest, plan_train
from tests.cli_helpers import run_cli
from tests.test_train_closed_loop import grpo_runs, student, write_problems  # noqa: F401 (fixtures)
from tests.train_fixtures import write_sft_set

CUSTOM_PROMPT = "Solve it. Call the python tool in <tool_call> tags, then box the answer."


def write_set(path: Path, count: int = 4, format: str | None = "hermes", system: str | None = None) -> Path:
    """An SFT set whose rows carry a `format` column (as collect and curate write it), with a system message."""
    rows = [json.loads(line) for line in write_sft_set(path, count=count).read_text().splitlines()]
    for row in rows:
        if format:
            row["format"] = format
        if system:
            row["messages"] = [{"role": "system", "content": system}, *row["messages"]]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_train_on_hermes_rows_profiles_and_rolls_out_grpo_in_hermes(
    tmp_path,
    tiny_model_dir,
    student,  # noqa: F811
    grpo_runs,  # noqa: F811
    capsys,
):
    sft_data, problems = write_set(tmp_path / "sft.jsonl"), write_problems(tmp_path / "problems.jsonl")
    config = tmp_path / "train.yaml"
    config.write_text("sft:\n  batch_size: 2\n  max_length: 512\n  max_steps: 1\n")
    out = tmp_path / "out"
    args = ["train", "--model", f"hf:{tiny_model_dir}", "--sft-data", str(sft_data), "--rl-problems", str(problems)]
    assert run_cli([*args, "--config", str(config), "--out", str(out), "--max-new-tokens", "64"]) == 0
    assert "warning" not in capsys.readouterr().out
    hermes_prompt = get_protocol("hermes").system_prompt([CODE_TOOL])
    [engine] = student  # the closed loop's profile of the SFT model: asked in hermes, as SFT taught it
    assert engine.spec == f"hf:{out / 'sft'}" and {r.messages[0]["content"] for r in engine.requests} == {hermes_prompt}
    [profile_dir] = [path for path in (out / "profile").iterdir() if path.is_dir()]
    assert json.loads((profile_dir / "manifest.json").read_text())["settings"]["protocol"] == "hermes"
    [grpo] = grpo_runs
    assert (grpo.loop.protocol, grpo.loop.system_prompt) == ("hermes", None)  # None: hermes's own prompt
    recorded = json.loads((out / "sft" / TRAINED_FILE).read_text())
    assert (recorded["protocol"], recorded["system_prompt"], recorded["stage"]) == ("hermes", None, "sft")


def test_a_protocol_the_rows_contradict_is_refused_before_any_work(tmp_path, tiny_model_dir, capsys):
    sft_data = write_set(tmp_path / "sft.jsonl")
    args = ["train", "--model", f"hf:{tiny_model_dir}", "--sft-data", str(sft_data), "--out", str(tmp_path / "o")]
    assert run_cli([*args, "--protocol", "codeblock"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {sft_data}, row 1: this row is in hermes (its `format` column)")
    assert "protocol codeblock was given" in error and error.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_grpo_setting_that_disagrees_is_named_in_one_warning(tmp_path):
    sft_data = write_set(tmp_path / "sft.jsonl")
    plan = plan_train(
        TrainRequest(out=tmp_path / "o", settings={"sft_data": str(sft_data), "rl.protocol": "codeblock"})
    )
    assert plan.sft.protocol is None and plan.rl.loop.protocol == "codeblock"  # told otherwise: as told
    [warning] = plan.warnings
    assert "GRPO rolls out in codeblock" in warning and "SFT teaches hermes" in warning and "\n" not in warning


def test_the_sets_own_system_prompt_reaches_grpo_and_a_mixed_set_is_named(tmp_path):
    custom = write_set(tmp_path / "custom.jsonl", system=CUSTOM_PROMPT)
    plan = plan_train(TrainRequest(out=tmp_path / "o", settings={"sft_data": str(custom)}))
    assert (plan.rl.loop.protocol, plan.rl.loop.system_prompt, plan.warnings) == ("hermes", CUSTOM_PROMPT, [])
    mixed = tmp_path / "mixed.jsonl"
    lines = (
        write_set(tmp_path / "a.jsonl", count=3).read_text()
        + write_set(tmp_path / "b.jsonl", 1, "codeblock").read_text()
    )
    mixed.write_text(lines)
    plan = plan_train(TrainRequest(out=tmp_path / "o", settings={"sft_data": str(mixed)}))
    assert plan.rl.loop.protocol == "hermes"
    [warning] = plan.warnings
    assert "hermes (3 rows), codeblock (1 rows)" in warning


@pytest.fixture
def trained_dir(tmp_path):
    """A model dir as agentdata train leaves it: weights (here only their config) and agentdata.json."""
    model_dir = tmp_path / "trained"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    write_trained_prompt(model_dir, TrainedPrompt("hermes", CUSTOM_PROMPT, "rl"))
    return model_dir


def test_eval_filter_and_collect_default_to_the_trained_models_protocol_and_prompt(trained_dir):
    spec = f"hf:{trained_dir}"
    assert CollectConfig(model=spec).loop.protocol is None  # the settings read no file: the run does (for_run)
    for loop in (EvalConfig().collect_config(spec, 4).loop, CollectConfig(model=spec).for_run().loop):
        assert (loop.protocol, loop.system_prompt) == ("hermes", CUSTOM_PROMPT)
    told = CollectConfig(model=spec, loop=LoopConfig(protocol="codeblock")).for_run().loop
    assert (told.protocol, told.system_prompt) == ("codeblock", None)  # a prompt written for hermes is not kept
    assert CollectConfig(model="smollm2").for_run().loop.protocol == "codeblock"  # no record: the default


def test_grpo_settings_read_no_file_when_built_and_the_stage_takes_the_start_models_protocol(trained_dir):
    """GRPO's settings, like collect's, are built without reading the model dir (a plan may be built before the
    model it names exists, or on another machine); the stage reads the record where it starts (for_run)."""
    from agentdata.rl.config import GRPOStageConfig

    spec = f"hf:{trained_dir}"
    assert GRPOStageConfig(model=spec).loop.protocol is None
    loop = GRPOStageConfig(model=spec).for_run().loop
    assert (loop.protocol, loop.system_prompt) == ("hermes", CUSTOM_PROMPT)
    told = GRPOStageConfig(model=spec, loop=LoopConfig(protocol="codeblock")).for_run().loop
    assert (told.protocol, told.system_prompt) == ("codeblock", None)  # a prompt written for hermes is not kept
    assert GRPOStageConfig(model="smollm2").for_run().loop.protocol == "codeblock"  # no record: the default


def test_filter_profiles_a_trained_student_in_its_protocol(trained_dir, tmp_path, monkeypatch):
    import agentdata.filter.run as filter_run
    from agentdata.errors import UserError

    seen = []

    def stop(problems, out, pool, profiling, *args):
        seen.append(profiling.loop)
        raise UserError("stopped by the test")

    monkeypatch.setattr(filter_run, "profile_student", stop)  # what run_filter profiles with
    assert run_cli(["filter", "--student", f"hf:{trained_dir}", "--out", str(tmp_path / "pool.parquet")]) == 2
    assert (seen[0].protocol, seen[0].system_prompt) == ("hermes", CUSTOM_PROMPT)


def test_train_stage_rl_defaults_to_the_start_models_record_and_names_a_disagreement(trained_dir, tmp_path):
    spec = f"hf:{trained_dir}"
    plan = plan_train(TrainRequest(stage="rl", out=tmp_path / "o", settings={"model": spec}))
    assert (plan.rl.loop.protocol, plan.rl.loop.system_prompt, plan.warnings) == ("hermes", CUSTOM_PROMPT, [])
    plan = plan_train(TrainRequest(stage="rl", out=tmp_path / "o", settings={"model": spec, "protocol": "codeblock"}))
    [warning] = plan.warnings
    assert plan.rl.loop.protocol == "codeblock" and f"{spec} was trained in hermes (its {TRAINED_FILE})" in warning


def test_a_broken_record_is_one_line(trained_dir):
    from agentdata.errors import UserError

    (trained_dir / TRAINED_FILE).write_text("{not json")
    config = CollectConfig(model=f"hf:{trained_dir}")  # built without reading it
    with pytest.raises(UserError, match=f"{TRAINED_FILE}: not a record of a trained model's prompt"):
        config.for_run()
