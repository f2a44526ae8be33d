"""`agentdata experiment` end to end on tiny models: the arms run through the real stages, share work, resume.

The teacher is the fake OpenAI server of bench/ (it runs `print(6*7)` in the real sandbox and answers
42), so every problem here has the answer 42 and collect's trajectories are real and right; the
student is the tiny random Llama of tests/train_fixtures.py with SmolLM2's tokenizer, so SFT,
the profile, GRPO and the evaluations all run for real, in seconds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from agentdata.errors import UserError
from agentdata.experiment import load_recipe, run_experiment
from agentdata.experiment.report import read_report
from tests.cli_helpers import run_cli
from tests.train_fixtures import tiny_model_dir, tokenizer  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
TRAIN_QUESTIONS = [f"What is {a} {op} {b}?" for a, op, b in ((6, "*", 7), (40, "+", 2), (84, "/", 2), (50, "-", 8))]
HELD_OUT_QUESTIONS = [f"Compute {a} {op} {b}, please." for a, op, b in ((21, "*", 2), (2, "*", 21), (44, "-", 2))]


def fake_server_module():
    spec = importlib.util.spec_from_file_location("fake_openai_server", ROOT / "bench" / "fake_openai_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def teacher():
    with fake_server_module().FakeOpenAIServer(script="codeblock") as server:
        yield server


def write_problems(path: Path, questions: list[str]) -> Path:
    path.write_text("".join(json.dumps({"question": q, "answer": "42"}) + "\n" for q in questions), encoding="utf-8")
    return path


def write_recipe(tmp_path: Path, teacher_url: str, student: Path, arms: dict, **base) -> Path:
    recipe = {
        "name": "tiny",
        "description": "a two-arm recipe on tiny models",
        "base": {
            "student": f"hf:{student}",
            "problems": str(write_problems(tmp_path / "train.jsonl", TRAIN_QUESTIONS)),
            "held_out": str(write_problems(tmp_path / "held_out.jsonl", HELD_OUT_QUESTIONS)),
            "collect": {"model": f"openai:{teacher_url}", "samples": 2, "concurrency": 4, "max_new_tokens": 64},
            "sft": {"max_steps": 2, "batch_size": 2, "save_steps": 1000, "max_length": 512},
            "loop": {"max_new_tokens": 8, "max_tool_calls": 1, "max_turns": 2},
            "eval": {"samples": 2, "concurrency": 8},
            **base,
        },
        "arms": arms,
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


def start_killable(recipe: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "agentdata.cli.app", "experiment", str(recipe), "--out", str(out), "--json"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow  # trains and evaluates tiny models for real: about a minute of CPU
@pytest.mark.timeout(1200)
def test_a_recipe_runs_end_to_end_shares_its_collect_and_resumes_after_a_kill(
    tmp_path,
    teacher,
    tiny_model_dir,  # noqa: F811
    monkeypatch,
):
    import tempfile

    from agentdata.events import listening
    from agentdata.experiment.neighbours import registry

    arms = {"real": {"sft.data": "real"}, "real_fast": {"sft.data": "real", "sft.learning_rate": 1e-3}, "none": {}}
    path = write_recipe(tmp_path, teacher.url, tiny_model_dir, arms)
    out = tmp_path / "exp"
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # this test's own record of running experiments
    monkeypatch.setattr(tempfile, "tempdir", None)
    process = start_killable(path, out)  # killed (SIGKILL) as soon as the teacher's collect is done
    deadline = time.monotonic() + 240
    while not list((out / "work").glob("collect-*/result.json")) and process.poll() is None:
        assert time.monotonic() < deadline, "collect never finished"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    requests_before = len(teacher.requests)
    assert requests_before > 0 and not (out / "experiment.json").exists()
    killed = registry() / f"{process.pid}.json"
    assert killed.is_file()  # a killed experiment cannot remove its record
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # another experiment, running
    (registry() / f"{other.pid}.json").write_text(json.dumps({"pid": other.pid, "out": "/runs/other"}))

    notes = []
    try:
        with listening(lambda event: notes.append(event.message or "")):
            report = run_experiment(load_recipe(path), out)  # the same experiment again: it resumes
    finally:
        other.kill()
        other.wait()
    [warning] = [note for note in notes if "another experiment is running" in note]
    assert f"/runs/other (pid {other.pid})" in warning and str(process.pid) not in warning  # the killed one is gone
    assert sorted(p.name for p in registry().iterdir()) == [f"{other.pid}.json"]  # its own record removed at the end
    assert len(teacher.requests) == requests_before  # the finished collect was not run again
    rows = {row["arm"]: row for row in report.arms}
    assert all(row["status"] == "done" for row in rows.values())
    assert rows["real"]["sft_set"]["rows"] == len(TRAIN_QUESTIONS)  # one real trajectory per training problem
    assert rows["none"]["responses"] == rows["real"]["responses"] == len(HELD_OUT_QUESTIONS) * 2
    for row in rows.values():
        assert row["avg_ci"]["low"] <= row["avg"] <= row["avg_ci"]["high"]
    shared = {run["stage"]: run for run in report.shared if run["stage"] != "eval"}
    assert shared["collect"]["arms"] == ["real", "real_fast"] and shared["collect"]["reused"]  # one collect, kept
    assert sum(run["stage"] == "sft" for run in report.shared) == 2  # the two learning rates train apart
    assert sum(run["stage"] == "eval" for run in report.shared) == 3
    pairs = {(c["model"], c["baseline"]) for c in report.comparisons}
    assert pairs == {("real", "real_fast"), ("real", "none"), ("real_fast", "none")}
    assert {c["metric"] for c in report.comparisons} == {"avg@2", "pass@2", "maj@2"}
    markdown = (out / "report.md").read_text()
    assert "## Paired comparisons" in markdown and next(c["sentence"] for c in report.comparisons) in markdown
    assert (out / "report.png").read_bytes().startswith(b"\x89PNG")
    assert read_report(out)["comparisons"] == report.comparisons
    record = json.loads((out / "arms" / "real" / "seed-0.json").read_text())
    assert record["status"] == "done" and [stage["stage"] for stage in record["stages"]][:2] == ["collect", "curate"]


@pytest.mark.slow  # profiles, trains and evaluates tiny models for real
@pytest.mark.timeout(1200)
def test_grpo_arms_draw_curves_and_a_failing_arm_leaves_the_others_running(tmp_path, teacher, tiny_model_dir):  # noqa: F811
    """The tiny student solves nothing: the band keeps no problem, so `band` fails at its pool; `all` trains."""
    rl = {"max_steps": 1, "num_generations": 2, "prompts_per_step": 1, "save_steps": 1000, "eval_k": 1}
    arms = {"band": {"rl.pool": "band"}, "all": {"rl.pool": "all"}}
    recipe = load_recipe(write_recipe(tmp_path, teacher.url, tiny_model_dir, arms, rl={**rl, "profile_k": 2}))
    report = run_experiment(recipe, tmp_path / "exp")
    rows = {row["arm"]: row for row in report.arms}
    assert rows["band"]["status"] == "failed" and rows["band"]["failures"][0]["stage"] == "pool"
    assert "keeps none" in rows["band"]["failures"][0]["reason"] or "empty" in rows["band"]["failures"][0]["reason"]
    assert rows["all"]["status"] == "done" and rows["all"]["pool"] == {"kind": "all", "size": len(TRAIN_QUESTIONS)}
    (series,) = report.curves["all"]
    assert [step for step, _ in series["eval/avg@k"]] == [0, 1]  # the curve set evaluated before and after the step
    assert "entropy" in series and "frac_reward_zero_std" in series and "groups/flat_share" in series
    assert "groups/gradient_samples" in series  # the pool's mechanism, logged by the trainer every step
    assert report.comparisons == []  # one arm finished: nothing to pair
    assert {row["arm"] for row in read_report(tmp_path / "exp")["mechanism"]["arms"]} == {"all"}
    markdown = (tmp_path / "exp" / "report.md").read_text()
    assert "failed at pool" in markdown and "## What the pool changes" in markdown


@pytest.mark.parametrize(
    "arms,base,message",
    [
        ({"a": {"sft.dta": "real"}, "b": {}}, {}, "unknown setting 'sft.dta'; did you mean sft.data"),
        ({"a": {"rl.max_tool_calls": -1}, "b": {}}, {}, "arm a: max_tool_calls -1"),
        ({"a": {"sft.data": "real"}, "b": {"sft": {"data": "real"}}}, {}, "arms a and b differ in nothing"),
        ({"a": {"sft.data": "genuine"}, "b": {}}, {}, "arm a: sft.data=genuine: must be one of real, stitched"),
        ({"a": {"loop.temperature": -1}, "b": {}}, {}, "arm a: temperature -1"),
        ({"a": {"eval.samples": 4}, "b": {}}, {}, "eval.samples is shared by every arm"),
        ({"a": {"sft.data": "real"}, "b": {}}, {"eval": {"worked_examples": "maybe"}}, "=maybe: expected true"),
        ({"a": {"rl.band": "0.9,0.1"}, "b": {}}, {}, "arm a: rl.band=0.9,0.1: needs LO < HI"),
        ({"a": {"rl.profile_k": 0}, "b": {}}, {}, "arm a: rl.profile_k=0: must be at least 1"),
        ({"only": {}}, {}, "at least two arms"),
        ({"a": {"stitch.target": "openai"}, "b": {}}, {}, "stitch.target is set by the experiment"),
        ({"a": {"sft.data": "real"}, "b": {}}, {"curate": {"target": "trl"}}, "curate.target is set by the experiment"),
        # issue 41: a generator's count or seed of the wrong type was a traceback
        ({"a": {"sft.data": "real"}, "b": {}}, {"held_out": {"n": "lots", "seed": 1}}, "n lots: expected an integer"),
        ({"a": {"sft.data": "real"}, "b": {}}, {"problems": {"n": 8, "seed": [1]}}, "seed [1]: expected an integer"),
        ({"a": {"sft.data": "real"}, "b": {}}, {"problems": {"n": True}}, "problems: n True: expected an integer"),
        ({"a": {"sft.data": "real"}, "b": {}}, {"problems": {"n": 8, "kinds": [3]}}, "unknown problem kind"),
    ],
)
def test_bad_recipes_are_refused_before_any_work(tmp_path, arms, base, message):
    path = write_recipe(tmp_path, "http://127.0.0.1:9", tmp_path / "no-model", arms, **base)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("[", r"\[")):
        run_experiment(load_recipe(path), tmp_path / "exp")
    assert not (tmp_path / "exp" / "work").exists()


@pytest.mark.parametrize("name", ["VICTIM", "../victim", "sub/victim", ".", ".."])
def test_a_recipe_name_is_never_a_path_so_no_folder_outside_runs_experiment_is_written(
    tmp_path, monkeypatch, capsys, name
):
    """Issue 41: `name: /tmp/victim` with no --out wrote the experiment into that folder over its report.md."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("a report the user keeps\n")
    path = write_recipe(tmp_path, "http://127.0.0.1:9", tmp_path / "no-model", {"a": {"sft.data": "real"}, "b": {}})
    recipe = yaml.safe_load(path.read_text())
    recipe["name"] = str(victim) if name == "VICTIM" else name
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert run_cli(["experiment", str(path)]) == 2
    assert "never a path" in capsys.readouterr().err
    assert [item.name for item in victim.iterdir()] == ["report.md"]
    assert (victim / "report.md").read_text() == "a report the user keeps\n"
    assert not list(work.iterdir()) and sorted(item.name for item in tmp_path.iterdir()) == sorted(
        ["victim", "work", "recipe.yaml", "train.jsonl", "held_out.jsonl"]
    )


