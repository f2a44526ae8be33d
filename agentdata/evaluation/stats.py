"""How sure a score is: 95% intervals of per-problem means, and paired differences between two models.

Every score eval reports (avg@k, pass@k, maj@k) is a mean over problems of a per-problem value
(the share of its k responses that are right, the unbiased pass@k estimate, whether the majority
answer is right). The problems are the independent unit: the k responses to one problem are
correlated (an easy problem makes all of them right), so treating the n·k responses as independent
would make every interval too narrow. Hence:

- `mean_interval`: the percentile bootstrap over problems (2,000 resamples, seeded, so one set of
  scores always gives the same interval). Where every problem scored the same (0 of 50 right), a
  bootstrap has no spread to resample and would claim [0, 0]; the interval then allows that a share
  of the problems up to the Wilson upper bound of 0 in n (7.1% of 50) scores otherwise, anywhere in
  the range: [0, 7.1%] for 0 of 50. Over 10,000 problems the bootstrap's own limit, the normal
  interval (mean ± 1.96 standard errors), is used: there they agree and it costs nothing.
- `seed_problem_interval`: the paired interval when each arm was trained with several seeds: the
  seeds are a level of the bootstrap (drawn first, then the problems), so training noise counts.
- `paired_comparison`: two models on the same problems, per-problem differences d = a - b. The
  difference is mean(d); its interval is the paired bootstrap over problems (the same rules: when no
  problem differs, ± 7.1 points on 50 problems); the p-value is the
  paired sign-flip randomisation test (under no difference each d is as likely to be -d), exact for
  up to 16 differing problems and 10,000 seeded flips above that. For 0/1 outcomes (k = 1, maj@k)
  that test is McNemar's exact test, computed as such from the binomial.
- `trend`: a series against training steps (tool calls, response length, accuracy): the slope of
  its least-squares line with a t interval; a trend is said only where the interval excludes zero.
- `PairedComparison.sentence`: one plain line. An effect is claimed only where the interval
  excludes zero; otherwise it says no difference is detectable and how many responses per model
  would detect one this size (normal approximation, 80% power, two-sided 5%).

Pure numpy (and scipy's t quantile for `trend`), no model: tests build scores with a known difference
and check the interval covers it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
Z = 1.959963984540054  # two-sided 95%
Z_POWER = 0.8416212335729143  # 80% power
RESAMPLES = 2_000
FLIPS = 10_000
EXACT_FLIPS_UP_TO = 16  # differing problems: 2^16 sign patterns enumerated
NORMAL_ABOVE = 10_000  # problems: the normal interval instead of resampling
SEED = 0
CHUNK = 250  # resamples drawn at once (bounds memory at resamples x problems)


def wilson_bounds(rate: Any, trials: Any, z: float = Z) -> tuple[Any, Any]:
    """The Wilson score interval of a success `rate` over `trials`, before clipping to [0, 1]. Arithmetic
    only, so the one formula serves numbers and columns alike (filter computes it over a Polars frame)."""
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (rate + z2 / (2 * trials)) / denominator
    half = z * (rate * (1 - rate) / trials + z2 / (4 * trials * trials)) ** 0.5 / denominator
    return centre - half, centre + half


def wilson_interval(successes: int, trials: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of `successes` in `trials` (it stays inside [0, 1] and is not
    empty at 0 or k successes, unlike the normal approximation)."""
    if trials <= 0:
        raise ValueError("a confidence interval needs at least one trial")
    low, high = wilson_bounds(successes / trials, trials, z)
    return max(0.0, low), min(1.0, high)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # bootstrap | wilson | normal

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Interval:
        return cls(float(data["low"]), float(data["high"]), str(data["method"]))

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high

    def points(self) -> str:
        """As percentage points: `[2.1, 12.9]`."""
        return f"[{100 * self.low:.1f}, {100 * self.high:.1f}]"


def _values(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(scores, dtype=float)
    return values[~np.isnan(values)]


def _bootstrap_means(values: np.ndarray, seed: int) -> np.ndarray:
    """RESAMPLES means of `values` resampled with replacement (chunked, seeded)."""
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, RESAMPLES, CHUNK):
        rows = min(CHUNK, RESAMPLES - start)
        picks = rng.integers(0, len(values), size=(rows, len(values)))
        means.append(values[picks].mean(axis=1))
    return np.concatenate(means)


