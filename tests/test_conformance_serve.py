"""Conformance: the openai: engine and the agent loop against the real `transformers serve`.

`transformers serve` (installed by `scripts/peers.sh` into .peers/serve, its own venv) serves
the embedded SmolLM2. It reports no `stop_reason`, leaves a matched stop string in the text
and answers HTTP 422 to fields it does not know (`continue_final_message`): the behaviours
bench/fake_openai_server.py copies, checked here against the real thing.

The tiny model rarely writes a well-formed tool call, so each loop test gives the first
turn (a call in the protocol's form, as a teacher would write it) and the real server
writes everything after the tool's output. A few short requests: the model loads in ~40 s.
Set AGENTDATA_SERVE_BIN to a `transformers` executable to use another install.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from agentdata.agent.loop import LoopConfig, solve
from agentdata.engines import Engine, Generation, GenerationRequest, smollm2_model_dir
from agentdata.engines.openai_compat import OpenAIEngine
from agentdata.records import CODE_TOOL, Problem, ToolCall, message_tool_calls, validate_messages
from tests.fakes import InProcessSandbox

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = Problem("What is 6 times 7?", "42", source="conformance")
START_TIMEOUT_S = 600  # a loaded 2-core machine; ~40 s on a quiet one
CALL = ToolCall("print(6 * 7)", id="call_0")
FIRST_TURNS = {  # what a teacher would write first, in each protocol's form (the stop string already cut)
    "hermes": Generation(
        'Let me compute it.\n<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6 * 7)"}}\n',
        None,
        "stop",
        0,
        20,
        stop_known=False,
    ),
    "codeblock": Generation("Let me compute it.\n```python\nprint(6 * 7)", None, "stop", 0, 12, stop_known=False),
    "native": Generation("", None, "stop", 0, 12, tool_calls=[CALL.to_message()]),
}


def serve_executable() -> Path | None:
    """$AGENTDATA_SERVE_BIN, else .peers/serve of this checkout or of the main checkout beside it."""
    given = os.environ.get("AGENTDATA_SERVE_BIN")
    candidates = (
        [Path(given)]
        if given
        else [ROOT / ".peers/serve/bin/transformers", ROOT.parent.parent / "main/.peers/serve/bin/transformers"]
    )
    return next((path for path in candidates if path.is_file()), None)


@pytest.fixture(scope="module")
def serve_url():
    executable = serve_executable()
    if executable is None:
        pytest.skip(
            "transformers serve is not installed: run `bash scripts/peers.sh serve` (or set AGENTDATA_SERVE_BIN)"
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    process = subprocess.Popen(
        [
            str(executable),
            "serve",
            str(smollm2_model_dir()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_up(url: str, process: subprocess.Popen) -> None:
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if process.poll() is not None:
            pytest.fail(f"transformers serve exited: {process.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return
        except OSError:
            time.sleep(1)
    pytest.fail(f"transformers serve did not answer within {START_TIMEOUT_S} s")


def real_engine(url: str) -> OpenAIEngine:
    return OpenAIEngine(url, timeout_s=600, max_retries=1, backoff_s=0.1)


class FirstTurnGiven(Engine):
    """The first turn is given; every later one is the real server's (recorded)."""

    def __init__(self, real: OpenAIEngine, first: Generation):
        self.real, self.first, self.spec = real, first, real.spec
        self.requests: list[GenerationRequest] = []
        self.generations: list[Generation] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        if len(self.requests) == 1:
            return self.first
        generation = await self.real.generate(request)
        self.generations.append(generation)
        return generation

    async def aclose(self) -> None:
        await self.real.aclose()


def run(coroutine_factory):
    return asyncio.run(coroutine_factory())


def test_stop_string_is_left_in_the_text_and_named(serve_url):
    engine = real_engine(serve_url)
    question = [{"role": "user", "content": "Name three colors."}]

    async def both():
        try:
            free = await engine.generate(GenerationRequest(messages=question, max_new_tokens=8, temperature=0.0))
            stop = free.text.split()[2]  # its first occurrence is where the server must stop
            cut = await engine.generate(
                GenerationRequest(messages=question, max_new_tokens=8, temperature=0.0, stop=(stop,))
            )
            return free, stop, cut
        finally:
            await engine.aclose()

    free, stop, cut = run(both)
    assert free.error is None and cut.error is None
    assert (cut.stop_reason, cut.stop_known, cut.finish_reason) == (stop, True, "stop")
    assert cut.text == free.text[: free.text.index(stop)]


