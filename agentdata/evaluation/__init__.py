"""Evaluation: run models with the code tool on benchmarks and report avg@k, pass@k, maj@k and tool use.

`metrics` and `report` are pure (no model needed); `runner.run_eval` runs the agent loop
through `agentdata.agent.runner` and writes the report and plots.
"""

from agentdata.evaluation.metrics import (
    BenchmarkMetrics,
    answers_equivalent,
    benchmark_metrics,
    majority_vote,
    pass_at_k,
)
from agentdata.evaluation.report import EvalReport, EvalResult

__all__ = [
    "BenchmarkMetrics",
    "EvalReport",
    "EvalResult",
    "answers_equivalent",
    "benchmark_metrics",
    "majority_vote",
    "pass_at_k",
]