def _percentiles(means: np.ndarray) -> tuple[float, float]:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mean_interval(scores: Sequence[float] | np.ndarray, seed: int = SEED) -> Interval | None:
    """The 95% interval of the mean of per-problem scores in [0, 1]; None with no problem (NaNs skipped)."""
    values = _values(scores)
    if not len(values):
        return None
    mean = float(values.mean())
    if np.all(values == values[0]):
        return _no_spread(mean, len(values), 0.0, 1.0)
    if len(values) > NORMAL_ABOVE:
        half = Z * float(values.std(ddof=1)) / math.sqrt(len(values))
        return Interval(max(0.0, mean - half), min(1.0, mean + half), "normal")
    return Interval(*_percentiles(_bootstrap_means(values, seed)), "bootstrap")


def _no_spread(value: float, problems: int, lowest: float, highest: float) -> Interval:
    """Every problem scored `value`: a share of problems up to the Wilson upper bound of 0 in `problems`
    may score otherwise, anywhere in [lowest, highest] (a bootstrap would claim a point)."""
    hidden = wilson_interval(0, problems)[1]
    return Interval(value - hidden * (value - lowest), value + hidden * (highest - value), "wilson")


def difference_interval(differences: np.ndarray, seed: int = SEED) -> Interval:
    """The 95% interval of the mean per-problem difference (paired bootstrap, see the module doc)."""
    if np.all(differences == differences[0]):
        return _no_spread(float(differences[0]), len(differences), -1.0, 1.0)
    mean = float(differences.mean())
    if len(differences) > NORMAL_ABOVE:
        half = Z * float(differences.std(ddof=1)) / math.sqrt(len(differences))
        return Interval(mean - half, mean + half, "normal")
    return Interval(*_percentiles(_bootstrap_means(differences, seed)), "bootstrap")


def seed_problem_interval(differences: np.ndarray, seed: int = SEED) -> Interval:
    """The 95% interval of the mean difference over training seeds (rows) and problems (columns).

    Each resample draws the seeds with replacement, then the problems with replacement, and takes the
    mean of the drawn problems' differences in the drawn seeds. The problems are the same in every
    seed (crossed, not nested), so one problem draw serves every drawn seed: a draw per seed would
    average the problems' own spread away. Seeds that disagree widen the interval; with one seed it is
    the paired bootstrap over problems (`difference_interval`, the same draws)."""
    seeds, problems = differences.shape
    if np.all(differences == differences.flat[0]):
        return _no_spread(float(differences.flat[0]), problems, -1.0, 1.0)
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, RESAMPLES, CHUNK):
        rows = min(CHUNK, RESAMPLES - start)
        problem_picks = rng.integers(0, problems, size=(rows, problems))  # first: one seed = the problem bootstrap
        seed_picks = rng.integers(0, seeds, size=(rows, seeds))
        per_seed = differences[:, problem_picks].mean(axis=2).T  # (rows, seeds): each seed on the drawn problems
        means.append(np.take_along_axis(per_seed, seed_picks, axis=1).mean(axis=1))
    return Interval(*_percentiles(np.concatenate(means)), "bootstrap")


def sign_flip_p_value(differences: np.ndarray, seed: int = SEED) -> float:
    """Two-sided p-value of the paired randomisation test; McNemar's exact test for -1/0/1 differences."""
    nonzero = differences[differences != 0]
    if not len(nonzero):
        return 1.0
    if np.all(np.abs(nonzero) == np.abs(nonzero[0])):  # 0/1 outcomes: McNemar, exactly
        discordant, wins = len(nonzero), int((nonzero > 0).sum())
        tail = sum(math.comb(discordant, i) for i in range(min(wins, discordant - wins) + 1)) / 2**discordant
        return min(1.0, 2 * tail)
    observed = abs(float(nonzero.sum())) - 1e-12 * len(nonzero)  # ties count as extreme
    if len(nonzero) <= EXACT_FLIPS_UP_TO:
        patterns = (np.arange(2 ** len(nonzero))[:, None] >> np.arange(len(nonzero))) & 1
        sums = np.abs((np.where(patterns, 1.0, -1.0) * nonzero).sum(axis=1))
        return float((sums >= observed).mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, FLIPS, CHUNK):
        signs = rng.choice((-1.0, 1.0), size=(min(CHUNK, FLIPS - start), len(nonzero)))
        extreme += int((np.abs((signs * nonzero).sum(axis=1)) >= observed).sum())
    return (1 + extreme) / (1 + FLIPS)


