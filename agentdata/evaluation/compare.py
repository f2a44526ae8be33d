"""Paired comparisons of eval results: a model against a baseline on the same problems.

`eval --compare` compares every other model with the first one given, per benchmark and
tool-call budget; `agentdata experiment` compares its arms the same way. The statistics are
`evaluation/stats.py`'s (paired bootstrap interval, sign-flip / McNemar p-value, a sentence).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentdata.evaluation.report import EvalResult
from agentdata.evaluation.stats import PairedComparison, paired_comparison


@dataclass
class ResultComparison:
    """One paired comparison and where it was made (benchmark, tool-call budget)."""

    benchmark: str
    max_tool_calls: int
    comparison: PairedComparison

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "max_tool_calls": self.max_tool_calls, **self.comparison.as_dict()}


def compare_results(model: EvalResult, baseline: EvalResult, seed: int = 0) -> list[PairedComparison]:
    """avg@k, pass@k (the largest k both have) and maj@k of `model` minus `baseline`, paired by problem."""
    if model.scores is None or baseline.scores is None:
        raise ValueError("both results need their per-problem scores (EvalResult.scores) to be compared")
    k = min(model.metrics.samples, baseline.metrics.samples)
    shared_pass = sorted(set(model.metrics.pass_at_k) & set(baseline.metrics.pass_at_k))
    metrics = [("avg", f"avg@{k}"), ("maj", f"maj@{k}")]
    if shared_pass:
        metrics.insert(1, (f"pass@{shared_pass[-1]}", f"pass@{shared_pass[-1]}"))
    comparisons = []
    for name, label in metrics:
        comparison = paired_comparison(
            model.model,
            baseline.model,
            label,
            model.scores.metric(name),
            baseline.scores.metric(name),
            responses_per_problem=k,
            seed=seed,
        )
        if comparison is not None:
            comparisons.append(comparison)
    return comparisons


def compare_to_baseline(results: Sequence[EvalResult], baseline: str) -> list[ResultComparison]:
    """Every result of another model against `baseline`'s result on the same benchmark and budget."""
    by_key = {(r.benchmark, r.max_tool_calls): r for r in results if r.model == baseline}
    comparisons = []
    for result in results:
        reference = by_key.get((result.benchmark, result.max_tool_calls))
        if result.model == baseline or reference is None or result.scores is None or reference.scores is None:
            continue
        comparisons.extend(
            ResultComparison(result.benchmark, result.max_tool_calls, comparison)
            for comparison in compare_results(result, reference)
        )
    return comparisons
