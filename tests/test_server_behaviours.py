"""The openai: engine and the agent loop against servers that behave as real ones do.

Each mode of bench/fake_openai_server.py copies a behaviour seen on a real server
(docs/engines.md); tests/test_conformance_serve.py runs the same loop against the real
`transformers serve`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from agentdata.agent.loop import LoopConfig, solve
from agentdata.engines import load_engine
from agentdata.records import CODE_TOOL, Problem, message_tool_calls, validate_messages
from tests.fakes import InProcessSandbox

_SERVER_FILE = Path(__file__).resolve().parents[1] / "bench" / "fake_openai_server.py"
if "fake_openai_server" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("fake_openai_server", _SERVER_FILE)
    sys.modules["fake_openai_server"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["fake_openai_server"])
fake = sys.modules["fake_openai_server"]

PROBLEM = Problem("What is 6 times 7?", "42", source="demo")
VLLM = {}
OPENAI = {"report_stop_reason": False}
TRANSFORMERS_SERVE = {"report_stop_reason": False, "keep_stop_string": True, "strict": True}
MODES = {"vllm": VLLM, "openai": OPENAI, "transformers-serve": TRANSFORMERS_SERVE}
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05}


def solve_on(server, protocol: str, **engine_options):
    engine = load_engine(f"openai:{server.url}", model="m", **FAST, **engine_options)

    async def go():
        try:
            return await solve(PROBLEM, engine, InProcessSandbox(), LoopConfig(protocol=protocol, max_turns=6), seed=1)
        finally:
            await engine.aclose()

    trajectory = asyncio.run(go())
    validate_messages(trajectory.messages)
    return trajectory, engine


def assistant_contents(trajectory) -> list[str]:
    return [m["content"] for m in trajectory.messages if m["role"] == "assistant"]


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_hermes_call_then_answer_takes_two_requests(mode):
    with fake.FakeOpenAIServer(script="tool", **mode) as server:
        trajectory, _ = solve_on(server, "hermes")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert message_tool_calls(trajectory.messages[2])[0].code == "print(6*7)"
    assert assistant_contents(trajectory)[-1] == fake.FINAL_ANSWER_TEXT  # no invented </tool_call>
    assert (trajectory.num_turns, trajectory.finish_reason, trajectory.correct) == (2, "answer", True)
    assert "malformed_tool_calls" not in trajectory.metadata and len(server.requests) == 2


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_hermes_plain_answer_gets_no_invented_markup(mode):
    with fake.FakeOpenAIServer(script="answer", **mode) as server:
        trajectory, _ = solve_on(server, "hermes")
    assert assistant_contents(trajectory) == [fake.FINAL_ANSWER_TEXT]
    assert (trajectory.num_turns, trajectory.finish_reason) == (1, "answer") and len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_codeblock_answer_after_a_call_is_not_continued_again(mode):
    with fake.FakeOpenAIServer(script="codeblock", **mode) as server:
        trajectory, _ = solve_on(server, "codeblock")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert message_tool_calls(trajectory.messages[2])[0].code == "print(6*7)"
    assert assistant_contents(trajectory)[-1].strip() == fake.FINAL_ANSWER_TEXT  # once, not repeated
    assert (trajectory.num_turns, trajectory.finish_reason, trajectory.correct) == (2, "answer", True)


def test_strict_server_gets_the_turn_continued_as_a_new_message():
    with fake.FakeOpenAIServer(script="codeblock", **VLLM) as lenient:
        continued, _ = solve_on(lenient, "codeblock")
    with fake.FakeOpenAIServer(script="codeblock", **TRANSFORMERS_SERVE) as strict:
        closed, engine = solve_on(strict, "codeblock")
    assert strict.refused == 1 and engine.adaptations == ["continue turns as new messages (no continue_final_message)"]
    resent = strict.requests[-1]
    assert "continue_final_message" not in resent and resent["messages"][-1] == {
        "role": "user",
        "content": "```output\n42\n```",
    }
    assert (
        resent["messages"][-2]["role"] == "assistant"
        and "```python\nprint(6*7)\n```" in resent["messages"][-2]["content"]
    )
    # the stored trajectory is the same canonical one either way
    strip = [{**m, "content": m["content"].strip()} for m in continued.messages]
    assert [{**m, "content": m["content"].strip()} for m in closed.messages] == strip


def test_continuation_fields_are_never_sent_when_switched_off():
    with fake.FakeOpenAIServer(script="codeblock", **TRANSFORMERS_SERVE) as server:
        trajectory, _ = solve_on(server, "codeblock", continue_final_message=False)
    assert server.refused == 0 and trajectory.correct
    assert not any("continue_final_message" in body for body in server.requests)


def test_reasoning_model_refusals_are_learned_once():
    with fake.FakeOpenAIServer(script="tool", reasoning_model=True, report_stop_reason=False) as server:
        first, engine = solve_on(server, "hermes")
        refused_in_first = server.refused
        trajectory, _ = solve_on(
            server, "hermes", max_tokens_field="max_completion_tokens", drop_fields=["stop", "temperature", "top_p"]
        )
    assert refused_in_first == 4 and len(engine.adaptations) == 4
    assert first.correct and first.num_turns == 2 and "malformed_tool_calls" not in first.metadata
    assert server.refused == 4 and trajectory.correct  # set up front: nothing refused
    last = server.requests[-1]
    assert last["max_completion_tokens"] > 0 and not {"max_tokens", "stop", "temperature", "top_p"} & set(last)


def test_native_tool_calls_go_out_and_come_back_in_openai_form():
    with fake.FakeOpenAIServer(script="tool", **TRANSFORMERS_SERVE) as server:
        trajectory, _ = solve_on(server, "native")
    first, second = server.requests
    assert first["tools"] == [CODE_TOOL] and "stop" not in first
    call = trajectory.messages[2]["tool_calls"][0]
    assert message_tool_calls(trajectory.messages[2])[0].code == "print(6*7)"
    assert trajectory.messages[3] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": "code_interpreter",
        "content": "42",
    }
    sent_call, sent_result = second["messages"][2], second["messages"][3]
    assert sent_call["tool_calls"] == [call] and isinstance(call["function"]["arguments"], str)
    assert sent_result == {"role": "tool", "tool_call_id": call["id"], "content": "42"}
    assert trajectory.correct and trajectory.num_turns == 2 and trajectory.format == "native"


def test_reasoning_content_is_kept_counted_and_not_sent_back():
    with fake.FakeOpenAIServer(script="tool", reasoning="Six sevens: use the tool.", **OPENAI) as server:
        trajectory, _ = solve_on(server, "hermes")
    thoughts = [m.get("reasoning_content") for m in trajectory.messages if m["role"] == "assistant"]
    assert thoughts == ["Six sevens: use the tool."] * 2
    assert trajectory.metadata["reasoning_tokens"] == 2 * 5
    assert not any("reasoning_content" in m for body in server.requests for m in body["messages"])


@pytest.mark.parametrize(
    ("protocol", "options"),
    [("codeblock", ["continue_final_message=false"]), ("native", []), ("hermes", ['drop_fields=["stop", "top_p"]'])],
)
def test_cli_collect_against_a_strict_server(tmp_path, protocol, options):
    from agentdata.agent.rundir import RunDir
    from tests.cli_helpers import run_cli

    script = "codeblock" if protocol == "codeblock" else "tool"
    with fake.FakeOpenAIServer(script=script, **TRANSFORMERS_SERVE) as server:
        flags = [flag for option in options for flag in ("--engine-option", option)]
        code = run_cli(
            [
                "collect",
                "--out",
                str(tmp_path / "run"),
                "--teacher",
                f"openai:{server.url}",
                "--model",
                "m",
                "--protocol",
                protocol,
                "--limit",
                "2",
                "--temperature",
                "0",
                *flags,
            ]
        )
    assert code == 0 and server.refused == 0
    trajectories = RunDir(tmp_path / "run").trajectories()
    assert len(trajectories) == 2  # built-in problems: the script answers 42, so only the shape is checked
    assert all(
        (t.num_turns, t.num_tool_calls, t.finish_reason, t.format) == (2, 1, "answer", protocol) for t in trajectories
    )
    if options and options[0].startswith("drop_fields"):
        assert not any({"stop", "top_p"} & set(body) for body in server.requests)


@pytest.mark.parametrize("wording", ["vllm", "openai"])
def test_a_conversation_that_outgrows_the_context_ends_as_context(wording):
    with fake.FakeOpenAIServer(script="tool") as unlimited:
        solve_on(unlimited, "hermes")
    first, second = (fake.prompt_words(body) for body in unlimited.requests)
    # the first turn fits with room to spare; the second (with the tool's output) does not
    with fake.FakeOpenAIServer(script="tool", context_tokens=(first + second) // 2, context_errors=wording) as server:
        trajectory, _ = solve_on(server, "hermes")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool"]
    assert trajectory.finish_reason == "context" and trajectory.correct is False
