"""What a pool is meant to change, beside the accuracy it is meant to buy: per GRPO arm, the share of flat
groups and the samples that carry a gradient per step, each with its 95% interval, and every two GRPO arms'
difference in both (issue 49).

The band picks problems the start solves sometimes, so fewer of its groups should score every rollout the
same (a flat group: no advantage, no gradient) and more of its samples should teach. At 135M the held-out
accuracy may not show that; these two do, step by step, whatever the accuracy does.

Each value is one training step's (rl/trainer.py logs both every step). An arm's mean is over its steps and
seeds; its interval is the bootstrap over seeds, then steps (evaluation/stats.seed_problem_interval with the
steps in the problems' place). Two arms are paired by seed and step: repetition r's step t of one against
the same of the other (every arm trains the same steps), so a drift all runs share over training cancels. A
series that is the same at every step and seed has no spread to resample: its interval is the point.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from agentdata.evaluation.stats import Interval, seed_problem_interval
from agentdata.experiment.series import FLAT_GROUPS, GRADIENT_SAMPLES

# (name, key in the runs' series): the two quantities the pool is meant to move.
MECHANISM_SERIES = (("flat groups (share)", FLAT_GROUPS), ("samples with a gradient per step", GRADIENT_SAMPLES))

Runs = dict[int, dict[str, list[list[float]]]]  # repetition -> series key -> [[step, value], ...]


def step_matrix(runs: dict[str, Runs], arms: list[str], key: str) -> tuple[list[int], np.ndarray] | None:
    """`key`'s values of `arms` on the seeds every one of them logged it and the steps all those runs share:
    (seeds, array of arms x seeds x steps); None where nothing is shared."""
    per_arm = [{rep: _points(series.get(key)) for rep, series in runs[arm].items()} for arm in arms]
    per_arm = [{rep: points for rep, points in found.items() if points} for found in per_arm]
    seeds = sorted(set.intersection(*(set(found) for found in per_arm)))
    if not seeds:
        return None
    steps = sorted(set.intersection(*(set(found[rep]) for found in per_arm for rep in seeds)))
    if not steps:
        return None
    return seeds, np.array([[[found[rep][step] for step in steps] for rep in seeds] for found in per_arm], dtype=float)


def _points(series: list[list[float]] | None) -> dict[float, float]:
    """step -> value, leaving out a step whose value is not a number (NaN: groups split across processes)."""
    return {step: value for step, value in series or [] if not np.isnan(value)}


def interval_of(values: np.ndarray) -> Interval:
    """The bootstrap interval of the mean over seeds (rows), then steps (columns); the point without spread."""
    if np.all(values == values.flat[0]):
        return Interval(float(values.flat[0]), float(values.flat[0]), "no spread")
    return seed_problem_interval(values)


def mechanism(runs: dict[str, Runs], arms: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per GRPO arm each series' mean with its interval; per two GRPO arms each series' difference."""
    grpo_arms = [arm for arm in arms if runs.get(arm)]
    found: dict[str, list[dict[str, Any]]] = {"arms": [], "differences": []}
    for name, key in MECHANISM_SERIES:
        for arm in grpo_arms:
            shared = step_matrix(runs, [arm], key)
            if shared:
                seeds, values = shared
                found["arms"].append(_row(name, values[0], seeds) | {"arm": arm})
        for first, second in itertools.combinations(grpo_arms, 2):
            shared = step_matrix(runs, [first, second], key)
            if shared:
                seeds, values = shared
                row = _row(name, values[0] - values[1], seeds)
                found["differences"].append(row | {"arm": first, "vs": second, "verdict": _verdict(row)})
    return found


def _row(series: str, values: np.ndarray, seeds: list[int]) -> dict[str, Any]:
    interval = interval_of(values)
    return {
        "series": series,
        "mean": float(values.mean()),
        "low": interval.low,
        "high": interval.high,
        "method": interval.method,
        "seeds": len(seeds),
        "steps": values.shape[1],
        "per_seed": [float(row.mean()) for row in values],
    }


def _verdict(row: dict[str, Any]) -> str:
    if row["low"] > 0:
        return "higher"
    if row["high"] < 0:
        return "lower"
    return "no difference detectable"
