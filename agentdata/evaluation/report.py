"""The eval report: one result per (model, benchmark, tool-call budget), as JSON (cli/views.py draws the table)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.evaluation.metrics import BenchmarkMetrics, ProblemScores
from agentdata.evaluation.stats import Interval
from agentdata.records import atomic_write
from agentdata.versions import stamped

REPORT_FILE = "report.json"


@dataclass
class EvalResult:
    model: str  # a short label, used in tables and plots
    spec: str  # the engine spec the model ran with
    benchmark: str
    max_tool_calls: int
    run_dir: str
    metrics: BenchmarkMetrics
    # What this run generated rather than reused: {"generated", "redone_problem_changed", "redone_error"}.
    cache: dict[str, int] = field(default_factory=dict)
    # The engine that generated this run's responses now ("transformers", "vllm (managed server)"); "" when
    # every response was reused from an earlier run.
    engine: str = ""
    # The per-problem values (in memory only: paired comparisons between models are made from them).
    scores: ProblemScores | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        # field by field: asdict(self) would first deep-copy `scores` (three values per problem), which
        # is in no report
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("scores", "metrics")}
        data["cache"] = dict(self.cache)
        metrics = asdict(self.metrics)
        k = metrics["samples"]
        # Named as papers write them, so the JSON reads without this code at hand.
        metrics[f"avg@{k}"] = metrics.pop("avg_at_k")
        metrics[f"maj@{k}"] = metrics.pop("maj_at_k")
        metrics["pass@k"] = {str(j): value for j, value in metrics.pop("pass_at_k").items()}
        for name in ("avg_at_k_ci", "maj_at_k_ci", "pass_at_k_ci"):
            metrics.pop(name)
        return {**data, **metrics, "ci95": intervals_dict(self.metrics)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        data = dict(data)
        k = data["samples"]
        metrics = BenchmarkMetrics(
            num_problems=data.pop("num_problems"),
            num_responses=data.pop("num_responses"),
            samples=data.pop("samples"),
            avg_at_k=data.pop(f"avg@{k}"),
            pass_at_k={int(j): value for j, value in data.pop("pass@k").items()},
            maj_at_k=data.pop(f"maj@{k}"),
            mean_tool_calls=data.pop("mean_tool_calls"),
            tool_error_rate=data.pop("tool_error_rate"),
            mean_response_tokens=data.pop("mean_response_tokens"),
            mean_response_chars=data.pop("mean_response_chars"),
            finish_reasons=data.pop("finish_reasons"),
            kind=data.pop("kind", "math"),
            mean_test_s=data.pop("mean_test_s", 0.0),
            mean_passed_fraction=data.pop("mean_passed_fraction", None),
            failed_responses=data.pop("failed_responses", 0),
            unscored_problems=data.pop("unscored_problems", 0),
            **read_intervals(data.pop("ci95", {}), k),
            calls_per_correct=data.pop("calls_per_correct", None),
            tool_use_by_source=data.pop("tool_use_by_source", []),
            tool_use_by_domain=data.pop("tool_use_by_domain", []),
        )
        return cls(metrics=metrics, **data)


def intervals_dict(metrics: BenchmarkMetrics) -> dict[str, dict[str, Any]]:
    """The 95% intervals keyed as the scores are (`avg@4`, `maj@4`, `pass@2`): {low, high, method}."""
    k = metrics.samples
    named = {f"avg@{k}": metrics.avg_at_k_ci, f"maj@{k}": metrics.maj_at_k_ci}
    named.update({f"pass@{j}": interval for j, interval in metrics.pass_at_k_ci.items()})
    return {name: interval.as_dict() for name, interval in named.items() if interval is not None}


def read_intervals(data: dict[str, dict[str, Any]], k: int) -> dict[str, Any]:
    """BenchmarkMetrics' interval fields from `intervals_dict`'s form (a report without them has none)."""

    def interval(name: str) -> Interval | None:
        return Interval.from_dict(data[name]) if name in data else None

    return {
        "avg_at_k_ci": interval(f"avg@{k}"),
        "maj_at_k_ci": interval(f"maj@{k}"),
        "pass_at_k_ci": {
            int(name[5:]): Interval.from_dict(value) for name, value in data.items() if name[:5] == "pass@"
        },
    }


@dataclass
class EvalReport:
    results: list[EvalResult] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    # Paired differences against the first model (evaluation/compare.py), JSON-ready, each with its sentence.
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    # With --shard I/N: the shard made in every run, and no results (those need every shard): each run's
    # {model, benchmark, max_tool_calls, run_dir, generated}. Never written as report.json.
    shard: str | None = None
    shard_runs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = {
            "settings": self.settings,
            "results": [r.as_dict() for r in self.results],
            "comparisons": self.comparisons,
            "plots": self.plots,
        }
        return data | ({"shard": self.shard, "shard_runs": self.shard_runs} if self.shard else {})

    def write(self, out_dir: str | Path) -> Path:
        """report.json, its secrets redacted (a model's spec with `user:PASSWORD@` in its URL): it is shared."""
        from agentdata.publish.secrets import redact_tree

        text = json.dumps(redact_tree(stamped(self.as_dict())), indent=2, sort_keys=True)
        return atomic_write(
            Path(out_dir) / REPORT_FILE, lambda tmp: Path(tmp).write_text(text + "\n", encoding="utf-8")
        )

    @classmethod
    def read(cls, path: str | Path) -> EvalReport:
        path = Path(path)
        if path.is_dir():
            path = path / REPORT_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                results=[EvalResult.from_dict(r) for r in data["results"]],
                settings=data.get("settings", {}),
                plots=data.get("plots", []),
                comparisons=data.get("comparisons", []),
            )
        except FileNotFoundError:
            raise InputFileError(path, "no such file: run `agentdata eval` first") from None
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise InputFileError(path, f"not an eval report ({error})") from None
