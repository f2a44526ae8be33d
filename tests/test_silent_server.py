"""collect against a model server that never answers: a server that cannot be reached or accepts a
connection and then says nothing stops the run at once in one line; one that answers its model list but
not the completions is waited on with progress saying what is waited on, and why."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import time

import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.runner import collect
from agentdata.engines import load_engine
from agentdata.errors import UserError
from agentdata.events import listening
from agentdata.records import Problem
from tests.cli_helpers import run_cli
from tests.fakes import InProcessSandbox
from tests.test_engines_openai import fake

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def problems(tmp_path, monkeypatch):
    monkeypatch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: InProcessSandbox())
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"question": "What is 6 * 7?", "answer": "42"}) + "\n")
    return path


def collect_cli(problems, url: str, *options: str) -> tuple[int, list[str], float]:
    err = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(
            ["collect", str(problems), "--teacher", f"openai:{url}", "--out", str(problems.parent / "run"), *options]
        )
    return code, [line for line in err.getvalue().splitlines() if line.strip()], time.monotonic() - started


def test_a_server_that_accepts_but_never_answers_stops_the_run_at_once(problems):
    with socket.socket() as black_hole:  # listens, never accepts: the kernel completes the connection, no one answers
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(64)
        url = f"http://127.0.0.1:{black_hole.getsockname()[1]}/v1"
        code, lines, seconds = collect_cli(problems, url, "--engine-option", "connect_timeout_s=1", "--model", "m")
    assert code == 2 and len(lines) == 1, lines
    assert "accepted a connection but did not answer GET" in lines[0] and "within 1 s" in lines[0]
    assert seconds < 60  # not 4 attempts of 300 s each


def test_a_server_that_cannot_be_reached_is_one_line(problems):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    code, lines, _ = collect_cli(problems, f"http://127.0.0.1:{closed}/v1", "--model", "m")
    assert code == 2 and len(lines) == 1 and "cannot be reached" in lines[0] and "is it running?" in lines[0], lines


def test_while_nothing_comes_back_the_progress_says_what_it_waits_on(tmp_path, monkeypatch):
    monkeypatch.setattr("agentdata.agent.runner.WAIT_REPORT_S", 0.3)
    events = []
    with fake.FakeOpenAIServer(script="echo", latency=30.0) as server:  # lists its model, never completes in time
        engine = load_engine(f"openai:{server.url}", model="m", timeout_s=1.5, max_retries=1, backoff_s=0.05)
        config = CollectConfig(model="openai", concurrency=2)
        with listening(events.append), pytest.raises(UserError, match="all failed"):
            collect(
                [Problem("What is 1 + 1?", "2"), Problem("What is 2 + 2?", "4")],
                tmp_path / "run",
                config,
                engine=engine,
                sandbox=InProcessSandbox(),
            )
    waiting = [event.stats["waiting"] for event in events if event.kind == "advance" and "waiting" in event.stats]
    assert any("2 request(s) waiting on the server" in text and "of its 1.5 s timeout" in text for text in waiting), (
        waiting
    )
    assert any("last failure:" in text and "no answer within 1.5 s (attempt 1 of 2" in text for text in waiting), (
        waiting
    )


def test_the_engine_defaults_are_ones_a_user_would_wait_for():
    engine = load_engine("openai:http://127.0.0.1:9/v1", model="m")
    assert (engine.timeout_s, engine.connect_timeout_s, engine.max_retries) == (300.0, 10.0, 3)
    for option, value in (
        ("timeout_s", "abc"),
        ("timeout_s", -1),
        ("connect_timeout_s", float("nan")),
        ("max_retries", 1.5),
    ):
        with pytest.raises(UserError, match=option):
            load_engine("openai:http://127.0.0.1:9/v1", model="m", **{option: value})


def test_the_bar_shows_the_wait_beside_the_rates():
    from agentdata.cli.progress import stats_text

    assert stats_text("collect", {"waiting": "2 request(s) [slow]"}) == r"[yellow]waiting: 2 request(s) \[slow][/]"
    rates = {"accuracy": 0.5, "trajectories_per_s": 1.0, "tokens_per_s": 9.0, "tool_calls": 3}
    assert stats_text("collect", rates).startswith("acc 50%") and "waiting" not in stats_text("collect", rates)
