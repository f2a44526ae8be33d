"""`agentdata experiment RECIPE --dry-run`: every built-in recipe and its GPU twin build every stage's settings
here, where the twins' data and models are not, so a typo in a twin fails CI, not a day on a GPU node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentdata.experiment import builtin_recipes
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
TWINS = ROOT / "examples" / "gpu" / "experiments"


def test_every_built_in_recipe_has_a_gpu_twin():
    assert sorted(path.stem for path in TWINS.glob("*.yaml")) == sorted(f"{name}-gpu" for name in builtin_recipes())


@pytest.mark.parametrize("recipe", [*sorted(builtin_recipes()), *(str(p) for p in sorted(TWINS.glob("*.yaml")))])
def test_every_recipe_and_twin_plans_every_stage_and_runs_nothing(recipe, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["experiment", recipe, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "every stage's settings built" in printed and f"To run it: agentdata experiment {recipe}" in printed
    assert " eval " in printed  # every arm ends with its evaluation
    assert list(tmp_path.iterdir()) == []  # nothing written: no runs/experiment/NAME


def test_the_pool_twin_lists_its_stages_seeds_and_missing_inputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["experiment", str(TWINS / "pool-gpu.yaml"), "--dry-run", "--json"]) == 0
    import json

    found = json.loads(capsys.readouterr().out)
    assert (found["seeds"], len(found["plans"])) == (3, 9)  # three arms, three training seeds each
    stages = {(plan["arm"], plan["seed"]): [stage["stage"] for stage in plan["stages"]] for plan in found["plans"]}
    assert stages[("band", 2)] == ["collect", "curate", "sft_sets", "sft", "profile", "pool", "grpo", "eval"]
    assert stages[("all", 0)] == ["collect", "curate", "sft_sets", "sft", "grpo", "eval"]  # no profile for all
    grpo = next(stage for stage in found["plans"][-1]["stages"] if stage["stage"] == "grpo")
    assert grpo["command"] == "agentdata train --stage rl" and grpo["settings"]["seed"] == 2
    assert {"what": "held_out", "path": "data/aime24.jsonl", "here": False} in found["inputs"]
    assert {"what": "student", "path": "/models/Qwen3-4B-Instruct-2507", "here": False} in found["inputs"]


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("rl", "max_stpes", 200, "unknown setting 'rl.max_stpes'; did you mean rl.max_steps"),
        ("rl", "learning_rate", "fast", "learning_rate"),
        ("loop", "max_tool_calls", -1, "max_tool_calls"),
    ],
)
def test_a_typo_in_a_twin_fails_the_dry_run_in_one_line(section, key, value, message, tmp_path, capsys):
    data = yaml.safe_load((TWINS / "pool-gpu.yaml").read_text(encoding="utf-8"))
    data["base"][section][key] = value
    path = tmp_path / "pool-gpu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert run_cli(["experiment", str(path), "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_sft_data_collects_the_teacher_twice_with_different_sampling_seeds_by_default():
    """Issue 40: `sft-data` (`seeds: 2` in the recipe) makes a second draw of the teacher's trajectories, hence
    of the SFT rows, not the first collect reused: the collect's stage key holds its seed."""
    from agentdata.experiment import load_recipe
    from agentdata.experiment.arm import collect_key
    from agentdata.experiment.dry_run import dry_run
    from agentdata.experiment.plan import ProblemFiles
    from agentdata.experiment.runner import plan_all

    recipe = load_recipe("sft-data")
    found = dry_run(recipe)
    collects = {
        (plan["arm"], plan["seed"]): stage["settings"]["seed"]
        for plan in found.plans
        for stage in plan["stages"]
        if stage["stage"] == "collect"
    }
    assert collects == {("real", 0): 0, ("real", 1): 1, ("stitched", 0): 0, ("stitched", 1): 1}
    files = ProblemFiles(Path("train.jsonl"), Path("held_out.jsonl"), Path("curve.jsonl"), {})
    plans = plan_all(recipe, files, Path("unused"), check_paths=False)
    first, second = plans[("real", 0)], plans[("real", 1)]
    assert collect_key(first.collect) != collect_key(second.collect)  # run again, never reused
    assert (first.sft_values["seed"], second.sft_values["seed"]) == (0, 1) and second.eval_seed == first.eval_seed + 1


@pytest.mark.parametrize("recipe", ["tool-calls", str(TWINS / "tool-calls-gpu.yaml")])
def test_the_tool_calls_arms_score_the_same_rollouts_apart_by_their_calls(recipe, tmp_path):
    """The recipe's question needs arms that train calls per response apart: on the same wrong rollouts, the
    frequent arm pays for more calls, the deliberative arm charges for them (two extra calls), correctness
    (the GPU twin's third arm) is indifferent; on right ones the deliberative arm still charges."""
    from agentdata.experiment import load_recipe
    from agentdata.experiment.plan import ProblemFiles
    from agentdata.experiment.runner import plan_all
    from agentdata.rl.rewards import reward_functions

    files = [tmp_path / f"{name}.jsonl" for name in ("train", "held_out", "curve")]
    for path in files:
        path.write_text('{"question": "What is 6 * 7?", "answer": "42"}\n', encoding="utf-8")
    plans = plan_all(load_recipe(recipe), ProblemFiles(*files, {}), tmp_path, check_paths=False)

    def scores(arm: str, correct: bool) -> list[float]:
        correctness = next(f for f in reward_functions(plans[(arm, 0)].rl) if f.__name__ == "correctness")
        return correctness([None] * 2, [[], []], correct=[correct] * 2, num_tool_calls=[1, 3])

    expected = {
        "correctness": [-1.0, -1.0],  # calls earn nothing
        "frequent": [pytest.approx(-0.9), pytest.approx(-0.7)],  # Open-AgentRL: calling on a wrong answer pays
        "deliberative": [-1.0, pytest.approx(-1.0 - 2 * plans[("deliberative", 0)].rl.extra_call_penalty)],
    }
    arms = {arm for arm, _ in plans}
    assert {"frequent", "deliberative"} <= arms <= set(expected)
    assert {arm: scores(arm, False) for arm in arms} == {arm: expected[arm] for arm in arms}
    right_once, right_thrice = scores("deliberative", True)
    assert right_once == 1.0 and right_thrice < right_once