def test_a_held_out_set_overlapping_the_training_problems_is_refused(tmp_path, capsys):
    path = write_recipe(tmp_path, "http://127.0.0.1:9", tmp_path / "no-model", {"a": {"sft.data": "real"}, "b": {}})
    recipe = yaml.safe_load(path.read_text())
    recipe["base"]["held_out"] = {"kinds": ["compute"], "n": 20, "seed": 0}
    recipe["base"]["problems"] = {"kinds": ["compute"], "n": 10, "seed": 0}
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    code = run_cli(["experiment", str(path), "--out", str(tmp_path / "exp")])
    error = capsys.readouterr().err
    assert (
        code == 2
        and "held_out overlaps the training problems: 10 of 10 training questions share most of their 13-grams" in error
    )
    assert not (tmp_path / "exp" / "work").exists()


@pytest.mark.parametrize("name", ["sft-data", "pool", "tool-calls", "zero-tir", "zero-tir-arithmetic"])
def test_every_built_in_recipe_plans_its_arms_and_holds_out_200_responses_each(tmp_path, name):
    from agentdata.experiment.problem_sets import write_problem_files
    from agentdata.experiment.runner import plan_all

    recipe = load_recipe(name)
    files = write_problem_files(recipe, tmp_path / "problems")  # no overlap between training and held-out
    plans = plan_all(recipe, files, tmp_path)
    assert len(plans) == len(recipe.arms) * recipe.seeds and len(recipe.arms) >= 2
    held_out = sum(1 for _ in files.held_out.open())
    assert all(held_out * plan.eval_k >= 200 for plan in plans.values())
    # The ladder's split: held-out problems always from seed 1, never used to tune a recipe; training
    # problems from another seed (0, or 3 where seed 0 at that size shares questions with seed 1)
    assert recipe.base["held_out"]["seed"] == 1 and recipe.base["problems"]["seed"] != 1
    # GRPO from smollm2-tir saw the worked examples in its rollouts: its evaluation shows them too
    shows = {plan.eval_spec("hf:/trained") == "tir:hf:/trained" for plan in plans.values()}
    assert shows == {recipe.base["student"] == "smollm2-tir" and name != "sft-data"}


