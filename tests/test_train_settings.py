"""`train` on the one settings path: sections, the flags every user had, files and code, errors before any work."""

from __future__ import annotations

import json

import pytest

from agentdata.errors import UserError
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Band, build
from agentdata.train.run import TrainRequest, plan_train
from agentdata.train.settings import TRAIN_SETTINGS, train_settings
from tests.cli_helpers import run_cli
from tests.train_fixtures import write_sft_set


@pytest.fixture
def planned(monkeypatch):
    """`agentdata train ARGS` up to its plan: what the command would run (nothing is trained)."""
    import agentdata.cli.train as cli_train

    plans = []

    def plan_only(request):
        plans.append(plan_train(request))
        return []

    monkeypatch.setattr(cli_train, "train", plan_only)

    def run(args):
        assert run_cli(["train", *args]) == 0
        return plans[-1]

    return run


def test_every_flag_train_keeps_means_what_it_meant(tmp_path, planned, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    reward = tmp_path / "rewards.py"
    reward.write_text("def brevity(prompts, completions, **kwargs):\n    return [0.0] * len(completions)\n")
    sft_set = write_sft_set(tmp_path / "sft.jsonl", count=2)
    common = ["--model", "smollm2", "--max-steps", "3", "--protocol", "hermes", "--lora", "--resume", "last"]
    common += ["--eval-problems", str(problems), "eval_k=2", "rl.eval_every=5", "--out", str(tmp_path / "o")]
    plan = planned(
        [
            *common,
            *["--sft-data", str(sft_set), "long_rows=truncate", "--rl-problems", str(problems)],
            *["--band", "0.1,0.9", "profile_k=3", "--num-generations", "4", "--max-new-tokens", "64"],
            *["overlong_buffer=8", "code_reward=fraction", "--reward", f"{reward}:brevity"],
            "tools=code_interpreter",
        ]
    )
    sft, rl, loop = plan.sft, plan.rl, plan.closed_loop
    for stage in (sft, rl):  # the flags that always set both stages still do
        assert (stage.max_steps, stage.optimiser.lora, stage.resume_from_checkpoint) == (3, True, "last")
        assert (stage.validation.eval_problems, stage.validation.eval_k) == (str(problems), 2)
    assert sft.model == "smollm2" and rl.model == f"hf:{tmp_path / 'o' / 'sft'}"  # GRPO starts from the SFT model
    assert (sft.protocol, rl.loop.protocol) == ("hermes", "hermes")
    assert (sft.validation.eval_every, rl.validation.eval_every) == (None, 5)  # the override sets GRPO's only
    assert (sft.long_rows, sft.sft_data) == ("truncate", str(sft_set))
    assert (rl.num_generations, rl.loop.max_new_tokens, rl.overlong_buffer, rl.code_reward) == (4, 64, 8, "fraction")
    assert rl.rewards == ["correctness", "overlong", f"{reward}:brevity"]  # --reward adds beside the defaults
    assert (loop.rl_problems, loop.band, loop.profile_k) == (str(problems), (0.1, 0.9), 3)
    assert isinstance(loop.band, Band)


def test_a_stage_override_sets_one_stage_and_the_flag_for_both_wins_over_it(tmp_path, planned):
    sft_set = write_sft_set(tmp_path / "sft.jsonl", count=2)
    plan = planned(["--sft-data", str(sft_set), "max_steps=2", "rl.max_steps=7", "sft.learning_rate=1e-3"])
    assert (plan.sft.max_steps, plan.rl.max_steps) == (2, 7)
    assert plan.sft.optimiser.learning_rate == 1e-3
    assert plan.rl.optimiser.learning_rate == GRPOStageConfig().optimiser.learning_rate
    assert planned(["--sft-data", str(sft_set), "rl.max_steps=7", "--max-steps", "2"]).rl.max_steps == 2


def test_sections_in_a_file_flat_names_dotted_keys_and_trl_fields(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(
        "max_steps: 4\nmax_grad_norm: 0.5\nrl:\n  max_steps: 6\n  num_iterations: 2\n  band: 0.2,0.7\n"
        "sft:\n  lr_scheduler_type: constant\n"
    )
    built = train_settings(config, {"sft.max_steps": 9, "rl": {"tools": ["code_interpreter"]}})
    assert (built["sft"].max_steps, built["rl"].max_steps) == (9, 6)  # code over the file, a section over the top
    assert built["sft"].trl == {"max_grad_norm": 0.5, "lr_scheduler_type": "constant"}  # TRL's, for each stage
    assert built["rl"].trl == {"max_grad_norm": 0.5, "num_iterations": 2}
    assert built["closed_loop"].band == (0.2, 0.7)  # the closed loop's keys sit in `rl:` beside GRPO's


@pytest.mark.parametrize(
    "source,message",
    [
        ({"rl": {"max_steps": 0}}, "max_steps 0: must be at least 1"),
        ({"rl.band": "0.8,0.2"}, "rl: band 0.8,0.2: needs LO < HI"),
        ({"rl": {"max_stpes": 1}}, "rl: unknown setting 'max_stpes'; did you mean max_steps"),
        ({"sft": {"num_generations": 2}}, "sft: unknown setting 'num_generations'"),  # GRPO's, not SFT's
    ],
)
def test_code_given_settings_are_checked_like_flags(tmp_path, source, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        plan_train(TrainRequest(stage="rl", out=tmp_path, settings=source))


def test_a_bad_value_in_a_file_names_the_file_and_section(tmp_path, capsys):
    config = tmp_path / "train.yaml"
    config.write_text("rl:\n  max_steps: 0\n")
    assert run_cli(["train", "--stage", "rl", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {config} rl: max_steps 0: must be at least 1"


def test_a_bad_grpo_setting_is_refused_before_sft_runs(tmp_path, tiny_model_dir, capsys):
    """Before, `--stage all` trained SFT first and only then built GRPO's settings."""
    sft_set = write_sft_set(tmp_path / "sft.jsonl", count=2)
    args = ["train", "--model", f"hf:{tiny_model_dir}", "--sft-data", str(sft_set), "--out", str(tmp_path / "o")]
    assert run_cli([*args, "--max-new-tokens", "64", "overlong_buffer=64"]) == 2
    assert "overlong_buffer 64 must be below max_new_tokens 64" in capsys.readouterr().err
    assert not (tmp_path / "o" / "sft").exists()


def test_an_appended_list_adds_to_the_files(tmp_path, planned):
    config = tmp_path / "train.yaml"
    plugin = tmp_path / "tools.py"
    plugin.write_text("def word_count(text: str) -> int:\n    '''Words in text.'''\n    return len(text.split())\n")
    config.write_text(f"rl:\n  tools: [code_interpreter]\n  rewards: [correctness]\n  rl_pool: {tmp_path / 'p'}\n")
    plan = planned(
        ["--stage", "rl", "--config", str(config), "--reward", f"{plugin}:word_count", "--out", str(tmp_path)]
    )
    assert plan.rl.rewards == ["correctness", f"{plugin}:word_count"] and plan.rl.loop.tools == ["code_interpreter"]


def test_the_stages_outputs_are_train_s_own(tmp_path):
    with pytest.raises(UserError, match="out: train writes each stage under --out"):
        plan_train(TrainRequest(stage="rl", out=tmp_path, settings={"rl": {"out": "elsewhere"}}))


def test_a_name_both_stages_have_is_a_flag_for_both_and_an_override_per_stage(capsys):
    from agentdata.cli.train import command

    sft, rl = TRAIN_SETTINGS.sections["sft"].fields, TRAIN_SETTINGS.sections["rl"].fields
    shared = {name for name in sft if name in rl} - {"out", "trl"}  # out is --out's; trl is the file's
    assert {"max_steps", "model", "protocol", "learning_rate", "lora", "eval_k", "eval_every"} <= shared
    for name in shared:
        targets = [o.targets for o in command.generated_options if o.name == name and not o.hidden]
        assert targets in ([("sft", "rl")], []), name  # one flag for both (eval_every: none, see REMOVED_FLAGS)
        assert run_cli(["train", f"sft.{name}=null", f"rl.{name}=null", "--print-config"]) in (0, 2)
        assert "unknown setting" not in capsys.readouterr().err, name  # each stage's own is an override


def test_one_optimiser_block_is_composed_into_both_stages_and_keeps_its_flat_names():
    import dataclasses

    from agentdata.sft.config import SFTStageConfig
    from agentdata.training.config import OptimiserConfig

    block = {item.name for item in dataclasses.fields(OptimiserConfig)}
    for stage in (SFTStageConfig, GRPOStageConfig):
        own = {item.name for item in dataclasses.fields(stage)}
        assert not own & block and "optimiser" in own, f"{stage.__name__} copies {own & block}"
    built = train_settings(settings={"lora": True, "lora_r": 4, "rl": {"learning_rate": 3e-6}})
    assert (built["sft"].optimiser.learning_rate, built["rl"].optimiser.learning_rate) == (2e-4, 3e-6)
    assert built["sft"].optimiser.lora_alpha == built["rl"].optimiser.lora_alpha == 8
    peft = built["sft"].optimiser.peft_config()
    assert (peft.r, peft.lora_alpha, peft.lora_dropout) == (4, 8, 0.05)
    assert GRPOStageConfig().optimiser.peft_config() is None


# ------------------------------------------------------------------ curate and filter: names with one meaning
def test_curate_tool_call_band_and_its_old_one_end_flags(tmp_path, capsys, monkeypatch):
    import agentdata.curate as curate_module

    seen = []

    def stop(run_dirs, out, config, **kwargs):
        seen.append(config.tool_calls)
        raise UserError("stopped by the test")

    monkeypatch.setattr(curate_module, "curate", stop)
    out = ["--out", str(tmp_path / "sft.parquet")]
    assert run_cli(["curate", "run", *out, "--tool-calls", "2,3"]) == 2 and seen[-1] == (2, 3)
    assert run_cli(["curate", "run", *out, "--max-tool-calls", "3"]) == 2 and seen[-1] == (2, 3)  # not run
    assert "--max-tool-calls is gone: write --tool-calls MIN,MAX" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("min_tool_calls: 0\n")  # an old file key: no alias either
    assert run_cli(["curate", "run", *out, "--config", str(config)]) == 2 and seen[-1] == (2, 3)
    assert "min_tool_calls is gone: write tool_calls: [MIN, MAX]" in capsys.readouterr().err
    assert run_cli(["curate", "run", *out, "--tool-calls", "3,2"]) == 2
    assert capsys.readouterr().err.strip().endswith("error: --tool-calls 3,2: needs LO <= HI (e.g. 1,8)")


def test_filter_seed_sets_both_seeds_and_each_has_its_own_override(capsys):
    from agentdata.cli.filter import command

    options = {option.flag: option for option in command.generated_options if not option.hidden}
    assert options["--seed"].targets == ("profile", "pool") and "--profile-seed" not in options
    assert run_cli(["filter", "p.jsonl", "--seed", "3", "pool.seed=5", "--print-config", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert (tree["profile"]["seed"]["value"], tree["pool"]["seed"]["value"]) == (3, 3)  # the flag over the override
    assert run_cli(["filter", "p.jsonl", "pool.seed=5", "--print-config", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["pool"]["seed"]["value"] == 5 and tree["profile"]["seed"]["source"] == "default"


# ------------------------------------------------------------------ off and bands
def test_off_is_none_and_the_old_spellings_still_work():
    from agentdata.curate.config import CurateConfig
    from agentdata.sft.config import SFTStageConfig
    from agentdata.steps.config import DedupConfig

    assert build(CurateConfig, {"max_per_problem": "none"}).max_per_problem is None
    assert build(CurateConfig, {"max_per_problem": 0}).max_per_problem is None  # "0: no cap" before
    assert DedupConfig(near_dup_threshold=0).near_dup_threshold is None
    assert SFTStageConfig(max_steps=-1).max_steps is None  # TRL's -1: run the epochs
    assert build(GRPOStageConfig, {"online_band": ""}).online_band is None
    assert build(GRPOStageConfig, {"online_band": "none"}).online_band is None


def test_one_band_for_every_band():
    import polars as pl

    from agentdata.settings import CountBand

    band = Band.parse("0.05,0.8")
    assert band == (0.05, 0.8) and str(band) == "0.05,0.8" and json.loads(json.dumps(band)) == [0.05, 0.8]
    assert [band.contains(x) for x in (0.05, 0.5, 0.8, None)] == [False, True, False, False]  # ends exclusive
    assert band.straddles(0.0, 0.1) and not band.straddles(0.1, 0.7)
    frame = pl.DataFrame({"rate": [0.0, 0.5, 1.0], "low": [0.0, 0.2, 0.7], "high": [0.1, 0.6, 0.9]})
    assert frame.filter(band.contains(pl.col("rate")))["rate"].to_list() == [0.5]
    assert frame.filter(band.straddles(pl.col("low"), pl.col("high")))["rate"].to_list() == [0.0, 1.0]
    counts = CountBand.parse([1, 8])
    assert counts.contains(8) and not counts.contains(9) and counts == (1, 8)  # both ends inclusive
    for bad, message in [("0.8,0.05", "LO < HI"), ("1", "two numbers"), ("nan,1", "finite")]:
        with pytest.raises(ValueError, match=message):
            Band.parse(bad)
    with pytest.raises(ValueError, match="whole numbers"):
        CountBand.parse("1.5,3")


def test_the_band_types_are_the_settings_bands():
    from agentdata.curate.config import CurateConfig
    from agentdata.filter.config import PoolConfig
    from agentdata.train.closed_loop import ClosedLoopConfig

    assert isinstance(PoolConfig(band=(0.2, 0.8)).band, Band)
    assert isinstance(ClosedLoopConfig().band, Band)
    assert isinstance(GRPOStageConfig(online_band=[0.1, 0.9]).online_band, Band)
    assert CurateConfig().tool_calls == (1, 8) and CurateConfig().tool_calls.inclusive