def test_pool_trains_every_arm_on_three_seeds_by_default_and_one_seed_when_asked(tmp_path, monkeypatch, capsys):
    """Issue 40: the band's effect is judged over training seeds unless a user asks for less."""
    import json

    monkeypatch.chdir(tmp_path)
    for args, seeds in (([], 3), (["--seeds", "1"], 1)):
        assert run_cli(["experiment", "pool", "--dry-run", "--json", *args]) == 0
        found = json.loads(capsys.readouterr().out)
        assert (found["seeds"], sorted({plan["seed"] for plan in found["plans"]})) == (seeds, list(range(seeds)))


def plans_of(recipe, tmp_path):
    from agentdata.experiment.plan import ProblemFiles
    from agentdata.experiment.runner import plan_all

    files = [tmp_path / f"{name}.jsonl" for name in ("train", "held_out", "curve")]
    for path in files:
        path.write_text('{"question": "What is 6 * 7?", "answer": "42"}\n', encoding="utf-8")
    return plan_all(recipe, ProblemFiles(*files, {}), tmp_path, check_paths=False)


def test_a_recipes_rl_loop_key_is_grpos_as_on_train(tmp_path):
    """One key space: `rl.temperature` is GRPO's rollouts' temperature in a recipe as on `train`; `loop.*` stays
    the student's loop everywhere and `eval.*` the evaluation's."""
    from agentdata.experiment import load_recipe
    from agentdata.train.settings import train_settings

    recipe = load_recipe("pool", {"rl.temperature": 0.5, "loop.top_p": 0.9, "eval.max_turns": 2}, seeds=1)
    plan = plans_of(recipe, tmp_path)[("band", 0)]
    assert plan.rl.loop.temperature == plan.loop.temperature == 0.5  # GRPO's rollouts and their profile
    assert plan.eval_loop.temperature == 1.0 and plan.eval_loop.max_turns == 2 != plan.rl.loop.max_turns
    assert plan.rl.loop.top_p == plan.eval_loop.top_p == 0.9
    assert train_settings(settings={"rl.temperature": 0.5})["rl"].loop.temperature == 0.5


def test_overrides_are_positional_key_values_as_on_every_command(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.chdir(tmp_path)
    assert run_cli(["experiment", "pool", "eval.samples=8", "rl.temperature=0.5", "--seeds", "1", "--dry-run"]) == 0
    assert "To run it: agentdata experiment pool eval.samples=8 rl.temperature=0.5 --seeds 1" in capsys.readouterr().out
    assert run_cli(["experiment", "pool", "eval.samples=8", "--print-config", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["base"]["eval.samples"] == {"value": 8, "source": "override eval.samples"}
    assert tree["base"]["student"]["source"] == "recipe pool" and tree["arms"]["band"]["rl.pool"]["value"] == "band"
    assert run_cli(["experiment", "pool", "rl.temperature=0.5", "--print-config"]) == 0
    assert "  rl.temperature: 0.5  # override rl.temperature" in capsys.readouterr().out.splitlines()
    assert list(tmp_path.iterdir()) == []  # --print-config runs and writes nothing


@pytest.mark.parametrize(
    "args, says",
    [
        (["eval.sampels=8"], "eval.sampels=8: unknown setting 'eval.sampels'; did you mean eval.samples"),
        (["eval.seed=8", "eval.seed=3"], "eval.seed is given twice on the command line (eval.seed=8, eval.seed=3)"),
        (["eval.samples=0"], "eval.samples=0: must be at least 1"),
        (["eval.k=8"], "eval.k is gone: write eval.samples"),  # 0.4's name: `eval`'s own is samples
        ([f"rl.temperature={10**400}"], "characters): must be in [0, 10]"),  # never made a float
        ([f"eval.samples={10**400}"], "characters): too large"),
    ],
)
def test_a_bad_override_is_one_line(args, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["experiment", "pool", *args, "--dry-run"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and says in error, error


def test_a_recipe_section_takes_a_composed_fields_mapping_as_a_config_file_does():
    """`rl: {loop: {temperature: 0.5}}` is `rl.temperature`, as train's --config file reads it."""
    from agentdata.experiment.recipe import parse_recipe

    arms = {"a": {}, "b": {"rl": {"optimiser": {"learning_rate": 1e-5}}}}
    recipe = parse_recipe({"base": {"rl": {"pool": "band", "loop": {"temperature": 0.5}}}, "arms": arms}, "r.yaml")
    assert recipe.base == {"rl.pool": "band", "rl.temperature": 0.5}
    assert recipe.arms["b"] == {"rl.learning_rate": 1e-5}
