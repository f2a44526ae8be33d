"""The intervals and paired comparisons on constructed data with a known answer (evaluation/stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from agentdata.evaluation.stats import (
    Interval,
    difference_interval,
    mean_interval,
    paired_comparison,
    seed_problem_interval,
    sign_flip_p_value,
    trend,
    wilson_interval,
)


def simulated_scores(rng, problems: int, k: int, difficulty: np.ndarray | None = None) -> np.ndarray:
    """Per-problem avg@k terms: each problem has its own solve rate, k Bernoulli responses."""
    rates = rng.uniform(0, 1, problems) if difficulty is None else difficulty
    return rng.binomial(k, rates) / k


def test_the_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    true_rates = rng.beta(0.6, 1.4, 60)  # a skewed benchmark: many hard problems
    covered = 0
    for draw in range(200):
        # a new benchmark of 60 problems drawn from the same population each time, k = 4
        problems = rng.choice(true_rates, 60)
        interval = mean_interval(simulated_scores(rng, 60, 4, problems), seed=draw)
        covered += interval.low <= true_rates.mean() <= interval.high
    assert 0.88 <= covered / 200 <= 0.99


def test_the_bootstrap_interval_agrees_with_scipys_percentile_bootstrap():
    rng = np.random.default_rng(2)
    scores = simulated_scores(rng, 80, 4)
    ours = mean_interval(scores)
    theirs = scipy_stats.bootstrap(
        (scores,), np.mean, n_resamples=20_000, method="percentile", random_state=np.random.default_rng(0)
    ).confidence_interval
    assert ours.method == "bootstrap"
    assert ours.low == pytest.approx(theirs.low, abs=0.01) and ours.high == pytest.approx(theirs.high, abs=0.01)
    assert mean_interval(scores) == ours  # seeded: the same scores always give the same interval


def test_no_spread_gives_a_wilson_bound_instead_of_a_point():
    interval = mean_interval([0.0] * 50)
    assert interval.method == "wilson" and interval.low == 0.0
    assert interval.high == pytest.approx(wilson_interval(0, 50)[1]) and 0.06 < interval.high < 0.08
    everything = mean_interval([1.0] * 50)
    assert everything.high == 1.0 and everything.low == pytest.approx(1 - interval.high)
    assert mean_interval([]) is None and mean_interval([float("nan")]) is None


def test_many_problems_use_the_normal_interval():
    rng = np.random.default_rng(3)
    scores = simulated_scores(rng, 20_000, 2)
    interval = mean_interval(scores)
    half = 1.96 * scores.std(ddof=1) / math.sqrt(len(scores))
    assert interval.method == "normal"
    assert interval.low == pytest.approx(scores.mean() - half, abs=1e-4)


def test_mcnemar_for_zero_one_outcomes_matches_the_exact_binomial_test():
    # 10 problems only the model solves, 2 only the baseline solves, 38 both or neither
    differences = np.array([1.0] * 10 + [-1.0] * 2 + [0.0] * 38)
    expected = scipy_stats.binomtest(10, 12, 0.5).pvalue
    assert sign_flip_p_value(differences) == pytest.approx(expected)
    assert sign_flip_p_value(np.zeros(20)) == 1.0


def test_the_sign_flip_test_is_exact_for_few_problems_and_close_by_sampling_for_many():
    rng = np.random.default_rng(4)
    few = rng.choice([-0.5, -0.25, 0.25, 0.5, 0.75], 12)
    patterns = np.array([[1 if (i >> j) & 1 else -1 for j in range(12)] for i in range(2**12)])
    brute = float((np.abs(patterns @ few) >= abs(few.sum()) - 1e-9).mean())
    assert sign_flip_p_value(few) == pytest.approx(brute)
    many = rng.normal(0.05, 0.3, 300)
    t_test = scipy_stats.ttest_1samp(many, 0).pvalue  # the randomisation test's large-sample twin
    assert sign_flip_p_value(many) == pytest.approx(t_test, abs=0.02)


def paired_scores(rng, problems: int, k: int, effect: float) -> tuple[dict, dict, float]:
    """Baseline and model on the same problems; the model solves each problem `effect` more often."""
    base_rates = rng.uniform(0.1, 0.6, problems)
    model_rates = np.clip(base_rates + effect, 0, 1)
    base = {f"p{i}": s for i, s in enumerate(rng.binomial(k, base_rates) / k)}
    model = {f"p{i}": s for i, s in enumerate(rng.binomial(k, model_rates) / k)}
    return model, base, float((model_rates - base_rates).mean())


def test_a_known_difference_is_found_covered_and_said_plainly():
    rng = np.random.default_rng(5)
    model, base, truth = paired_scores(rng, 200, 4, 0.2)
    comparison = paired_comparison("real", "stitched", "avg@4", model, base, responses_per_problem=4)
    assert comparison.difference == pytest.approx(np.mean([model[p] - base[p] for p in model]))
    assert comparison.interval.low <= truth <= comparison.interval.high
    assert comparison.significant and comparison.p_value < 0.001
    assert comparison.sentence().startswith(f"real beats stitched by {100 * comparison.difference:.1f} points [")
    reverse = paired_comparison("stitched", "real", "avg@4", base, model, responses_per_problem=4)
    assert reverse.sentence().startswith("real beats stitched by") and reverse.difference < 0


def test_the_paired_interval_covers_the_true_difference_about_95_percent_of_the_time():
    rng = np.random.default_rng(6)
    covered = 0
    for draw in range(150):
        model, base, truth = paired_scores(rng, 60, 2, 0.05)
        comparison = paired_comparison("a", "b", "avg@2", model, base, 2, seed=draw)
        covered += comparison.interval.low <= truth <= comparison.interval.high
    assert 0.88 <= covered / 150 <= 0.99


def test_no_real_difference_is_called_undetectable_with_the_size_that_would_tell():
    rng = np.random.default_rng(7)
    model, base, _ = paired_scores(rng, 40, 2, 0.0)
    comparison = paired_comparison("tuned", "base", "avg@2", model, base, responses_per_problem=2)
    assert not comparison.significant
    sentence = comparison.sentence()
    assert sentence.startswith("no difference detectable at this size on avg@2 (tuned ")
    spread = np.std([model[p] - base[p] for p in model], ddof=1)
    problems_needed = math.ceil(((1.96 + 0.8416) * spread / abs(comparison.difference)) ** 2)
    assert comparison.responses_needed == pytest.approx(problems_needed * 2, rel=0.01)
    assert f"about {comparison.responses_needed:,} responses per model" in sentence


def test_identical_models_are_said_to_score_the_same():
    scores = {f"p{i}": (i % 3) / 2 for i in range(30)}
    comparison = paired_comparison("a", "b", "avg@2", scores, dict(scores), 2)
    assert comparison.difference == 0 and comparison.p_value == 1.0 and comparison.responses_needed is None
    bound = wilson_interval(0, 30)[1]
    assert comparison.interval == Interval(-bound, bound, "wilson")
    assert comparison.sentence().endswith("the two scored the same on every one of the 30 problems")


def test_an_even_split_of_wins_and_losses_says_which_size_this_set_can_detect():
    model = {f"p{i}": 1.0 if i < 5 else 0.0 for i in range(40)}
    base = {f"p{i}": 1.0 if 5 <= i < 10 else 0.0 for i in range(40)}  # 5 wins, 5 losses, 30 ties
    comparison = paired_comparison("a", "b", "avg@1", model, base)
    assert comparison.difference == 0 and comparison.responses_needed is None
    expected = (1.96 + 0.8416) * np.std([model[p] - base[p] for p in model], ddof=1) / math.sqrt(40)
    assert comparison.detectable == pytest.approx(expected, rel=1e-3)
    assert comparison.sentence().endswith(f"40 problems detect only differences above {100 * expected:.1f} points")


def test_only_problems_both_models_were_scored_on_are_paired():
    comparison = paired_comparison("a", "b", "maj@4", {"x": 1.0, "y": 0.0, "z": 1.0}, {"x": 0.0, "y": 0.0}, 4)
    assert comparison.problems == 2 and comparison.difference == pytest.approx(0.5)
    assert paired_comparison("a", "b", "avg@1", {"x": 1.0}, {"y": 1.0}) is None


def test_a_constant_nonzero_difference_is_not_a_point():
    interval = difference_interval(np.ones(20))
    assert interval.high == 1.0 and interval.low < 1.0 and interval.method == "wilson"


def per_seed_differences(offsets: list[float], problems: int = 70) -> np.ndarray:
    """Per-seed, per-problem avg@3 differences: the same problems' own spread, shifted by each seed's luck."""
    rng = np.random.default_rng(5)
    problem_effect = rng.choice([-1, 0, 0, 0, 1, 1], size=problems) / 3  # about +0.05 on average
    noise = rng.choice([-1, 0, 0, 1], size=(len(offsets), problems)) / 3
    return problem_effect + noise + np.array(offsets)[:, None]


def test_the_seed_level_interval_is_the_problem_bootstrap_with_one_seed():
    differences = per_seed_differences([0.0])
    seeded, problems_only = seed_problem_interval(differences), difference_interval(differences[0])
    assert seeded.method == problems_only.method == "bootstrap"
    assert seeded.low == pytest.approx(problems_only.low, abs=1e-3)
    assert seeded.high == pytest.approx(problems_only.high, abs=1e-3)
    assert seed_problem_interval(differences) == seeded  # seeded: one set of outcomes, one interval


def test_seeds_that_disagree_widen_the_paired_interval():
    agreeing = per_seed_differences([0.0, 0.0, 0.0])
    disagreeing = per_seed_differences([0.2, -0.1, 0.05])  # one training seed's luck carries the mean
    agree, disagree = seed_problem_interval(agreeing), seed_problem_interval(disagreeing)
    pooled_problems = difference_interval(disagreeing.mean(axis=0))  # seeds averaged away: too narrow
    width = lambda interval: interval.high - interval.low  # noqa: E731
    assert width(disagree) > 1.5 * width(agree) and width(disagree) > 1.5 * width(pooled_problems)
    assert disagree.low < disagreeing.mean() < disagree.high
    assert pooled_problems.low > 0 and disagree.low < 0  # the effect the problems alone would claim does not hold
    assert seed_problem_interval(np.full((3, 10), 0.5)).method == "wilson"  # no spread: not a point


def test_a_rising_series_has_a_trend_and_a_flat_or_noisy_one_says_no_trend():
    rng = np.random.default_rng(11)
    steps = np.arange(1, 31)
    rising = trend(steps, 0.2 + 0.01 * steps + rng.normal(0, 0.03, len(steps)))  # +0.3 over the run
    assert rising.verdict == "rising" and rising.low > 0 and rising.points == 30
    falling = trend(steps, 120 - 1.5 * steps + rng.normal(0, 5, len(steps)))  # response length shrinking
    assert falling.verdict == "falling" and falling.high < 0
    flat = trend(steps, 0.3 + rng.normal(0, 0.03, len(steps)))
    assert flat.verdict == "no trend" and flat.low < 0 < flat.high
    floor = trend(steps, np.zeros(len(steps)))  # accuracy 0 at every step
    assert (floor.slope, floor.low, floor.high, floor.verdict) == (0.0, 0.0, 0.0, "no trend")
    assert trend([0, 5], [0.1, 0.4]) is None and trend([3, 3, 3], [0.1, 0.2, 0.3]) is None


def test_the_trend_interval_is_the_textbook_t_interval_of_the_slope():
    x, y = [0, 5, 10, 15], [0.10, 0.12, 0.19, 0.20]
    fit = scipy_stats.linregress(x, y)
    half = scipy_stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    found = trend(x, y)
    assert found.slope == pytest.approx(fit.slope)
    assert (found.low, found.high) == pytest.approx((fit.slope - half, fit.slope + half))
