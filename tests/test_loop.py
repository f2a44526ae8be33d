import asyncio
import json
import re

import pytest

from agentdata.agent.loop import TOOL_LIMIT_NOTICE, LoopConfig, solve
from agentdata.engines.base import Generation
from agentdata.records import Problem, message_tool_calls, validate_messages
from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

PROBLEM = Problem("What is 6 times 7?", "42", source="demo")


def hermes(**settings) -> LoopConfig:
    """These tests read the hermes rendering (its stop string, <tool_response> turns) and their fakes write it."""
    return LoopConfig(protocol=SCRIPTED_PROTOCOL, **settings)


def run(engine, config=None, sandbox=None, problem=PROBLEM):
    sandbox = sandbox or InProcessSandbox()
    return asyncio.run(solve(problem, engine, sandbox, config or hermes(), sample_index=0, seed=1)), sandbox


def test_tool_call_runs_in_sandbox_and_real_output_goes_back():
    trajectory, sandbox = run(ScriptedEngine())
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert message_tool_calls(trajectory.messages[2])[0].code == "print(6 * 7)"
    assert trajectory.messages[3]["content"] == "42"  # the real output of the code
    assert trajectory.final_answer == "42" and trajectory.correct
    assert (trajectory.num_tool_calls, trajectory.num_tool_errors, trajectory.num_turns) == (1, 0, 2)
    assert trajectory.finish_reason == "answer"
    assert trajectory.completion_tokens == 19 and trajectory.prompt_tokens == 10
    assert trajectory.id == f"{PROBLEM.id}-0" and trajectory.teacher == "scripted"
    assert sandbox.closed and not sandbox.sessions  # the session was freed
    validate_messages(trajectory.messages)


def test_each_assistant_message_records_its_tokens_and_seconds():
    trajectory, _ = run(ScriptedEngine(delay_s=0.01))
    turns, seconds = trajectory.metadata["turns"], trajectory.timings["turns"]
    assert len(turns) == len(seconds) == sum(m["role"] == "assistant" for m in trajectory.messages) == 2
    assert [t["completion_tokens"] for t in turns] == [7, 12]  # what the engine reported for each generation
    assert sum(t["completion_tokens"] for t in turns) == trajectory.completion_tokens
    assert all(t["prompt_tokens"] == 10 for t in turns) and [t["tool_errors"] for t in turns] == [0, 0]
    assert all(s["generation_s"] >= 0.01 for s in seconds)
    assert seconds[0]["tool_s"] > 0 and seconds[1]["tool_s"] == 0  # the first turn's code ran, the answer ran none


def test_wrong_answer_is_marked_incorrect():
    trajectory, _ = run(ScriptedEngine(answer="41"))
    assert trajectory.final_answer == "41" and not trajectory.correct


def test_engine_sees_plain_messages_with_protocol_system_prompt():
    engine = ScriptedEngine()
    run(engine)
    first, second = engine.requests
    assert first.messages[0]["role"] == "system" and "<tool_call>" in first.messages[0]["content"]
    assert first.stop == ("</tool_call>",)
    assert second.messages[-1]["role"] == "user" and "<tool_response>" in second.messages[-1]["content"]
    assert second.max_new_tokens == LoopConfig().max_new_tokens - 7  # the budget shrinks by what was used


def test_tool_call_limit_is_told_then_enforced():
    trajectory, sandbox = run(ScriptedEngine(calls_per_answer=99), hermes(max_tool_calls=2))
    assert trajectory.num_tool_calls == 2 and sandbox.calls == 2
    assert trajectory.finish_reason == "max_tool_calls"
    assert any(m["role"] == "tool" and m["content"] == TOOL_LIMIT_NOTICE for m in trajectory.messages)


def test_max_turns():
    trajectory, _ = run(ScriptedEngine(calls_per_answer=99), hermes(max_turns=2, max_tool_calls=10))
    assert trajectory.finish_reason == "max_turns" and trajectory.num_turns == 2


def test_engine_error_is_recorded():
    trajectory, _ = run(ScriptedEngine(fail_on={0}))
    assert trajectory.finish_reason == "error" and "500" in trajectory.error and not trajectory.correct


class LengthEngine(ScriptedEngine):
    async def generate(self, request):
        self.requests.append(request)
        return Generation("thinking " * 5, None, "length", 10, request.max_new_tokens)


def test_token_budget():
    trajectory, _ = run(LengthEngine(), hermes(max_new_tokens=64))
    assert trajectory.finish_reason == "max_tokens" and trajectory.completion_tokens == 64


class BrokenCallEngine(ScriptedEngine):
    async def generate(self, request):
        self.requests.append(request)
        if len(self.requests) == 1:
            return Generation(
                '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": ', "</tool_call>", "stop", 5, 5
            )
        return Generation("Fine: \\boxed{42}", None, "stop", 5, 5)


def test_malformed_call_is_reported_back_and_counted():
    trajectory, sandbox = run(BrokenCallEngine())
    assert sandbox.calls == 0 and trajectory.metadata["malformed_tool_calls"] == 1
    assert "could not be read" in trajectory.messages[3]["content"] and trajectory.correct