def constructed_outcome(arm: str, repetition: int, correct: list[int], k: int = 4):
    """An arm's finished evaluation with these correct counts (of k) on problems p0, p1, ...: no model run."""
    from agentdata.experiment.arm import ArmOutcome

    ids = [f"p{i}" for i in range(len(correct))]
    scores = {
        "responses": dict.fromkeys(ids, k),
        "correct": dict(zip(ids, correct)),
        "majority": {pid: float(c > k / 2) for pid, c in zip(ids, correct)},
    }
    avg = sum(correct) / (k * len(correct))
    evaluation = {"samples": k, f"avg@{k}": avg, "mean_tool_calls": 1.0, "tool_error_rate": 0.25}
    evaluation |= {"mean_response_tokens": 50.0, "num_responses": k * len(correct), "failed_responses": 0}
    stages = [{"stage": "eval", "key": f"{arm}{repetition}", "wall_s": 10.0, "cpu_s": 8.0}]
    return ArmOutcome(arm, repetition, "done", stages=stages, eval=evaluation, scores=scores)


def test_the_report_pairs_arms_by_problem_over_seeds_with_a_known_difference():
    import random

    from agentdata.experiment.recipe import parse_recipe
    from agentdata.experiment.report import arm_row, comparisons

    recipe = parse_recipe({"base": {}, "arms": {"better": {"sft.data": "real"}, "worse": {}}}, "constructed")
    rng = random.Random(0)
    base = [rng.randint(0, 2) for _ in range(120)]  # each problem's correct count of 4 for `worse`
    outcomes = {
        "worse": [constructed_outcome("worse", r, [min(4, c + rng.randint(0, 1)) for c in base]) for r in range(2)],
        "better": [constructed_outcome("better", r, [min(4, c + 2) for c in base]) for r in range(2)],
    }
    row = arm_row("better", recipe, outcomes["better"], 4)
    truth_better = sum(min(4, c + 2) for c in base) / (4 * len(base))
    assert row["avg"] == pytest.approx(truth_better) and row["spread"]["sd"] == pytest.approx(0.0)
    assert row["problems"] == 120 and row["responses"] == 2 * 4 * 120 and row["calls_without_error"] == 0.75
    worse = arm_row("worse", recipe, outcomes["worse"], 4)
    assert worse["spread"]["sd"] > 0 and len(worse["spread"]["avg_per_seed"]) == 2
    (avg, *_) = comparisons(recipe, outcomes, 4)
    assert avg["metric"] == "avg@4" and avg["difference"] == pytest.approx(row["avg"] - worse["avg"])
    assert avg["interval"]["low"] <= avg["difference"] <= avg["interval"]["high"] and avg["interval"]["low"] > 0
    assert avg["sentence"].startswith(f"better beats worse by {100 * avg['difference']:.1f} points [")
    assert avg["responses_per_problem"] == 8  # k responses in each of two repetitions


