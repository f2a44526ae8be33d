"""Rollout health: every check on a trajectory built to fail it (and only it), a healthy one failing none,
collect counting them, and curate dropping them under their own reasons, with stored or fresh measures."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.curate import CurateConfig, curate
from agentdata.engines.base import Engine, Generation
from agentdata.formats.health import (
    CHECKS,
    HEALTH_KEY,
    HEALTH_REASONS,
    MEASURE_NAMES,
    HealthLimits,
    failed_checks,
    measure_health,
)
from agentdata.formats.tool_output import DEFAULT_TOOL_OUTPUT_CHARS, tool_output_text
from agentdata.records import Problem, ToolCall, Trajectory, assistant_message, tool_message
from agentdata.settings import CountBand
from agentdata.steps.health import COLUMN_PREFIX, HealthFilter
from tests.curate_fixtures import write_run
from tests.fakes import InProcessSandbox

QUESTION = {"role": "user", "content": "What is 6 times 7?"}
ANSWER = "So the answer is \\boxed{42}."


def call_turn(code: str = "print(6 * 7)", content: str = "Let me compute it.", index: int = 0) -> list[dict]:
    return [assistant_message(content, [ToolCall(code, id=f"call_{index}")]), tool_message(f"call_{index}", "42")]


def healthy() -> list[dict]:
    return [QUESTION, *call_turn(), assistant_message(ANSWER)]


# Each check's case: (messages, format, domain), built to fail that check and no other.
CASES = {
    "empty_turn": ([QUESTION, *call_turn(), assistant_message(""), assistant_message(ANSWER)], "codeblock", "math"),
    "answer_repeated": ([QUESTION, *call_turn(), assistant_message(" ".join([ANSWER] * 3))], "codeblock", "math"),
    "repetition": (
        [
            QUESTION,
            *call_turn(content="Let me think about this problem once more, carefully. " * 8),
            assistant_message(ANSWER),
        ],
        "codeblock",
        "math",
    ),
    "call_after_answer": ([QUESTION, *call_turn(content=ANSWER), assistant_message(ANSWER)], "codeblock", "math"),
    "repeated_code": ([QUESTION, *call_turn(), *call_turn(index=1), assistant_message(ANSWER)], "hermes", "math"),
    "tool_output_flood": (
        [QUESTION, assistant_message("", [ToolCall("print('x' * 5000)")]), tool_message("call_0", "x" * 5000)]
        + [assistant_message(ANSWER)],
        "codeblock",
        "math",
    ),
    "hallucinated_output": (
        [QUESTION, *call_turn(), assistant_message("```output\n42\n```\n" + ANSWER)],
        "codeblock",
        "math",
    ),
    "unterminated_code": (
        [QUESTION, *call_turn(), assistant_message("Let me check.\n```python\nprint(6 * 7)")],
        "codeblock",
        "math",
    ),
    "mixed_protocols": (
        [
            QUESTION,
            *call_turn(),
            assistant_message('<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "1"}}\n</tool_call>'),
            assistant_message(ANSWER),
        ],
        "codeblock",
        "math",
    ),
}


@pytest.mark.parametrize("check", HEALTH_REASONS)
def test_each_check_fails_on_its_own_case_and_only_there(check):
    messages, format, domain = CASES[check]
    assert failed_checks(measure_health(messages, format, domain).as_dict()) == [check]


def test_a_healthy_trajectory_fails_no_check_in_any_format():
    for format in ("codeblock", "hermes", "qwen3coder", "native"):
        assert failed_checks(measure_health(healthy(), format, "math").as_dict()) == []


def test_the_checks_read_each_protocol_own_markup():
    hermes_unclosed = [QUESTION, assistant_message('<tool_call>\n{"name": "code_interpreter", "arguments": {')]
    assert failed_checks(measure_health(hermes_unclosed, "hermes").as_dict()) == ["unterminated_code"]
    hermes_fake_response = [QUESTION, *call_turn(), assistant_message("<tool_response>\n42\n</tool_response>" + ANSWER)]
    assert failed_checks(measure_health(hermes_fake_response, "hermes").as_dict()) == ["hallucinated_output"]
    hermes_with_a_block = [QUESTION, *call_turn(), assistant_message("```python\nprint(6 * 7)\n```\n" + ANSWER)]
    assert failed_checks(measure_health(hermes_with_a_block, "hermes").as_dict()) == ["mixed_protocols"]
    # ... except the final program of a code problem: there the block is the answer
    program = [QUESTION, *call_turn(), assistant_message("Done.\n```python\nprint(input())\n```")]
    assert failed_checks(measure_health(program, "hermes", "code").as_dict()) == []


def test_limits_are_settings():
    messages, format, domain = CASES["answer_repeated"]  # three boxed answers
    measures = measure_health(messages, format, domain).as_dict()
    assert failed_checks(measures, HealthLimits(max_answer_repeats=3)) == []
    flood = measure_health(*CASES["tool_output_flood"]).as_dict()
    assert failed_checks(flood, HealthLimits(max_tool_output_chars=10_000)) == []
    repeats = measure_health(*CASES["repeated_code"]).as_dict()
    assert failed_checks(repeats, HealthLimits(max_repeated_code=1)) == []


@pytest.mark.parametrize("status", ["ok", "error", "timeout"])
def test_a_flood_cut_for_the_model_still_fails_under_the_defaults(status):
    """Probe (issue 41): the check measured the output after it was cut to 256 characters (the default), so under
    the default limit of 4096 it could never fire. It measures the tool's output, as the marker says it was."""
    printed = "".join(f"{n}\n" for n in range(2000))  # 8890 characters
    shown = tool_output_text(printed, "Traceback ...\nValueError: x" if status == "error" else "", status)
    assert len(shown) <= DEFAULT_TOOL_OUTPUT_CHARS
    messages = [QUESTION, assistant_message("", [ToolCall("for n in range(2000): print(n)")])]
    messages += [tool_message("call_0", shown), assistant_message(ANSWER)]
    measures = measure_health(messages, "codeblock", "math").as_dict()
    extra = {"ok": 0, "error": len("\nTraceback ...\nValueError: x"), "timeout": len("\nExecution timed out.")}
    assert measures["max_tool_output_chars"] == len(printed.rstrip()) + extra[status]
    assert failed_checks(measures) == ["tool_output_flood"]