@pytest.mark.parametrize("protocol", ["hermes", "codeblock", "native"])
def test_loop_after_a_tool_call_on_the_real_server(serve_url, protocol):
    engine = FirstTurnGiven(real_engine(serve_url), FIRST_TURNS[protocol])
    budget = FIRST_TURNS[protocol].completion_tokens + 24
    config = LoopConfig(protocol=protocol, max_turns=3, max_new_tokens=budget, temperature=0.0)

    async def go():
        try:
            return await solve(PROBLEM, engine, InProcessSandbox(), config, seed=1)
        finally:
            await engine.aclose()

    trajectory = run(go)
    validate_messages(trajectory.messages)
    assert [g.error for g in engine.generations] == [None] * len(engine.generations)  # every request accepted
    assert [m["role"] for m in trajectory.messages[:4]] == ["system", "user", "assistant", "tool"]
    assert message_tool_calls(trajectory.messages[2])[0].code == "print(6 * 7)"
    assert trajectory.messages[3]["content"] == "42"
    assert trajectory.finish_reason != "max_turns"  # the model's own answer ended it, or the budget did
    answer = trajectory.messages[4]
    assert answer["content"].count("</tool_call>") <= answer["content"].count("<tool_call>")  # nothing invented
    if protocol == "codeblock":  # the continuation was refused once (422), then sent as a new turn
        assert engine.real.adaptations == ["continue turns as new messages (no continue_final_message)"]
        assert engine.real.attempts == len(engine.generations) + 1
        assert trajectory.messages[4]["role"] == "assistant"
    if protocol == "native":
        assert engine.requests[1].tools == [CODE_TOOL]
        assert engine.requests[1].messages[3] == {
            "role": "tool",
            "tool_call_id": "call_0",
            "name": "code_interpreter",
            "content": "42",
        }


def test_the_llm_judge_grades_through_the_real_server(serve_url, tmp_path):
    """curate --judge openai:URL with the embedded model: every row gets a verdict or a failure counted apart
    (whatever the 135M model's scores), each request one the real server accepted."""
    import polars as pl

    from agentdata.curate import CurateConfig, curate
    from agentdata.judge.config import ScoringConfig
    from agentdata.judge.runner import ScorerBroken
    from tests.curate_fixtures import trajectory, write_run

    questions = ("What is the sum of the first ten primes?", "How many primes are below thirty?")
    write_run(tmp_path / "run", [trajectory(f"t{i}", f"p{i}", question) for i, question in enumerate(questions)])
    scoring = ScoringConfig(
        judge=f"openai:{serve_url}",
        judge_max_tokens=48,
        score_retries=1,
        judge_options={"timeout_s": 600, "max_retries": 1},
        score_cache=str(tmp_path / "cache"),
    )
    # the server answered; the model wrote no score, or was cut at the token limit before its score line
    answered_without_a_score = ("no score in the judge's reply", "cut at --judge-max-tokens")
    try:
        result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))
    except ScorerBroken as broken:  # no row got a verdict: the run stops naming the judge, never scores nothing
        assert f"judge openai:{serve_url}: every row failed (2)" in str(broken)
        assert any(why in str(broken) for why in answered_without_a_score), broken
        return
    counts = result.scoring["judge"]
    assert counts["scored"] + counts["failed"] == 2 and result.kept_rows == 2  # no minimum: nothing dropped
    rows = pl.read_parquet(tmp_path / "sft.parquet")
    for score, rationale, error in rows.select("judge_score", "judge_rationale", "judge_error").iter_rows():
        assert (score is None) == (error is not None)  # a failure is never a score
        if score is not None:
            assert 0.0 <= score <= 1.0 and isinstance(rationale, str)
        else:
            assert any(why in error for why in answered_without_a_score), error
