"""Eval metrics on crafted trajectories: no model, no sandbox."""

from __future__ import annotations

import io
import math
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentdata.cli.eval_views import TOOL_USE_COLUMNS, eval_views, results_table
from agentdata.evaluation.metrics import benchmark_metrics, majority_vote, normalise_answer, pass_at_k, pass_k_values
from agentdata.evaluation.report import EvalReport, EvalResult
from agentdata.records import ToolCall, Trajectory, assistant_message, tool_message


def response(
    problem_id: str,
    index: int,
    answer: str | None,
    correct: bool,
    *,
    calls: int = 0,
    errors: int = 0,
    tokens: int = 10,
    finish: str = "answer",
    text: str = "",
) -> Trajectory:
    messages = [{"role": "user", "content": f"question {problem_id}"}]
    for number in range(calls):
        call = ToolCall(code="print(1)", id=f"call_{number}")
        messages += [assistant_message("", [call]), tool_message(call.id, "1")]
    messages.append(assistant_message(text or (f"\\boxed{{{answer}}}" if answer is not None else "no idea")))
    return Trajectory(
        id=f"{problem_id}-{index}",
        problem_id=problem_id,
        question=f"question {problem_id}",
        answer="gold",
        messages=messages,
        final_answer=answer,
        correct=correct,
        num_tool_calls=calls,
        num_tool_errors=errors,
        completion_tokens=tokens,
        finish_reason=finish,
        sampling={"sample_index": index},
    )


def string_equivalence(first: str, second: str) -> bool:
    return normalise_answer(first) == normalise_answer(second)


# --------------------------------------------------------------------------- pass@k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of k-subsets of n samples that hold at least one of the c correct ones."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(samples[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(1, 0, 1), (1, 1, 1), (4, 1, 1), (4, 1, 2), (5, 2, 3), (8, 3, 4), (6, 6, 2)])
def test_pass_at_k_matches_enumeration(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k))


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_binomial_formula(case):
    n, c, k = case
    expected = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-9)


def test_pass_at_k_is_stable_for_large_n():
    value = pass_at_k(10_000, 1, 5_000)  # binomials this size overflow floats
    assert value == pytest.approx(0.5)


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, 1, 4), (3, 1, 0), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_k_values_are_powers_of_two_then_n():
    assert pass_k_values(1) == [1]
    assert pass_k_values(4) == [1, 2, 4]
    assert pass_k_values(6) == [1, 2, 4, 6]


# --------------------------------------------------------------------------- majority vote


def test_majority_vote_picks_the_most_common_answer():
    responses = [response("p", 0, "7", False), response("p", 1, "12", True), response("p", 2, " 12 ", True)]
    assert majority_vote(responses, string_equivalence).final_answer == "12"


def test_majority_vote_tie_goes_to_the_earliest_answer():
    responses = [response("p", 0, "7", False), response("p", 1, "12", True)]
    assert majority_vote(responses, string_equivalence).final_answer == "7"


def test_majority_vote_ignores_missing_answers():
    responses = [response("p", 0, None, False), response("p", 1, None, False), response("p", 2, "3", True)]
    assert majority_vote(responses, string_equivalence).final_answer == "3"
    assert majority_vote([response("p", 0, None, False)], string_equivalence) is None


def test_equivalent_answers_vote_together():
    from agentdata.evaluation.metrics import answers_equivalent

    assert answers_equivalent("\\frac{1}{2}", "0.5")
    assert answers_equivalent(" 12 ", "12")
    assert not answers_equivalent("12", "13")
    responses = [response("p", 0, "7", False), response("p", 1, "1/2", True), response("p", 2, "0.5", True)]
    assert majority_vote(responses).final_answer == "1/2"


def test_normalise_answer_drops_wrappers_and_spacing():
    assert normalise_answer("\\text{ B }") == normalise_answer("b") == "b"
    assert normalise_answer("\\left( 1, 2 \\right).") == "(1,2)"


# --------------------------------------------------------------------------- per benchmark