def test_marker_like_text_in_output_that_was_not_cut_is_not_read_as_a_cut():
    shown = tool_output_text("hello\n[... 999999 characters cut ...]\nbye")
    messages = [QUESTION, *call_turn(), tool_message("call_1", shown), assistant_message(ANSWER)]
    assert measure_health(messages, "codeblock", "math").max_tool_output_chars == len(shown)


def test_the_step_and_the_python_checks_agree():
    rng = random.Random(0)
    rows = [{name: rng.choice([0, 0, 1, 3, 5000]) for name in MEASURE_NAMES} for _ in range(300)]
    frame = pl.DataFrame([{COLUMN_PREFIX + name: value for name, value in row.items()} for row in rows])
    limits = HealthLimits(max_repeated_code=1)
    reasons = HealthFilter(limits).reasons(frame).to_list()
    assert reasons == [(failed_checks(row, limits) or [None])[0] for row in rows]
    assert {reason for reason in reasons if reason} == set(HEALTH_REASONS)  # every check was exercised
    assert len(CHECKS) == len(HEALTH_REASONS) == 9


class RepeatsItsAnswer(Engine):
    """Runs the code once, then states the right answer seven times: the case earlier versions produced."""

    spec = "repeats-its-answer"

    async def generate(self, request):
        if not any("```output" in (m.get("content") or "") for m in request.messages[1:]):
            return Generation("```python\nprint(6 * 7)", "\n```\n", "stop", 10, 7)
        return Generation("\n" + " ".join(["The answer is \\boxed{42}."] * 7), None, "stop", 10, 40)


def test_an_answer_repeated_seven_times_graded_correct_is_counted_and_dropped(tmp_path):
    questions = ("What is 6 times 7?", "Compute the product of six and seven.", "How much is 84 divided by 2?")
    problems = [Problem(question, "42", source="ladder") for question in questions]
    config = CollectConfig(model="x", concurrency=3, loop=LoopConfig(protocol="codeblock"))
    summary = collect(problems, tmp_path / "run", config, engine=RepeatsItsAnswer(), sandbox=InProcessSandbox())
    trajectories = RunDir(tmp_path / "run").trajectories()
    assert all(t.correct for t in trajectories)  # right answers, all of them
    assert {t.metadata[HEALTH_KEY]["answer_repeats"] for t in trajectories} == {7}
    assert summary.health == {"answer_repeated": 3, "repetition": 3}  # one trajectory may fail several checks
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["health"] == summary.health
    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", rejects=tmp_path / "rejects.parquet")
    assert result.kept_rows == 0 and result.counts == {"answer_repeated": 3}  # the first check that fails names it
    assert pl.read_parquet(tmp_path / "rejects.parquet")["drop_reason"].to_list() == ["answer_repeated"] * 3
    kept = curate(
        [tmp_path / "run"], tmp_path / "kept.parquet", CurateConfig(rollout_health=HealthLimits(health=False))
    )
    assert kept.kept_rows == 3


def case_trajectory(check: str, number: int, stored: dict | None) -> Trajectory:
    messages, format, domain = CASES[check]
    calls = sum(len(m.get("tool_calls") or []) for m in messages)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    question = f"Problem {words[number]}: what is {number} plus {number * 7} in {words[-number - 1]} units?"
    return Trajectory(
        id=f"t{number}",
        problem_id=f"p{number}",
        question=question,
        answer="42",
        messages=[{"role": "user", "content": question}, *messages[1:]],
        final_answer="42",
        correct=True,
        num_tool_calls=calls,
        format=format,
        domain=domain,
        metadata={} if stored is None else {HEALTH_KEY: stored},
    )


@pytest.mark.parametrize("stored", ["none", "current", "stale"])
def test_curate_drops_each_check_under_its_reason_from_stored_or_fresh_measures(tmp_path, stored):
    rows = []
    for number, check in enumerate(HEALTH_REASONS):
        measures = measure_health(*CASES[check]).as_dict()
        kept = {"none": None, "current": measures, "stale": {**dict.fromkeys(measures, 0), "version": 0}}[stored]
        rows.append(case_trajectory(check, number, kept))
    healthy_row = case_trajectory("answer_repeated", 9, None)
    healthy_row.messages = [healthy_row.messages[0], *healthy()[1:]]
    write_run(tmp_path / "run", [*rows, healthy_row])
    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(tool_calls=CountBand(0, 8)))
    assert result.counts == dict.fromkeys(HEALTH_REASONS, 1) and result.kept_rows == 1