def test_with_several_training_seeds_the_paired_interval_resamples_seeds_and_lists_each_seeds_difference():
    """`pool --seeds 3`: one seed's lucky training run must not pass for the arm's effect."""
    import random
    from types import SimpleNamespace

    from agentdata.experiment.markdown import seeds_section
    from agentdata.experiment.recipe import parse_recipe
    from agentdata.experiment.report import comparisons

    recipe = parse_recipe({"base": {}, "arms": {"band": {"rl.pool": "band"}, "random": {}}}, "constructed")
    rng = random.Random(3)
    base = [rng.randint(0, 2) for _ in range(70)]
    # seed 0's band run got lucky on every problem; in seeds 1 and 2 random's runs did a little better
    band = [constructed_outcome("band", r, [c + 2 * (r == 0) for c in base]) for r in range(3)]
    random_runs = [
        constructed_outcome("random", r, [c + (r > 0 and i % 3 == 0) for i, c in enumerate(base)]) for r in range(3)
    ]
    outcomes = {"band": band, "random": random_runs}
    (avg, *_) = comparisons(recipe, outcomes, 4)
    assert avg["resampled"] == "seeds, problems" and len(avg["per_seed"]) == 3
    assert avg["per_seed"][0] > 0.2 and max(avg["per_seed"][1:]) < 0
    problems_only = avg["problems_only_interval"]
    assert problems_only["low"] > 0  # over problems only, seed 0's luck looks like an effect
    assert avg["interval"]["low"] < 0 < avg["interval"]["high"] and not avg["significant"]
    assert avg["sentence"].startswith("no difference detectable")
    report = SimpleNamespace(totals={"seeds": 3}, k=4, arms=[], comparisons=[avg])
    assert "| band − random | +" in "\n".join(seeds_section(report))
    one_seed = {arm: runs[:1] for arm, runs in outcomes.items()}
    (single, *_) = comparisons(recipe, one_seed, 4)
    assert single["resampled"] == "problems" and single["per_seed"] is None