def test_benchmark_metrics_on_two_problems():
    trajectories = [
        # problem a: 2 of 4 correct; the majority answer (5, three votes) is wrong
        response("a", 0, "5", False, calls=2, errors=1, tokens=100),
        response("a", 1, "6", True, calls=1, tokens=50),
        response("a", 2, "5", False, calls=0, tokens=30, finish="max_tokens"),
        response("a", 3, "6", True, calls=1, tokens=20),
        # problem b: 4 of 4 correct
        *[response("b", i, "1", True, calls=0, tokens=200) for i in range(4)],
    ]
    trajectories[2].final_answer = "5."  # same vote as "5" after normalising
    metrics = benchmark_metrics(trajectories, string_equivalence)
    assert metrics.num_problems == 2 and metrics.num_responses == 8 and metrics.samples == 4
    assert metrics.avg_at_k == pytest.approx((0.5 + 1.0) / 2)
    assert metrics.pass_at_k[1] == pytest.approx(metrics.avg_at_k)
    assert metrics.pass_at_k[2] == pytest.approx((brute_force_pass_at_k(4, 2, 2) + 1.0) / 2)
    assert metrics.pass_at_k[4] == pytest.approx(1.0)
    assert metrics.maj_at_k == pytest.approx(0.5)  # a: tie 5 vs 6 goes to "5" (earliest), wrong; b: right
    assert metrics.mean_tool_calls == pytest.approx(4 / 8)
    assert metrics.tool_error_rate == pytest.approx(1 / 4)
    assert metrics.mean_response_tokens == pytest.approx((100 + 50 + 30 + 20 + 800) / 8)
    assert metrics.finish_reasons == {"answer": 7, "max_tokens": 1}


def test_benchmark_metrics_with_uneven_sample_counts():
    trajectories = [response("a", 0, "1", True), response("a", 1, "2", False), response("b", 0, "1", False)]
    metrics = benchmark_metrics(trajectories, string_equivalence)
    assert metrics.avg_at_k == pytest.approx((0.5 + 0.0) / 2)
    assert metrics.pass_at_k == {1: pytest.approx(0.25), 2: pytest.approx(1.0)}  # pass@2 only over problem a


def test_failed_responses_are_no_wrong_answers_and_are_counted_apart(tmp_path):
    trajectories = [
        response("a", 0, "1", True),
        response("a", 1, None, False, finish="error"),
        response("a", 2, "2", False),
        response("b", 0, None, False, finish="error"),
    ]
    metrics = benchmark_metrics(trajectories, string_equivalence)
    assert metrics.avg_at_k == pytest.approx(0.5)  # a: 1 of its 2 valid responses; b has none and is not scored
    assert metrics.pass_at_k[1] == pytest.approx(0.5) and metrics.num_problems == 1 and metrics.num_responses == 2
    assert (metrics.failed_responses, metrics.unscored_problems, metrics.samples) == (2, 1, 3)
    assert metrics.finish_reasons == {"answer": 2, "error": 2}
    report = EvalReport(results=[EvalResult("m", "hf:m", "aime", 4, "runs/x", metrics)])
    report.write(tmp_path)
    assert EvalReport.read(tmp_path).results[0].metrics == metrics


def test_a_benchmark_whose_every_response_failed_scores_nothing_instead_of_zero():
    metrics = benchmark_metrics([response("a", 0, None, False, finish="error")], string_equivalence)
    assert (metrics.num_problems, metrics.failed_responses, metrics.unscored_problems, metrics.pass_at_k) == (
        0,
        1,
        1,
        {},
    )


def test_benchmark_metrics_with_no_tool_calls_has_zero_error_rate():
    metrics = benchmark_metrics([response("a", 0, "1", True)], string_equivalence)
    assert metrics.tool_error_rate == 0.0 and metrics.mean_tool_calls == 0.0


def test_benchmark_metrics_rejects_nothing():
    with pytest.raises(ValueError):
        benchmark_metrics([], string_equivalence)


def test_response_chars_count_text_and_code_of_the_model_only():
    trajectory = response("a", 0, "1", True, calls=1, text="abc")
    code_arguments = len('{"code": "print(1)"}')
    assert benchmark_metrics([trajectory], string_equivalence).mean_response_chars == 3 + code_arguments


# --------------------------------------------------------------------------- report


