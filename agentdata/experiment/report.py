"""The experiment's report: a row per arm, paired comparisons, GRPO curves and their trends, shared work,
time and load.

Built from the arms' outcomes (arm.ArmOutcome); written as `experiment.json` (everything),
`report.md` (the tables and the sentences) and `report.png` (experiment/plots.py, one page).

With `--seeds N` every number of an arm is over its N repetitions: each problem's score is the
mean of its scores in the repetitions (so a problem still counts once, and the interval over
problems holds the seeds' noise too), and `spread` lists avg@k per repetition with their
standard deviation. Paired comparisons are made between every two arms that finished, on the
problems both were scored on, with `evaluation/stats.py`'s statistics; with several repetitions
their interval is the bootstrap over training seeds and problems (`seeded`), and each seed's own
difference is listed beside it.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agentdata.evaluation.metrics import ProblemScores
from agentdata.evaluation.stats import PairedComparison, mean_interval, paired_comparison, seed_problem_interval, trend
from agentdata.experiment.mechanism import Runs, mechanism
from agentdata.experiment.recipe import Recipe
from agentdata.experiment.series import CURVE_KEYS, FLAT_GROUPS, GRADIENT_SAMPLES, TREND_SERIES
from agentdata.publish.secrets import shared_scanner, write_shared_json
from agentdata.versions import stamped

REPORT_JSON = "experiment.json"
REPORT_MD = "report.md"
REPORT_PNG = "report.png"
METRICS = ("avg", "pass", "maj")


@dataclass
class ExperimentReport:
    recipe: dict[str, Any]
    arms: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    curves: dict[str, list[dict[str, list[list[float]]]]]
    shared: list[dict[str, Any]]
    totals: dict[str, Any]
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    trends: list[dict[str, Any]] = field(default_factory=list)
    mechanism: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "arms": self.arms,
            "comparisons": self.comparisons,
            "curves": self.curves,
            "trends": self.trends,
            "mechanism": self.mechanism,
            "shared_work": self.shared,
            "totals": self.totals,
            "outcomes": self.outcomes,
            "files": self.files,
        }

    @property
    def k(self) -> int:
        return int(self.totals.get("k") or 0)


def problem_values(outcomes: list[Any], metric: str, k: int) -> dict[str, float]:
    """Each problem's `metric` (avg, pass at k, maj), averaged over the repetitions that scored it."""
    collected: dict[str, list[float]] = {}
    for outcome in outcomes:
        scores = ProblemScores(**outcome.scores)
        name = f"pass@{k}" if metric == "pass" else metric
        for pid, value in scores.metric(name).items():
            collected.setdefault(pid, []).append(value)
    return {pid: sum(values) / len(values) for pid, values in collected.items()}


def arm_row(arm: str, recipe: Recipe, outcomes: list[Any], k: int) -> dict[str, Any]:
    """One arm's table row over its repetitions; a failed arm says where and why."""
    row: dict[str, Any] = {"arm": arm, "changes": recipe.changed(arm), "repetitions": len(outcomes)}
    done = [outcome for outcome in outcomes if outcome.status == "done"]
    failed = [outcome for outcome in outcomes if outcome.status != "done"]
    row["status"] = "done" if not failed else "failed"
    row["failures"] = [
        {"seed": o.repetition, "stage": o.failed_stage, "reason": o.reason} for o in failed if o.failed_stage
    ]
    row["wall_s"] = sum(o.wall_seconds for o in outcomes)
    row["cpu_s"] = sum(o.cpu_seconds for o in outcomes)
    if not done:
        return row
    for metric in METRICS:
        values = problem_values(done, metric, k)
        interval = mean_interval(list(values.values()))
        row[metric] = sum(values.values()) / len(values) if values else 0.0
        row[f"{metric}_ci"] = interval.as_dict() if interval else None
    evals = [o.eval for o in done]
    calls = [e["mean_tool_calls"] for e in evals]
    row["tool_calls"] = statistics.fmean(calls)
    row["calls_without_error"] = statistics.fmean(1.0 - e["tool_error_rate"] for e in evals) if any(calls) else None
    row["response_tokens"] = statistics.fmean(e["mean_response_tokens"] for e in evals)
    row["problems"] = len(problem_values(done, "avg", k))
    row["responses"] = sum(e["num_responses"] for e in evals)
    row["failed_responses"] = sum(e.get("failed_responses", 0) for e in evals)
    row["spread"] = {
        "avg_per_seed": [e[f"avg@{e['samples']}"] for e in evals],
        "sd": statistics.stdev(e[f"avg@{e['samples']}"] for e in evals) if len(evals) > 1 else None,
    }
    row["sft_set"] = done[0].sft_set
    row["pool"] = done[0].pool
    return row