def write_grpo_metrics(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return str(path)


def test_the_report_shows_each_arms_flat_group_share_step_by_step(tmp_path):
    """The pool recipe's mechanism, per arm per step: from groups/flat_share, or TRL's key in older runs."""
    from types import SimpleNamespace

    from agentdata.experiment.arm import ArmOutcome
    from agentdata.experiment.markdown import grpo_section
    from agentdata.experiment.report import FLAT_GROUPS, curves

    curve = {"step": 0, "eval/avg@2": 0.25}
    band = [curve, *({"step": s, FLAT_GROUPS: 0.5 * (s == 2), "frac_reward_zero_std": 0.9} for s in (1, 2, 3))]
    older = [curve, *({"step": s, "frac_reward_zero_std": 1.0} for s in (1, 2))]  # logged before issue 40
    outcomes = [
        ArmOutcome("band", 0, "done", grpo_metrics=write_grpo_metrics(tmp_path / "band.jsonl", band)),
        ArmOutcome("all", 0, "done", grpo_metrics=write_grpo_metrics(tmp_path / "all.jsonl", older)),
    ]
    found = curves(outcomes)
    assert found["band"][0][FLAT_GROUPS] == [[1, 0.0], [2, 0.5], [3, 0.0]]
    assert found["all"][0][FLAT_GROUPS] == [[1, 1.0], [2, 1.0]]
    arms = [{"arm": arm, "pool": {"kind": arm, "size": 8}} for arm in ("band", "all")]
    text = "\n".join(grpo_section(SimpleNamespace(arms=arms, curves=found, totals={"seeds": 1})))
    assert "| step | band | all |" in text
    assert "| 2 | 50.0% | 100.0% |" in text and "| 3 | 0.0% | - |" in text
    assert "**band**: pool `band`, 8 problems; flat groups 16.7%" in text
    many = {"band": [{FLAT_GROUPS: [[step, step % 2] for step in range(1, 101)]}]}  # 100 steps: ranges of 4
    text = "\n".join(grpo_section(SimpleNamespace(arms=arms[:1], curves=many, totals={"seeds": 1})))
    assert "| 1-4 | 50.0% |" in text and "| 97-100 | 50.0% |" in text and "| 5 |" not in text


def test_the_report_says_whether_the_band_cut_flat_groups_and_raised_samples_with_a_gradient(tmp_path):
    """Issue 49: beside accuracy, the mechanism per arm with intervals over seeds and steps, band against random.
    Constructed: over three seeds of 6 steps, band's groups are flat a quarter of the time and random's three
    quarters (samples with a gradient 6 against 2 of 8); `all` is random's twin, so it differs in nothing."""
    from types import SimpleNamespace

    from agentdata.experiment.arm import ArmOutcome
    from agentdata.experiment.markdown import mechanism_section
    from agentdata.experiment.mechanism import mechanism
    from agentdata.experiment.report import FLAT_GROUPS, GRADIENT_SAMPLES, runs_by_seed

    def run(arm: str, seed: int, flat: list[float]) -> ArmOutcome:
        records = [{"step": 0, "eval/avg@2": 0.1}]
        records += [{"step": s + 1, FLAT_GROUPS: f, GRADIENT_SAMPLES: 8 * (1 - f)} for s, f in enumerate(flat)]
        path = write_grpo_metrics(tmp_path / f"{arm}-{seed}.jsonl", records)
        return ArmOutcome(arm, seed, "done", grpo_metrics=path)

    band = [[0.0, 0.5, 0.25, 0.5, 0.0, 0.25]] * 3
    rest = [[0.5, 1.0, 0.75, 1.0, 0.5, 0.75], [0.75, 0.75, 0.75, 0.75, 0.75, 0.75], [1.0, 0.5, 0.75, 0.5, 1.0, 0.75]]
    outcomes = [run("band", r, band[r]) for r in range(3)]
    outcomes += [run(arm, r, rest[r]) for arm in ("random", "all") for r in range(3)]
    outcomes.append(ArmOutcome("start", 0, "done"))  # no GRPO: no row
    found = mechanism(runs_by_seed(outcomes), ["band", "random", "all", "start"])
    arms = {(row["arm"], row["series"]): row for row in found["arms"]}
    assert {arm for arm, _ in arms} == {"band", "random", "all"}
    flat = arms[("band", "flat groups (share)")]
    assert flat["mean"] == pytest.approx(0.25) and flat["low"] < 0.25 < flat["high"]
    assert (flat["steps"], flat["seeds"]) == (6, 3)
    assert arms[("random", "samples with a gradient per step")]["mean"] == pytest.approx(2.0)
    differences = {(row["arm"], row["vs"], row["series"]): row for row in found["differences"]}
    cut = differences[("band", "random", "flat groups (share)")]
    assert cut["mean"] == pytest.approx(-0.5) and cut["high"] < 0 and cut["verdict"] == "lower"
    assert cut["per_seed"] == pytest.approx([-0.5, -0.5, -0.5])
    more = differences[("band", "random", "samples with a gradient per step")]
    assert more["mean"] == pytest.approx(4.0) and more["low"] > 0 and more["verdict"] == "higher"
    same = differences[("random", "all", "flat groups (share)")]
    assert (same["mean"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    assert same["verdict"] == "no difference detectable"
    text = "\n".join(mechanism_section(SimpleNamespace(mechanism=found)))
    assert "| band | flat groups (share) | 25.0% [" in text and "| 6 x 3 |" in text
    assert "| band − random | flat groups (share) | -50.0 pts [" in text and "| **lower** |" in text
    assert "| band − random | samples with a gradient per step | +4.00 [" in text and "+4.00, +4.00, +4.00" in text


def test_the_mechanism_pairs_seeds_and_steps_both_arms_logged():
    """A seed one arm lacks (its GRPO failed), steps a run did not reach and a step not measured (NaN: groups
    split across processes) are left out, not misaligned."""
    from agentdata.experiment.mechanism import mechanism

    runs = {
        "band": {
            0: {"groups/flat_share": [[1, 0.0], [2, 0.5], [3, 0.5]]},
            1: {"groups/flat_share": [[1, 0.5], [2, 0.5]]},
        },
        "random": {1: {"groups/flat_share": [[1, 1.0], [2, 1.0], [3, 1.0], [4, float("nan")]]}},  # 4: not measured
    }
    found = mechanism(runs, ["band", "random"])
    (difference,) = found["differences"]
    assert (difference["seeds"], difference["steps"]) == (1, 2) and difference["mean"] == pytest.approx(-0.5)
    assert [row["steps"] for row in found["arms"]] == [2, 3]  # band: steps both its seeds reached; random: its own
    assert not any(row["series"].startswith("samples") for row in found["arms"])  # not logged (an older run): no row


def test_zero_tir_trains_from_weights_never_tool_tuned_where_code_helps_and_its_counterpart_where_it_does_not():
    """Issue 49: `zero-tir` is GRPO from smollm2-tir (the plain weights shown how to run code: no SFT) on the
    compute ladder, over three seeds; `zero-tir-arithmetic` keeps session 12's run on two-digit arithmetic."""
    where_needed, arithmetic = load_recipe("zero-tir"), load_recipe("zero-tir-arithmetic")
    assert where_needed.base["student"] == "smollm2-tir" and where_needed.base["problems"]["kinds"] == ["compute"]
    assert where_needed.seeds >= 3 and not any(key.startswith("sft.") for key in where_needed.base)
    assert {arm: where_needed.changed(arm) for arm in where_needed.arms} == {"grpo": {"rl.pool": "all"}, "start": {}}
    assert arithmetic.base["student"] == "smollm2" and arithmetic.base["problems"]["kinds"] == ["arithmetic"]
    temperatures = [value for key, value in arithmetic.base.items() if key.endswith(".temperature")]
    assert temperatures == [0.7] and arithmetic.seeds == 1


def test_zero_tirs_three_series_get_a_trend_test_and_a_flat_one_says_no_trend(tmp_path):
    from types import SimpleNamespace

    from agentdata.experiment.arm import ArmOutcome
    from agentdata.experiment.markdown import trends_section
    from agentdata.experiment.report import curves, trends

    steps = range(1, 13)
    records = [{"step": s, "tools/call_frequency": 0.1 * s, "accuracy": 0.0} for s in steps]  # calls rise
    records = [r | {"completions/model_tokens": 100 + (7 if r["step"] % 2 else -7)} for r in records]  # noise
    records += [{"step": s, "eval/avg@2": 0.0, "eval/tools/call_frequency": 0.1} for s in (0, 6, 12)]
    outcome = ArmOutcome("grpo", 0, "done", grpo_metrics=write_grpo_metrics(tmp_path / "m.jsonl", records))
    found = {(row["series"], row["source"]): row for row in trends(curves([outcome]))}
    calls = found[("tool calls per response", "training rollouts")]
    assert calls["verdict"] == "rising" and calls["slope"] == pytest.approx(0.1) and calls["points"] == 12
    assert found[("response length (model tokens)", "training rollouts")]["verdict"] == "no trend"
    assert found[("accuracy", "training rollouts")]["verdict"] == "no trend"  # 0 at every step: the floor
    assert found[("accuracy", "held-out curve")]["points"] == 3
    assert ("response length (model tokens)", "held-out curve") not in found  # not logged: no row
    text = "\n".join(trends_section(SimpleNamespace(trends=list(found.values()))))
    assert "| grpo | tool calls per response | training rollouts | 12 (steps 1-12) | +1.10 [" in text
    assert "| **rising** |" in text and "| accuracy | held-out curve | 3 (steps 0-12) | +0.0 pts [+0.0, +0.0] |" in text
    import matplotlib.pyplot as plt

    from agentdata.experiment.plots import _curve_panel

    figure, axis = plt.subplots()
    report = SimpleNamespace(curves=curves([outcome]), trends=list(found.values()))
    _curve_panel(axis, report, "tool calls", "eval/tools/call_frequency", "tools/call_frequency")
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["grpo: rising"]
    plt.close(figure)


def test_pools_other_than_the_band_pick_by_their_rule_from_the_same_profile():
    from agentdata.experiment.pools import pick

    rates = {"a": 0.0, "b": 0.25, "c": 0.5, "d": 1.0, "e": 0.75, "unprofiled": None}
    assert pick("easy", rates, 2, seed=0) == ["d", "e"]
    assert pick("hard", rates, 2, seed=0) == ["a", "b"]
    random_pool = pick("random", rates, 3, seed=0)
    assert len(set(random_pool)) == 3 and "unprofiled" not in random_pool
    assert pick("random", rates, 3, seed=0) == random_pool  # seeded
    assert sorted(pick("random", rates, 10, seed=3)) == ["a", "b", "c", "d", "e"]  # at most the profiled ones


def test_a_teacher_runs_key_is_what_its_trajectories_depend_on_not_how_they_run():
    from agentdata.agent.config import CollectConfig
    from agentdata.experiment.arm import collect_key
    from agentdata.settings import build

    def key(**changes):
        return collect_key(build(CollectConfig, {"model": "smollm2-tir", "samples": 4, **changes}))

    assert key() == key(concurrency=2, executor="ray", shards=3)  # how it runs
    assert key() != key(temperature=0.2) and key() != key(samples=2)  # what it makes


def test_each_stage_records_its_torch_threads_and_the_report_says_them(tmp_path):
    """CPU time means little without the threads it ran on: on a busy machine two threads spin for each other."""
    from types import SimpleNamespace

    import torch

    from agentdata.experiment.arm import ArmOutcome
    from agentdata.experiment.markdown import work_section
    from agentdata.experiment.recipe import parse_recipe
    from agentdata.experiment.report import shared_work, totals
    from agentdata.experiment.work import Workshop

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stage = Workshop(tmp_path / "work").run("eval", {"arm": "a"}, lambda folder: {"done": True})
    finally:
        torch.set_num_threads(before)
    assert stage.summary()["threads"] == 1
    recipe = parse_recipe({"base": {}, "arms": {"a": {"sft.data": "real"}, "b": {}}}, "constructed")
    outcomes = [ArmOutcome("a", 0, "failed", stages=[stage.summary()])]
    problems = write_problems(tmp_path / "held_out.jsonl", HELD_OUT_QUESTIONS)
    shared = shared_work(outcomes)
    files = SimpleNamespace(held_out=problems, train=problems)
    report = SimpleNamespace(shared=shared, totals=totals(recipe, outcomes, shared, files))
    assert report.totals["threads"] == [1]
    assert "torch threads 1." in "\n".join(work_section(report))
    report.totals = totals(recipe, outcomes, shared, files, {"vllm"})
    assert "torch threads 1, models run on vllm." in "\n".join(work_section(report))


def test_a_recipe_runs_on_vllm_where_it_is_installed_unless_it_names_hf(monkeypatch):
    """`engine: auto` (the default) is vLLM where .venv-vllm is found and AGENTDATA_VLLM is not off, else hf;
    a recipe written `engine: hf` stays on transformers either way."""
    from agentdata.engines import vllm_server
    from agentdata.experiment.choices import ArmModel

    monkeypatch.setattr(vllm_server, "find_vllm_python", lambda: "/opt/vllm/bin/python")
    monkeypatch.delenv(vllm_server.SWITCH_ENV, raising=False)
    assert ArmModel().resolved_engine() == "vllm"
    assert ArmModel(engine="hf").resolved_engine() == "hf"
    monkeypatch.setenv(vllm_server.SWITCH_ENV, "off")
    assert ArmModel().resolved_engine() == "hf"
    assert ArmModel(engine="vllm").resolved_engine() == "vllm"
    monkeypatch.setattr(vllm_server, "find_vllm_python", lambda: None)
    monkeypatch.delenv(vllm_server.SWITCH_ENV)
    assert ArmModel().resolved_engine() == "hf"


def test_an_hf_recipe_keeps_the_transformers_engine_for_every_model(monkeypatch):
    """The default teacher and GRPO would take vLLM where it is installed; a recipe that runs on hf (written so, or
    `auto` without vLLM) keeps it for every model, one on vllm lets them, and the user's own switch wins."""
    import os

    from agentdata.engines.vllm_server import SWITCH_ENV
    from agentdata.experiment.runner import keep_recorded_engine

    monkeypatch.delenv(SWITCH_ENV, raising=False)
    keep_recorded_engine({"vllm"})
    assert SWITCH_ENV not in os.environ
    keep_recorded_engine({"hf"})
    assert os.environ[SWITCH_ENV] == "off"
    monkeypatch.setenv(SWITCH_ENV, "on")
    keep_recorded_engine({"hf"})
    assert os.environ[SWITCH_ENV] == "on"


def test_work_generated_on_one_engine_is_not_reused_on_the_other(tmp_path):
    """A folder run on transformers and resumed where vLLM is installed redoes what a model generated (vLLM samples
    other tokens from the same seed), and the report's engine is the one that did the work; training on a set,
    and transformers' keys from before vLLM, are reused as they were."""
    from agentdata.experiment.arm import with_engine
    from agentdata.experiment.work import Workshop

    workshop, made = Workshop(tmp_path / "work"), []

    def action(folder: Path) -> dict:
        made.append(folder.name)
        return {"done": True}

    for stage in ("eval", "sft"):
        settings = {"model": {"student": "smollm2"}, "k": 3}
        assert with_engine(stage, settings, "hf") == settings  # the keys folders written before vLLM have
        workshop.run(stage, with_engine(stage, settings, "hf"), action)
        assert workshop.done(stage, with_engine(stage, settings, "hf")) is not None
        on_vllm = workshop.done(stage, with_engine(stage, settings, "vllm"))
        assert (on_vllm is None) == (stage == "eval"), stage
    assert len(made) == 2


def test_a_temp_folder_that_cannot_be_written_costs_only_the_warning(tmp_path, monkeypatch):
    from agentdata.experiment import neighbours

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the records' folder would go")
    monkeypatch.setattr(neighbours, "registry", lambda: blocked)
    with neighbours.registered(tmp_path / "exp") as others:
        assert others == []


def test_a_fifo_in_the_shared_records_folder_is_never_opened(tmp_path, monkeypatch):
    # the folder is the machine's, writable by anyone: a FIFO named like a record waited for a writer for ever,
    # and every later experiment with it
    import threading

    from agentdata.experiment import neighbours

    folder = tmp_path / "agentdata-experiments"
    folder.mkdir()
    monkeypatch.setattr(neighbours, "registry", lambda: folder)
    fifo = folder / "1.json"
    os.mkfifo(fifo)
    outcome: dict = {}

    def start() -> None:
        with neighbours.registered(tmp_path / "exp") as others:
            outcome["others"] = others
            outcome["mine"] = json.loads((folder / f"{os.getpid()}.json").read_text())

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():  # let the blocked open go before failing, so the thread ends
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    assert not thread.is_alive(), "an experiment waited on a FIFO in the records' folder"
    assert outcome["others"] == [] and outcome["mine"]["pid"] == os.getpid()
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not ours to remove
    assert not (folder / f"{os.getpid()}.json").exists()  # removed when the experiment ended


def test_this_experiments_record_replaces_whatever_had_its_name(tmp_path, monkeypatch):
    from agentdata.experiment import neighbours

    folder = tmp_path / "agentdata-experiments"
    folder.mkdir()
    monkeypatch.setattr(neighbours, "registry", lambda: folder)
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours")
    (folder / f"{os.getpid()}.json").symlink_to(victim)
    with neighbours.registered(tmp_path / "exp"):
        mine = folder / f"{os.getpid()}.json"
        assert not mine.is_symlink() and json.loads(mine.read_text())["pid"] == os.getpid()
    assert victim.read_text() == "not yours"