def test_report_round_trips_through_json(tmp_path):
    metrics = benchmark_metrics([response("a", 0, "1", True), response("a", 1, "2", False)], string_equivalence)
    report = EvalReport(results=[EvalResult("m", "hf:m", "aime", 4, "runs/x", metrics)], settings={"samples": 2})
    path = report.write(tmp_path)
    text = path.read_text()
    assert '"avg@2": 0.5' in text and '"maj@2"' in text and '"pass@k"' in text
    again = EvalReport.read(tmp_path)
    assert again.results[0].metrics == metrics
    assert again.settings == {"samples": 2}


def test_report_read_names_the_file_on_bad_input(tmp_path):
    from agentdata.errors import InputFileError

    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(InputFileError, match="report.json"):
        EvalReport.read(tmp_path)


def test_results_table_has_a_row_per_result():
    metrics = benchmark_metrics([response("a", 0, "1", True)], string_equivalence)
    table = results_table([EvalResult("m", "s", "b", 1, "r", metrics), EvalResult("m", "s", "b", 2, "r", metrics)])
    assert table.row_count == 2


def printed(renderables, width: int) -> list[str]:
    """What `cli.render.show` prints on a console `width` columns wide (a log file gets rich's 80 when
    COLUMNS is unset)."""
    from rich.console import Console

    from agentdata.cli import render

    out = io.StringIO()
    render.show(SimpleNamespace(as_dict=dict), False, lambda _: renderables, Console(file=out, width=width))
    return out.getvalue().splitlines()


def quickstart_report() -> EvalReport:
    rollouts = [response("a", 0, "1", True, calls=1, tokens=74), response("a", 1, None, False, finish="max_tokens")]
    metrics = benchmark_metrics(rollouts, string_equivalence)
    return EvalReport(
        [
            EvalResult(model, f"hf:/tmp/runs/{model}", bench, 2, "r", metrics)
            for model in ("base", "trained")
            for bench in ("bench", "code_bench")
        ]
    )


def test_eval_results_too_wide_for_80_columns_read_as_one_block_each_not_folded_columns():
    lines = printed(eval_views(quickstart_report(), Path("runs/eval")), 80)
    assert all(len(line) <= 80 for line in lines)
    headings = [line for line in lines if "tool calls ≤ 2" in line]
    assert headings == [
        f"{model} · {bench} (math) · tool calls ≤ 2 · 1 problems"
        for model in ("base", "trained")
        for bench in ("bench", "code_bench")
    ]
    assert sum("finish reasons: answer 1, max_tokens 1" in line for line in lines) == 4  # every value whole
    avg = [line.split() for line in lines if line.lstrip().startswith("avg@2")]
    assert len(avg) == 4 and avg[0][:2] == ["avg@2", "50.0%"] and avg[0][-2:] == ["calls/resp", "0.50"]
    assert all(line == line.rstrip() for line in lines if "avg@2" in line)


def test_paired_differences_too_wide_for_80_columns_read_one_line_each():
    report = quickstart_report()
    report.comparisons = [
        {
            "model": "trained",
            "baseline": "base",
            "benchmark": "bench",
            "max_tool_calls": 2,
            "metric": "avg@2",
            "difference": 0.125,
            "interval": {"low": -0.05, "high": 0.3},
            "significant": False,
            "p_value": 0.25,
            "problems": 8,
            "sentence": "trained is 12.5 points above base on bench, but the interval holds zero: no effect shown",
        }
    ]
    lines = printed(eval_views(report, Path("runs/eval")), 80)
    assert any("trained vs base · bench · tools ≤ 2 · avg@2: +12.5 pts [-5.0, 30.0], p 0.25" in line for line in lines)
    verdict = (
        "  bench · tools ≤ 2: trained is 12.5 points above base on bench, but the interval holds zero: no effect shown"
    )
    assert verdict in lines  # one line, never folded
    wide = printed(eval_views(report, Path("runs/eval")), 260)
    assert any("95% interval" in line and "difference" in line for line in wide)  # the table where it fits


def test_eval_tables_are_one_table_where_they_fit():
    lines = printed(eval_views(quickstart_report(), Path("runs/eval")), 260)
    headers = [line for line in lines if "model" in line and "benchmark" in line]
    assert len(headers) == 1 and all(name in headers[0] for name in ("avg@k", *TOOL_USE_COLUMNS))