def comparisons(recipe: Recipe, by_arm: dict[str, list[Any]], k: int) -> list[dict[str, Any]]:
    """Every two finished arms, paired by problem (avg@k, pass@k, maj@k); over training seeds too where
    both arms finished more than one repetition (`seeded`)."""
    done = {arm: [o for o in outcomes if o.status == "done"] for arm, outcomes in by_arm.items()}
    found = []
    for first, second in itertools.combinations([arm for arm in recipe.arms if done.get(arm)], 2):
        for metric in METRICS:
            label = f"{metric}@{k}"
            comparison = paired_comparison(
                first,
                second,
                label,
                problem_values(done[first], metric, k),
                problem_values(done[second], metric, k),
                responses_per_problem=k * len(done[first]),
            )
            if comparison is not None:
                found.append(seeded(comparison, done[first], done[second], metric, k))
    return found


def seeded(comparison: PairedComparison, first: list[Any], second: list[Any], metric: str, k: int) -> dict[str, Any]:
    """The comparison with its interval over training seeds and problems, when both arms have several
    repetitions: the problems-only interval treats one training run's luck as the arm's effect.
    Repetition r of one arm is paired with repetition r of the other (the same seeds, offset by r)."""
    first_by_seed = {o.repetition: problem_values([o], metric, k) for o in first}
    second_by_seed = {o.repetition: problem_values([o], metric, k) for o in second}
    repetitions = sorted(set(first_by_seed) & set(second_by_seed))
    levels = {"resampled": "problems", "per_seed": None, "problems_only_interval": None}
    if len(repetitions) < 2:
        return comparison.as_dict() | levels
    problems = [
        pid
        for pid in first_by_seed[repetitions[0]]
        if all(pid in first_by_seed[r] and pid in second_by_seed[r] for r in repetitions)
    ]
    if not problems:
        return comparison.as_dict() | levels
    differences = np.array([[first_by_seed[r][p] - second_by_seed[r][p] for p in problems] for r in repetitions])
    pooled = replace(comparison, interval=seed_problem_interval(differences))
    return pooled.as_dict() | {
        "resampled": "seeds, problems",
        "per_seed": [float(row.mean()) for row in differences],
        "problems_only_interval": comparison.interval.as_dict(),
    }


def curves(outcomes: list[Any]) -> dict[str, list[dict[str, list[list[float]]]]]:
    """Per GRPO arm, per repetition: each curve key as [[step, value], ...] from its metrics.jsonl."""
    return {arm: list(runs.values()) for arm, runs in runs_by_seed(outcomes).items()}


def runs_by_seed(outcomes: list[Any]) -> dict[str, Runs]:
    """Per GRPO arm, per repetition number: each curve key as [[step, value], ...] from its metrics.jsonl."""
    from agentdata.evaluation.validation import avg_key
    from agentdata.training.metrics import read_metrics

    found: dict[str, Runs] = {}
    for outcome in outcomes:
        if not outcome.grpo_metrics or not Path(outcome.grpo_metrics).exists():
            continue
        history = read_metrics(outcome.grpo_metrics)
        accuracy = next((key for key in map(avg_key, history) if key), None)
        series = {}
        names = {accuracy: "eval/avg@k", f"{accuracy}/low": "eval/avg@k/low", f"{accuracy}/high": "eval/avg@k/high"}
        for key in (*CURVE_KEYS, FLAT_GROUPS, GRADIENT_SAMPLES, *names):
            points = [[entry["step"], entry[key]] for entry in history if accuracy and _number(entry.get(key))]
            if points:
                series[names.get(key, key)] = sorted(points)
        if FLAT_GROUPS not in series and "frac_reward_zero_std" in series:
            series[FLAT_GROUPS] = series["frac_reward_zero_std"]
        found.setdefault(outcome.arm, {})[outcome.repetition] = series
    return found