@dataclass
class PairedComparison:
    """`model` against `baseline` on the problems both were scored on, for one metric."""

    model: str
    baseline: str
    metric: str  # e.g. avg@4
    model_score: float
    baseline_score: float
    difference: float
    interval: Interval
    p_value: float
    problems: int
    responses_per_problem: int
    detectable: float  # the smallest difference this many problems detects (80% power, 5%)
    responses_needed: int | None  # per model, to detect the observed difference; None when it is 0

    @property
    def significant(self) -> bool:
        return self.interval.excludes(0.0)

    def sentence(self) -> str:
        """One plain line: who beats whom by how much, or that this size shows no difference."""
        points = 100 * self.difference
        if self.significant:
            winner, loser, points, interval = self.model, self.baseline, points, self.interval
            if self.difference < 0:
                winner, loser = loser, winner
                interval = Interval(-self.interval.high, -self.interval.low, self.interval.method)
            return (
                f"{winner} beats {loser} by {abs(points):.1f} points {interval.points()} on {self.metric} "
                f"(p = {self.p_value:.2g}, {self.problems} problems)"
            )
        seen = (
            f"{self.model} {self.model_score:.1%} vs {self.baseline} {self.baseline_score:.1%}, "
            f"{points:+.1f} points {self.interval.points()}, p = {self.p_value:.2g}"
        )
        if not self.detectable:
            return (
                f"no difference detectable at this size on {self.metric} ({seen}): the two scored the same on "
                f"every one of the {self.problems} problems"
            )
        if self.responses_needed is None:
            return (
                f"no difference detectable at this size on {self.metric} ({seen}): {self.problems} problems "
                f"detect only differences above {100 * self.detectable:.1f} points"
            )
        return (
            f"no difference detectable at this size on {self.metric} ({seen}): about "
            f"{self.responses_needed:,} responses per model would be needed to detect {abs(points):.1f} points"
        )

    def as_dict(self) -> dict:
        data = asdict(self)
        data["interval"] = self.interval.as_dict()
        data["significant"] = self.significant
        data["sentence"] = self.sentence()
        return data


def paired_comparison(
    model: str,
    baseline: str,
    metric: str,
    model_scores: dict[str, float],
    baseline_scores: dict[str, float],
    responses_per_problem: int = 1,
    seed: int = SEED,
) -> PairedComparison | None:
    """Compare per-problem scores on the problems both have (by problem id); None if they share none."""
    shared = [pid for pid in model_scores if pid in baseline_scores]
    shared = [pid for pid in shared if not (math.isnan(model_scores[pid]) or math.isnan(baseline_scores[pid]))]
    if not shared:
        return None
    a = np.array([model_scores[pid] for pid in shared], dtype=float)
    b = np.array([baseline_scores[pid] for pid in shared], dtype=float)
    differences = a - b
    difference = float(differences.mean())
    spread = float(differences.std(ddof=1)) if len(differences) > 1 else 0.0
    detectable = (Z + Z_POWER) * spread / math.sqrt(len(differences)) if spread else 0.0
    needed = None
    if difference and spread:
        needed = math.ceil(((Z + Z_POWER) * spread / abs(difference)) ** 2) * max(1, responses_per_problem)
    return PairedComparison(
        model=model,
        baseline=baseline,
        metric=metric,
        model_score=float(a.mean()),
        baseline_score=float(b.mean()),
        difference=difference,
        interval=difference_interval(differences, seed),
        p_value=sign_flip_p_value(differences, seed),
        problems=len(shared),
        responses_per_problem=responses_per_problem,
        detectable=detectable,
        responses_needed=needed,
    )


@dataclass(frozen=True)
class Trend:
    """The least-squares line of a series against steps: its slope per step with a 95% t interval."""

    slope: float
    low: float
    high: float
    points: int
    first_step: float
    last_step: float

    @property
    def verdict(self) -> str:
        """`rising` or `falling` only where the interval excludes zero; else `no trend`."""
        if self.low > 0:
            return "rising"
        if self.high < 0:
            return "falling"
        return "no trend"

    def as_dict(self) -> dict:
        return asdict(self) | {"verdict": self.verdict}


def trend(steps: Sequence[float], values: Sequence[float]) -> Trend | None:
    """The slope of `values` against `steps` and its 95% interval (Student's t on n - 2 degrees of
    freedom, the residuals taken as independent); None with fewer than three points or one step.
    A series that is a straight line (every value equal: accuracy 0 at every step) has a zero-width
    interval, so only a nonzero slope reads as a trend."""
    from scipy.stats import t as student_t

    x, y = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.all(x == x[0]):
        return None
    centred = x - x.mean()
    slope = float((centred * (y - y.mean())).sum() / (centred**2).sum())
    residuals = y - y.mean() - slope * centred
    error = math.sqrt(float((residuals**2).sum()) / (len(x) - 2) / float((centred**2).sum()))
    half = float(student_t.ppf(1 - (1 - CONFIDENCE) / 2, len(x) - 2)) * error
    return Trend(slope, slope - half, slope + half, len(x), float(x.min()), float(x.max()))
