"""Test doubles for the parts around the agent loop: a scripted engine and an in-process sandbox.

They implement the real interfaces (agentdata.engines.base.Engine, the sandbox's run/arun/
close_session) so the loop and the collect runner are tested without a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass

from agentdata.engines.base import Engine, Generation, GenerationRequest

TOOL_CALL = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6 * 7)"}}\n'


SCRIPTED_PROTOCOL = "hermes"  # the protocol the tests that predate the codeblock default run ScriptedEngine in
CODEBLOCK_STOP = "\n```\n"  # a request that stops there is in the codeblock protocol


class ScriptedEngine(Engine):
    """Calls the tool once, then answers with what the tool printed: in hermes, or in codeblock when
    the request stops at the end of a ```python block (the protocol every stage defaults to)."""

    def __init__(
        self,
        spec: str = "scripted",
        delay_s: float = 0.0,
        calls_per_answer: int = 1,
        fail_on: set[int] | None = None,
        answer: str | None = None,
    ):
        self.spec = spec
        self.delay_s = delay_s
        self.calls_per_answer = calls_per_answer
        self.fail_on = fail_on or set()
        self.answer = answer
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        number = len(self.requests)
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if number in self.fail_on or "FAIL" in request.messages[1]["content"]:
            return Generation("", None, "error", 10, 0, error="server said 500")
        if CODEBLOCK_STOP in request.stop:
            return self._codeblock(request)
        responses = [
            m["content"] for m in request.messages if m["role"] == "user" and "<tool_response>" in m["content"]
        ]
        if len(responses) < self.calls_per_answer:
            return Generation(TOOL_CALL, "</tool_call>", "stop", 10, 7)
        seen = responses[-1].split("<tool_response>\n")[1].split("\n</tool_response>")[0] if responses else "?"
        return Generation(
            f"The tool printed {seen}, so the answer is \\boxed{{{self.answer or seen}}}.", None, "stop", 10, 12
        )

    def _codeblock(self, request: GenerationRequest) -> Generation:
        outputs = [
            part.split("\n```")[0]
            for message in request.messages
            for part in (message.get("content") or "").split("```output\n")[1:]
        ]
        if len(outputs) < self.calls_per_answer:
            return Generation("```python\nprint(6 * 7)", CODEBLOCK_STOP, "stop", 10, 7)
        seen = outputs[-1] if outputs else "?"
        return Generation(
            f"The tool printed {seen}, so the answer is \\boxed{{{self.answer or seen}}}.", None, "stop", 10, 12
        )


@dataclass
class FakeResult:
    status: str
    stdout: str
    stderr: str = ""
    exit_code: int = 0
    duration_s: float = 0.0


class InProcessSandbox:
    """exec() with one namespace per session: enough to check the loop's bookkeeping."""

    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.closed: list[str] = []
        self.calls = 0

    def run(self, code, session_id=None, timeout=10.0, **options):
        self.calls += 1
        namespace = self.sessions.setdefault(session_id, {}) if session_id else {}
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output):
                exec(code, namespace)
        except Exception as error:
            return FakeResult("error", output.getvalue(), f"{type(error).__name__}: {error}", 1)
        return FakeResult("ok", output.getvalue())

    async def arun(self, code, session_id=None, timeout=10.0, **options):
        return self.run(code, session_id, timeout)

    def close_session(self, session_id):
        self.closed.append(session_id)
        self.sessions.pop(session_id, None)

    async def aclose_session(self, session_id):
        self.close_session(session_id)

    async def arelease(self):
        self.released = True

    def close(self):
        pass