def trends(found: dict[str, list[dict[str, list[list[float]]]]]) -> list[dict[str, Any]]:
    """Per GRPO arm, each of TREND_SERIES from the training rollouts (a point per step) and from the
    held-out curve (a point per curve evaluation), the repetitions' points together: its slope against
    steps and the verdict (`evaluation/stats.trend`); a series with fewer than three points is left out."""
    rows = []
    for arm, runs in found.items():
        for series, train_key, eval_key in TREND_SERIES:
            for source, key in (("training rollouts", train_key), ("held-out curve", eval_key)):
                points = [point for run in runs for point in run.get(key, [])]
                fitted = trend([step for step, _ in points], [value for _, value in points])
                if fitted:
                    rows.append({"arm": arm, "series": series, "source": source, **fitted.as_dict()})
    return rows


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shared_work(outcomes: list[Any]) -> list[dict[str, Any]]:
    """Each stage run and the arms that used it (a run used by more than one arm was done once)."""
    runs: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        for stage in outcome.stages:
            entry = runs.setdefault(stage["key"], {**stage, "arms": []})
            label = outcome.arm if outcome.repetition == 0 else f"{outcome.arm}/seed-{outcome.repetition}"
            if label not in entry["arms"]:
                entry["arms"].append(label)
    return list(runs.values())


def totals(
    recipe: Recipe, outcomes: list[Any], shared: list[dict[str, Any]], files: Any, engines: Iterable[str] = ()
) -> dict[str, Any]:
    from agentdata.problems import load_problems

    loads = [value for run in shared for value in (run.get("load_before"), run.get("load_after")) if value is not None]
    done = [o for o in outcomes if o.status == "done"]
    k = done[0].eval["samples"] if done else None
    return {
        "wall_s": sum(float(run.get("wall_s", 0.0)) for run in shared),  # each stage run once
        "cpu_s": sum(float(run.get("cpu_s", 0.0)) for run in shared),
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
        "threads": sorted({run["threads"] for run in shared if run.get("threads")}),
        "engines": sorted(engines),  # how the trained models ran (GRPO's rollouts on vLLM too where it is vllm)
        "k": k,
        "held_out_problems": len(load_problems(files.held_out)),
        "train_problems": len(load_problems(files.train)),
        "seeds": recipe.seeds,
        "arms_done": sorted({o.arm for o in done}),
        "arms_failed": sorted({o.arm for o in outcomes if o.status != "done"}),
    }


def build_report(
    recipe: Recipe, outcomes: list[Any], files: Any, out: Path, engines: Iterable[str] = ()
) -> ExperimentReport:
    """Assemble the report from the outcomes and write experiment.json, report.md and report.png."""
    from agentdata.experiment.markdown import report_markdown
    from agentdata.experiment.plots import report_figure

    by_arm = {arm: [o for o in outcomes if o.arm == arm] for arm in recipe.arms}
    shared = shared_work(outcomes)
    summary = totals(recipe, outcomes, shared, files, engines)
    k = summary["k"] or 1
    found_runs = runs_by_seed(outcomes)
    found_curves = {arm: list(runs.values()) for arm, runs in found_runs.items()}
    report = ExperimentReport(
        recipe=recipe.as_dict(),
        arms=[arm_row(arm, recipe, by_arm[arm], k) for arm in recipe.arms],
        comparisons=comparisons(recipe, by_arm, k),
        curves=found_curves,
        shared=shared,
        totals=summary,
        outcomes=[o.as_dict() | {"scores": None} for o in outcomes],
        files={"json": str(out / REPORT_JSON), "markdown": str(out / REPORT_MD), "png": str(out / REPORT_PNG)},
        trends=trends(found_curves),
        mechanism=mechanism(found_runs, list(recipe.arms)),
    )
    report_figure(report, out / REPORT_PNG)
    # what people share of an experiment: a teacher's or student's spec with `user:PASSWORD@` is cut from both
    (out / REPORT_MD).write_text(shared_scanner().redact(report_markdown(report)), encoding="utf-8")
    write_shared_json(out / REPORT_JSON, stamped(report.as_dict()))
    return report


def read_report(out: str | Path) -> dict[str, Any]:
    """A written report's JSON (experiment.json of an experiment folder)."""
    path = Path(out)
    path = path / REPORT_JSON if path.is_dir() else path
    return json.loads(path.read_text(encoding="utf-8"))
