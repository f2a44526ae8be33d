"""Eval's metrics computed over a table of responses (polars) against their definitions computed response by
response in Python, on random runs: uneven sample counts, failed responses, votes that split and tie."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentdata.evaluation.metrics import benchmark_metrics, majority_vote, normalise_answer, pass_at_k, pass_k_values
from agentdata.evaluation.responses import run_responses, trajectory_responses
from agentdata.records import ToolCall, Trajectory, assistant_message, tool_message, write_records

ANSWERS = ("1", " 1 ", "1.", "2", "\\boxed{2}", "3", "", None)


def string_equivalence(first: str, second: str) -> bool:
    return normalise_answer(first) == normalise_answer(second)


def trajectory(problem: int, index: int, answer, correct: bool, calls: int, failed: bool) -> Trajectory:
    messages = [{"role": "user", "content": f"q{problem}"}]
    for number in range(calls):
        messages += [
            assistant_message("run", [ToolCall(f"print({number})", id=f"c{number}")]),
            tool_message(f"c{number}", "x"),
        ]
    messages.append(assistant_message(f"so {answer}"))
    return Trajectory(
        id=f"p{problem}-{index}",
        problem_id=f"p{problem}",
        question=f"q{problem}",
        answer="1",
        messages=messages,
        final_answer=None if failed else answer,
        correct=correct and not failed,
        num_tool_calls=calls,
        num_tool_errors=min(calls, index % 2),
        completion_tokens=10 * (index + 1),
        finish_reason="error" if failed else "answer",
        sampling={"sample_index": index},
        timings={"test_s": 0.5 * index},
    )


responses = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from(ANSWERS),
        st.booleans(),
        st.integers(0, 2),
        st.integers(0, 9).map(lambda value: value == 0),
    ),
    min_size=1,
    max_size=40,
)


def runs(drawn) -> list[Trajectory]:
    counters: dict[int, int] = defaultdict(int)
    made = []
    for problem, answer, correct, calls, failed in drawn:
        made.append(trajectory(problem, counters[problem], answer, correct, calls, failed))
        counters[problem] += 1
    return made[::-1]  # not in id order: the metrics sort each problem's responses by id


def by_definition(trajectories: list[Trajectory]) -> dict:
    """The numbers from their definitions, response by response."""
    valid = [t for t in trajectories if t.finish_reason != "error"]
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in valid:
        groups[t.problem_id].append(t)
    for group in groups.values():
        group.sort(key=lambda t: t.id)
    most = max((len(g) for g in groups.values()), default=0)
    curve = {}
    for k in pass_k_values(most):
        scores = [pass_at_k(len(g), sum(t.correct for t in g), k) for g in groups.values() if len(g) >= k]
        curve[k] = sum(scores) / len(scores)
    winners = [majority_vote(g, string_equivalence) for g in groups.values()]
    chars = [
        sum(
            len(m.get("content") or "") + sum(len(c["function"]["arguments"]) for c in m.get("tool_calls") or [])
            for m in t.messages
            if m["role"] == "assistant"
        )
        for t in valid
    ]
    count = max(1, len(valid))
    return {
        "num_problems": len(groups),
        "avg": sum(sum(t.correct for t in g) / len(g) for g in groups.values()) / len(groups) if groups else 0.0,
        "maj": sum(w is not None and w.correct for w in winners) / len(groups) if groups else 0.0,
        "pass": curve,
        "chars": sum(chars) / count,
        "test_s": sum(t.timings["test_s"] for t in valid) / count,
        "failed": len(trajectories) - len(valid),
        "unscored": len({t.problem_id for t in trajectories} - set(groups)),
    }


@settings(max_examples=30, deadline=None)
@given(responses)
def test_table_metrics_equal_their_definitions(drawn):
    trajectories = runs(drawn)
    metrics = benchmark_metrics(trajectories, string_equivalence)
    expected = by_definition(trajectories)
    assert metrics.num_problems == expected["num_problems"]
    assert metrics.avg_at_k == pytest.approx(expected["avg"])
    assert metrics.maj_at_k == pytest.approx(expected["maj"])
    assert metrics.pass_at_k == pytest.approx(expected["pass"])
    assert metrics.mean_response_chars == pytest.approx(expected["chars"])
    assert metrics.mean_test_s == pytest.approx(expected["test_s"])
    assert (metrics.failed_responses, metrics.unscored_problems) == (expected["failed"], expected["unscored"])


def test_a_vote_joins_the_first_equivalent_cluster_whatever_repeats_it():
    """Votes 1, 2, 1., 2, 2: '1.' joins '1' (equivalent), so 1 and 2 tie at 2... until the last 2: 2 wins."""
    answers = ["1", "2", "1.", "2", "2"]
    trajectories = [trajectory(0, i, a, a == "1", 0, False) for i, a in enumerate(answers)]
    assert benchmark_metrics(trajectories, string_equivalence).maj_at_k == 0.0
    assert benchmark_metrics(trajectories[:4], string_equivalence).maj_at_k == 1.0  # a tie: the earliest cluster


def test_the_run_dir_table_equals_the_records_table(tmp_path):
    trajectories = runs([(p, ANSWERS[i % 6], i % 3 == 0, i % 3, i == 7) for i, p in enumerate([0, 1, 2] * 4)])
    write_records(trajectories[:6], tmp_path / "trajectories" / "part-00000.parquet", Trajectory)
    write_records(trajectories[6:], tmp_path / "trajectories" / "part-00001.parquet", Trajectory)
    shards = sorted((tmp_path / "trajectories").glob("*.parquet"))
    from_shards = run_responses(shards, ["p0", "p1", "p2"], samples=4).sort("id")
    assert from_shards.equals(trajectory_responses(trajectories).sort("id"))
    assert run_responses(shards, ["p0"], samples=2)["id"].sort().to_list() == ["p0-0", "p0-1"]


def test_math_answers_vote_by_their_value():
    answers = ["7", "1/2", "0.5", "\\frac{1}{2}"]
    trajectories = [trajectory(0, i, a, a != "7", 0, False) for i, a in enumerate(answers)]
    assert benchmark_metrics(trajectories).maj_at_k == 1.0  # three ways of writing one half outvote 7
    assert math.isclose(benchmark_metrics(trajectories).avg_at_k, 0.75)
