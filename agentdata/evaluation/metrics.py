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
- intervals: every avg@k, pass@k and maj@k carries its 95% interval over problems
  (`evaluation/stats.py` says which and why), and `ProblemScores` keeps the per-problem values
  that paired comparisons between models need (`score_benchmark` returns both).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from agentdata.agent.tool_use import tool_use_by
from agentdata.evaluation.stats import Interval, mean_interval
from agentdata.records import Trajectory

Equivalence = Callable[[str, str], bool]


# --------------------------------------------------------------------------- estimators


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


def normalise_answer(answer: str) -> str:
    """Cheap canonical form for voting: no spaces, no \\boxed/\\text wrappers, no trailing dot."""
    text = answer.strip()
    text = re.sub(r"\\(?:boxed|text|mathrm|textbf)\{(.*)\}", r"\1", text)
    text = re.sub(r"\\[,;:! ]|\\left|\\right|\$|\s+", "", text)
    return text.rstrip(".").lower()


def answers_equivalent(first: str, second: str) -> bool:
    """Same normalised string, or equal by math-verify (one answer taken as the other's gold)."""
    if normalise_answer(first) == normalise_answer(second):
        return True
    from agentdata.verify import answers_match  # math-verify is slow to import: only when voting needs it

    return bool(answers_match(first, second))


def majority_vote(responses: Sequence[Trajectory], equivalent: Equivalence = answers_equivalent) -> Trajectory | None:
    """The response whose answer most others agree with (earliest wins a tie); None if no answers."""
    clusters: list[list[Trajectory]] = []
    for response in responses:
        if response.final_answer is None or not response.final_answer.strip():
            continue  # no answer, no vote
        for cluster in clusters:
            if equivalent(response.final_answer, cluster[0].final_answer):
                cluster.append(response)
                break
        else:
            clusters.append([response])
    if not clusters:
        return None
    largest = max(clusters, key=len)  # max keeps the first of equal sizes: the earliest answer wins ties
    return largest[0]


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


def group_by_problem(trajectories: Iterable[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        groups[trajectory.problem_id].append(trajectory)
    for responses in groups.values():
        responses.sort(key=lambda t: t.id)
    return dict(groups)


def response_chars(trajectory: Trajectory) -> int:
    """Characters the model wrote: assistant text and the code of its tool calls."""
    total = 0
    for message in trajectory.messages:
        if message["role"] != "assistant":
            continue
        total += len(message.get("content") or "")
        total += sum(len(call["function"].get("arguments") or "") for call in message.get("tool_calls") or [])
    return total


def benchmark_metrics(
    trajectories: Iterable[Trajectory], equivalent: Equivalence = answers_equivalent
) -> BenchmarkMetrics:
    """All metrics of one benchmark run; problems may have different sample counts.

    Failed responses (engine or sandbox errors) are left out of every score and counted apart.
    """
    return score_benchmark(trajectories, equivalent)[0]


def score_benchmark(
    trajectories: Iterable[Trajectory], equivalent: Equivalence = answers_equivalent
) -> tuple[BenchmarkMetrics, ProblemScores]:
    """The metrics of one benchmark run and the per-problem scores they average (for paired comparisons)."""
    everything = list(trajectories)
    if not everything:
        raise ValueError("no trajectories to score")
    trajectories = [t for t in everything if t.finish_reason != "error"]
    groups = group_by_problem(trajectories)
    calls = sum(t.num_tool_calls for t in trajectories)
    correct = sum(t.correct for t in trajectories)
    count = max(1, len(trajectories))
    kind = benchmark_kind(trajectories or everything)
    if kind == "code":
        equivalent = _same_program
    tested = [t.metadata["tests"] for t in trajectories if isinstance(t.metadata.get("tests"), dict)]
    scores = ProblemScores(
        responses={pid: len(rs) for pid, rs in groups.items()},
        correct={pid: sum(t.correct for t in rs) for pid, rs in groups.items()},
        majority={pid: _majority_correct(rs, equivalent) for pid, rs in groups.items()},
    )
    pass_curve = _pass_curve(scores)
    metrics = BenchmarkMetrics(
        num_problems=len(groups),
        num_responses=len(trajectories),
        samples=max(len(responses) for responses in group_by_problem(everything).values()),
        avg_at_k=_mean(scores.accuracy().values()),
        pass_at_k={k: value for k, (value, _) in pass_curve.items()},
        maj_at_k=_mean(scores.majority.values()),
        mean_tool_calls=calls / count,
        tool_error_rate=sum(t.num_tool_errors for t in trajectories) / calls if calls else 0.0,
        mean_response_tokens=sum(t.completion_tokens for t in trajectories) / count,
        mean_response_chars=sum(response_chars(t) for t in trajectories) / count,
        finish_reasons=dict(sorted(Counter(t.finish_reason for t in everything).items())),
        kind=kind,
        mean_test_s=sum(float(t.timings.get("test_s", 0.0)) for t in trajectories) / count,
        mean_passed_fraction=_mean(float(tests.get("fraction", 0.0)) for tests in tested) if tested else None,
        failed_responses=len(everything) - len(trajectories),
        unscored_problems=len({t.problem_id for t in everything} - set(groups)),
        avg_at_k_ci=mean_interval(list(scores.accuracy().values())),
        maj_at_k_ci=mean_interval(list(scores.majority.values())),
        pass_at_k_ci={k: interval for k, (_, interval) in pass_curve.items() if interval is not None},
        calls_per_correct=calls / correct if correct else None,
        tool_use_by_source=tool_use_by(_counts(trajectories, "source"), "source"),
        tool_use_by_domain=tool_use_by(_counts(trajectories, "domain"), "domain"),
    )
    return metrics, scores


def _counts(trajectories: list[Trajectory], key: str) -> list[tuple[str, bool, int, int]]:
    return [(getattr(t, key), t.correct, t.num_tool_calls, t.num_tool_errors) for t in trajectories]


def benchmark_kind(trajectories: list[Trajectory]) -> str:
    kinds = {
        "code" if t.domain == "code" else "multiple choice" if _is_letter(t.answer) else "math" for t in trajectories
    }
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _is_letter(answer: str) -> bool:
    return len(answer.strip()) == 1 and answer.strip() in "ABCDEFGHIJKLMNOP"


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


def _majority_correct(responses: list[Trajectory], equivalent: Equivalence) -> float:
    winner = majority_vote(responses, equivalent)
    return float(winner is not None and winner.correct)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0