class ErrorCodeEngine(ScriptedEngine):
    async def generate(self, request):
        self.requests.append(request)
        if len(self.requests) == 1:
            return Generation(
                '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "1/0"}}\n',
                "</tool_call>",
                "stop",
                5,
                5,
            )
        return Generation("\\boxed{42}", None, "stop", 5, 5)


def test_failing_code_is_data_not_exception():
    trajectory, _ = run(ErrorCodeEngine())
    assert trajectory.num_tool_errors == 1 and "ZeroDivisionError" in trajectory.messages[3]["content"]
    assert [turn["tool_errors"] for turn in trajectory.metadata["turns"]] == [1, 0]  # the turn whose code failed


class SessionProbe(ScriptedEngine):
    """Runs `scripts[question]`, one cell per turn, then answers with the last output it read."""

    def __init__(self, scripts: dict[str, list[str]]):
        super().__init__()
        self.scripts = scripts

    async def generate(self, request):
        question = request.messages[1]["content"]
        outputs = [m["content"] for m in request.messages if m["role"] == "user" and "<tool_response>" in m["content"]]
        cells = self.scripts[question]
        if len(outputs) < len(cells):
            call = json.dumps({"name": "code_interpreter", "arguments": {"code": cells[len(outputs)]}})
            return Generation(f"<tool_call>\n{call}\n", "</tool_call>", "stop", 10, 7)
        return Generation(f"I read: {outputs[-1]} \\boxed{{1}}", None, "stop", 10, 5)


class RecordingSandbox:
    """The real sandbox, with the sessions each call ran in and the ones closed written down."""

    def __init__(self, sandbox):
        self.sandbox, self.used, self.closed = sandbox, {}, []

    async def arun(self, code, session_id=None, timeout=None, **options):
        self.used.setdefault(code, session_id)
        return await self.sandbox.arun(code, session_id, timeout, **options)

    def close_session(self, session_id):
        self.closed.append(session_id)
        self.sandbox.close_session(session_id)

    async def aclose_session(self, session_id):
        self.closed.append(session_id)
        await self.sandbox.aclose_session(session_id)


def test_sessions_keep_state_within_a_trajectory_only():
    # two trajectories at once on one real sandbox: each cell sees its own trajectory's earlier cells, never
    # the other's, and each trajectory's session is closed when it ends (its variables go with it)
    from agentdata.sandbox import Sandbox

    writer, reader = Problem("writer", "1", id="w"), Problem("reader", "1", id="r")
    engine = SessionProbe(
        {"writer": ["secret = 41", "print(secret + 1)"], "reader": ["import time; time.sleep(0.5)", "print(secret)"]}
    )

    async def both(sandbox):
        return await asyncio.gather(
            *(solve(problem, engine, sandbox, hermes(), sample_index=0, seed=1) for problem in (writer, reader))
        )

    with Sandbox(workers=2, prefork=0) as real:
        sandbox = RecordingSandbox(real)
        wrote, read = asyncio.run(both(sandbox))
        after_close = real.run("print(secret)", session_id=sandbox.used["secret = 41"])
    assert wrote.messages[5]["content"] == "42"
    assert "NameError" in read.messages[5]["content"] and read.num_tool_errors == 1
    assert sandbox.used["secret = 41"] == sandbox.used["print(secret + 1)"] != sandbox.used["print(secret)"]
    assert sorted(sandbox.closed) == sorted({sandbox.used["secret = 41"], sandbox.used["print(secret)"]})
    assert after_close.status == "error" and "NameError" in after_close.stderr


@pytest.mark.parametrize(
    "field, value, allowed",
    [("max_turns", 0, "[1, 1000]"), ("max_new_tokens", 0, "[1, 10000000]"), ("temperature", -1.0, "[0, 10]")],
)
def test_config_rejects_bad_values(field, value, allowed):
    # the message names the field, the value refused and the range it must be in
    with pytest.raises(ValueError, match=re.escape(f"{field} {value}: must be in {allowed}")):
        LoopConfig(**{field: value})


def test_call_ids_are_unique_within_a_trajectory():
    trajectory, _ = run(ScriptedEngine(calls_per_answer=3))
    ids = [call["id"] for m in trajectory.messages for call in m.get("tool_calls", [])]
    tool_ids = [m["tool_call_id"] for m in trajectory.messages if m["role"] == "tool"]
    assert ids == tool_ids == ["call_0", "call_1", "call_2"]


class BareFenceEngine(ScriptedEngine):
    """codeblock: a bash fence stops generation at the closing fence without being a call."""

    async def generate(self, request):
        self.requests.append(request)
        if len(self.requests) == 1:
            return Generation("Run this:\n```bash\nls", "\n```\n", "stop", 5, 5)
        return Generation("No need; 6*7 is \\boxed{42}.", None, "stop", 5, 5)


def test_stop_string_without_a_call_continues_the_same_turn():
    trajectory, sandbox = run(BareFenceEngine(), LoopConfig(protocol="codeblock"))
    engine_requests = trajectory.num_turns
    assert engine_requests == 2 and sandbox.calls == 0 and trajectory.correct
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant"]
    assert trajectory.messages[-1]["content"].startswith("Run this:\n```bash\nls\n```\n")
    # the two generations made one message: one entry holding both generations' tokens
    assert [turn["completion_tokens"] for turn in trajectory.metadata["turns"]] == [10]
