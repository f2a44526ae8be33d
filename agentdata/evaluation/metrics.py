"""Benchmark metrics computed from trajectories: pure functions, no model, no sandbox.

Trajectories are grouped by `problem_id`; each problem has n sampled responses, c of them
correct. Per benchmark:

- avg@k: the mean over problems of c / n (accuracy averaged over the k samples).
- pass@k: the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), averaged
  over problems; reported for k = 1, 2, 4, ... up to n (pass@1 equals avg@k).
- maj@k: a problem counts as solved when the answer most responses agree on is correct.
  Answers are grouped by a normalised string first and then merged when math-verify says
  they are equal (`answers_equivalent`), so "1/2", "0.5" and "\\frac{1}{2}" are one vote.
- tool use: mean tool calls per response, tool calls per correct response, tool error rate (failed
  calls / calls), the same per source and domain (agent.tool_use), mean response length (completion
  tokens and characters), finish reasons.
- failures: a response that ended in an engine or sandbox error (finish reason `error`) is no
  wrong answer: it is left out of every score above and counted apart (`failed_responses`,
  and `unscored_problems` for problems with no valid response at all).
- kind: `code` (graded by running tests: maj@k votes on identical programs, and the time
  spent running tests is reported apart), `multiple choice` (letter answers), or `math`.
- scale: the responses are one table (`evaluation/responses.py`, read from the shards by
  polars), so a million of them build no Python object each; the vote runs per problem on its
  distinct answers weighted by their counts (`largest_cluster`).
- intervals: every avg@k, pass@k and maj@k carries its 95% interval over problems
  (`evaluation/stats.py` says which and why), and `ProblemScores` keeps the per-problem values
  that paired comparisons between models need (`score_benchmark` returns both).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl

from agentdata.agent.tool_use import ToolUse
from agentdata.evaluation.responses import trajectory_responses
from agentdata.evaluation.stats import Interval, mean_interval
from agentdata.records import Trajectory

Equivalence = Callable[[str, str], bool]


# --------------------------------------------------------------------------- estimators


@lru_cache(maxsize=1 << 16)  # a benchmark has few distinct (n, c, k): each is computed once
def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c correct) is correct.

    Computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i), which equals 1 - C(n-c, k)/C(n, k)
    without the huge binomials.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_k_values(n: int) -> list[int]:
    """The k reported for n samples: powers of two below n, and n itself."""
    values, k = [], 1
    while k < n:
        values.append(k)
        k *= 2
    return values + [n] if n >= 1 else []


# --------------------------------------------------------------------------- majority vote


@lru_cache(maxsize=1 << 18)  # a vote compares each answer several times
def normalise_answer(answer: str) -> str:
    """Cheap canonical form for voting: no spaces, no \\boxed/\\text wrappers, no trailing dot."""
    text = answer.strip()
    text = re.sub(r"\\(?:boxed|text|mathrm|textbf)\{(.*)\}", r"\1", text)
    text = re.sub(r"\\[,;:! ]|\\left|\\right|\$|\s+", "", text)
    return text.rstrip(".").lower()


@lru_cache(maxsize=1 << 18)  # a pure function of the two strings (math-verify's own verdicts are cached too)
def answers_equivalent(first: str, second: str) -> bool:
    """Same normalised string, or equal by math-verify (one answer taken as the other's gold)."""
    if normalise_answer(first) == normalise_answer(second):
        return True
    from agentdata.verify import answers_match  # math-verify is slow to import: only when voting needs it

    return bool(answers_match(first, second))


def majority_vote(responses: Sequence[Trajectory], equivalent: Equivalence = answers_equivalent) -> Trajectory | None:
    """The response whose answer most others agree with (earliest wins a tie); None if no answers."""
    votes = [(r.final_answer, 1, r) for r in responses if r.final_answer is not None and r.final_answer.strip()]
    return largest_cluster(votes, equivalent)


def largest_cluster(votes: Iterable[tuple[str, int, Any]], equivalent: Equivalence) -> Any:
    """The payload of the first vote of the largest cluster, or None without votes.

    `votes` are (answer, weight, payload) in order; each joins the first cluster (in the order they
    were made) whose first answer is equivalent to its own, else makes a new one. The result depends
    on the sequence of answers only, so equal answers given as one vote of their count cluster alike.
    """
    clusters: list[list[Any]] = []  # [first answer, total weight, first payload]
    for answer, weight, payload in votes:
        for cluster in clusters:
            if equivalent(answer, cluster[0]):
                cluster[1] += weight
                break
        else:
            clusters.append([answer, weight, payload])
    if not clusters:
        return None
    return max(clusters, key=lambda cluster: cluster[1])[2]  # max keeps the first of equal sizes: earliest wins


# --------------------------------------------------------------------------- per benchmark


@dataclass
class BenchmarkMetrics:
    """What one model scored on one benchmark at one tool-call budget."""

    num_problems: int
    num_responses: int
    samples: int
    avg_at_k: float
    pass_at_k: dict[int, float]
    maj_at_k: float
    mean_tool_calls: float
    tool_error_rate: float
    mean_response_tokens: float
    mean_response_chars: float
    finish_reasons: dict[str, int] = field(default_factory=dict)
    kind: str = "math"  # math | code | multiple choice | mixed
    mean_test_s: float = 0.0  # code: seconds of test runs per response (not part of the tool time)
    mean_passed_fraction: float | None = None  # code: the mean fraction of tests passed
    failed_responses: int = 0  # ended in an engine or sandbox error: in no score, counted here
    unscored_problems: int = 0  # problems whose every response failed: in no score either
    # 95% intervals over problems (evaluation/stats.py); None / absent where no problem was scored.
    avg_at_k_ci: Interval | None = None
    maj_at_k_ci: Interval | None = None
    pass_at_k_ci: dict[int, Interval] = field(default_factory=dict)
    calls_per_correct: float | None = None  # tool calls of all responses per correct one (agent.tool_use)
    tool_use_by_source: list[dict] = field(default_factory=list)  # agent.tool_use numbers per source
    tool_use_by_domain: list[dict] = field(default_factory=list)

    @property
    def pass_at_samples(self) -> float:
        """pass@k at k = the number of samples drawn."""
        return self.pass_at_k[max(self.pass_at_k)] if self.pass_at_k else 0.0

    @property
    def pass_at_samples_ci(self) -> Interval | None:
        return self.pass_at_k_ci.get(max(self.pass_at_k)) if self.pass_at_k else None


@dataclass
class ProblemScores:
    """Per scored problem (failed responses left out): what avg@k, pass@k and maj@k average over problems."""

    responses: dict[str, int]  # problem id -> valid responses
    correct: dict[str, int]  # problem id -> correct responses
    majority: dict[str, float]  # problem id -> 1.0 when the majority answer is right

    def accuracy(self) -> dict[str, float]:
        """Each problem's share of correct responses (its avg@k term)."""
        return {pid: self.correct[pid] / n for pid, n in self.responses.items()}

    def pass_at(self, k: int) -> dict[str, float]:
        """Each problem's unbiased pass@k, for the problems with at least k responses."""
        return {pid: pass_at_k(n, self.correct[pid], k) for pid, n in self.responses.items() if n >= k}

    def metric(self, name: str) -> dict[str, float]:
        """Per-problem values of `avg`, `maj` or `pass@K`."""
        if name == "avg":
            return self.accuracy()
        if name == "maj":
            return dict(self.majority)
        if name.startswith("pass@"):
            return self.pass_at(int(name.removeprefix("pass@")))
        raise ValueError(f"unknown metric {name!r}: avg, maj or pass@K")


def benchmark_metrics(
    responses: pl.DataFrame | Iterable[Trajectory], equivalent: Equivalence = answers_equivalent
) -> BenchmarkMetrics:
    """All metrics of one benchmark run (a table of `evaluation.responses`, or trajectories); problems
    may have different sample counts. Failed responses (engine or sandbox errors) are left out of every
    score and counted apart."""
    return score_benchmark(responses, equivalent)[0]


def score_benchmark(
    responses: pl.DataFrame | Iterable[Trajectory], equivalent: Equivalence = answers_equivalent
) -> tuple[BenchmarkMetrics, ProblemScores]:
    """The metrics of one benchmark run and the per-problem scores they average (for paired comparisons)."""
    table = responses if isinstance(responses, pl.DataFrame) else trajectory_responses(responses)
    if table.height == 0:
        raise ValueError("no trajectories to score")
    valid = table.filter(pl.col("finish_reason") != "error")
    kind = benchmark_kind(valid if valid.height else table)
    per_problem = problem_table(valid, _same_program if kind == "code" else equivalent)
    ids = per_problem["problem_id"].to_list()
    scores = ProblemScores(
        responses=dict(zip(ids, per_problem["n"].to_list())),
        correct=dict(zip(ids, per_problem["c"].to_list())),
        majority=dict(zip(ids, per_problem["majority_correct"].cast(pl.Float64).to_list())),
    )
    pass_curve = _pass_curve(scores)
    count = max(1, valid.height)
    calls = int(valid["num_tool_calls"].sum())
    correct = int(valid["correct"].sum())
    tested = valid["tests_fraction"].drop_nulls()
    metrics = BenchmarkMetrics(
        num_problems=len(ids),
        num_responses=valid.height,
        samples=int(table.group_by("problem_id").len()["len"].max()),
        avg_at_k=_mean(scores.accuracy().values()),
        pass_at_k={k: value for k, (value, _) in pass_curve.items()},
        maj_at_k=_mean(scores.majority.values()),
        mean_tool_calls=calls / count,
        tool_error_rate=int(valid["num_tool_errors"].sum()) / calls if calls else 0.0,
        mean_response_tokens=int(valid["completion_tokens"].sum()) / count,
        mean_response_chars=int(valid["chars"].sum()) / count,
        finish_reasons=dict(sorted(table["finish_reason"].value_counts().iter_rows())),
        kind=kind,
        mean_test_s=float(valid["test_s"].sum()) / count,
        mean_passed_fraction=_mean(tested.to_list()) if tested.len() else None,
        failed_responses=table.height - valid.height,
        unscored_problems=table["problem_id"].n_unique() - len(ids),
        avg_at_k_ci=mean_interval(list(scores.accuracy().values())),
        maj_at_k_ci=mean_interval(list(scores.majority.values())),
        pass_at_k_ci={k: interval for k, (_, interval) in pass_curve.items() if interval is not None},
        calls_per_correct=calls / correct if correct else None,
        tool_use_by_source=tool_use_by(valid, "source"),
        tool_use_by_domain=tool_use_by(valid, "domain"),
    )
    return metrics, scores


def tool_use_by(responses: pl.DataFrame, key: str) -> list[dict]:
    """agent.tool_use's numbers per value of `key` (sorted), from the groups' sums."""
    groups = responses.group_by(key).agg(
        pl.len(), pl.col("correct").sum(), pl.col("num_tool_calls").sum(), pl.col("num_tool_errors").sum()
    )
    rows = sorted(groups.iter_rows(), key=lambda row: str(row[0]))
    return [
        {key: str(group), **ToolUse(count, int(right), int(calls), int(errors)).as_dict()}
        for group, count, right, calls, errors in rows
    ]


def problem_table(responses: pl.DataFrame, equivalent: Equivalence = answers_equivalent) -> pl.DataFrame:
    """Per problem (in order of first appearance): `n` responses, `c` correct, and whether the majority
    answer is right (`majority_correct`, by `largest_cluster` over its responses sorted by id)."""
    ordered = responses.with_row_index("order").sort("problem_id", "id", maintain_order=True)
    counts = ordered.group_by("problem_id", maintain_order=True).agg(
        pl.col("order").min(), pl.len().alias("n"), pl.col("correct").sum().cast(pl.Int64).alias("c")
    )
    answered = pl.col("final_answer").is_not_null() & (pl.col("final_answer").str.strip_chars() != "")
    distinct = (
        ordered.filter(answered)
        .group_by("problem_id", "final_answer", maintain_order=True)
        .agg(pl.len().alias("votes"), pl.col("correct").first())
        .group_by("problem_id", maintain_order=True)
        .agg(pl.col("final_answer"), pl.col("votes"), pl.col("correct"))
    )
    majority = [
        bool(largest_cluster(zip(answers, votes, correct), equivalent)) if len(answers) > 1 else bool(correct[0])
        for answers, votes, correct in distinct.select("final_answer", "votes", "correct").iter_rows()
    ]
    won = distinct.select("problem_id", pl.Series("majority_correct", majority, dtype=pl.Boolean))
    table = counts.join(won, on="problem_id", how="left").with_columns(pl.col("majority_correct").fill_null(False))
    return table.sort("order").drop("order")


LETTERS = "ABCDEFGHIJKLMNOP"


def benchmark_kind(responses: pl.DataFrame) -> str:
    """code (graded by tests), multiple choice (letter answers), math, or mixed."""
    letter = pl.col("answer").str.strip_chars().is_in(list(LETTERS))
    kind = pl.when(pl.col("domain") == "code").then(pl.lit("code")).when(letter).then(pl.lit("multiple choice"))
    kinds = responses.select(kind.otherwise(pl.lit("math")).alias("kind").unique())["kind"]
    return kinds[0] if kinds.len() == 1 else "mixed"


def _same_program(first: str, second: str) -> bool:
    """Programs vote together only when identical (up to surrounding whitespace)."""
    return first.strip() == second.strip()


def _pass_curve(scores: ProblemScores) -> dict[int, tuple[float, Interval | None]]:
    """pass@k and its interval for each reported k, over the problems that have at least k samples."""
    curve: dict[int, tuple[float, Interval | None]] = {}
    for k in pass_k_values(max(scores.responses.values(), default=0)):
        values = list(scores.pass_at(k).values())
        curve[k] = (_mean(values), mean_interval(values))
    return curve


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0
