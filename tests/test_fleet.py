"""`openai:URL1,URL2,...` as a fleet (engines/fleet.py): balance by outstanding requests, one trajectory's
turns on one replica, health at start, fail-over, a cap on requests per second per replica; against
latency servers (bench/fake_openai_server.py) through the real openai engine and collect."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.runner import collect
from agentdata.engines.base import GenerationRequest
from agentdata.engines.fleet import Fleet
from agentdata.engines.openai_compat import OpenAIEngine
from agentdata.errors import UserError
from agentdata.records import Problem
from agentdata.settings import build
from bench.fake_openai_server import FakeOpenAIServer
from tests.fakes import InProcessSandbox

PROBLEMS = [Problem(f"What is 6 times 7? (take {i})", "42", id=f"p{i}") for i in range(24)]


def _collect(tmp_path, servers, **options):
    teacher = "openai:" + ",".join(server.url for server in servers)
    values = {"model": teacher, "protocol": "hermes", "concurrency": 8}
    config = build(CollectConfig, {**values, "engine_options": {"model": "fake-model", "backoff_s": 0.01, **options}})
    return collect(PROBLEMS, tmp_path / "run", config, sandbox=InProcessSandbox())


def _question(body: dict) -> str:
    return next(message["content"] for message in body["messages"] if message["role"] == "user")


def test_each_trajectorys_turns_stay_on_one_replica_and_the_trajectories_spread(tmp_path):
    with FakeOpenAIServer(latency=0.01) as a, FakeOpenAIServer(latency=0.01) as b, FakeOpenAIServer(latency=0.01) as c:
        summary = _collect(tmp_path, [a, b, c])
        servers = {name: server.requests for name, server in zip("abc", (a, b, c))}
    assert summary.correct == 24 and summary.tool_calls == 24  # two turns each: a call, then the answer
    homes = defaultdict(set)
    for name, requests in servers.items():
        for body in requests:
            homes[_question(body)].add(name)
    assert len(homes) == 24 and all(len(home) == 1 for home in homes.values())  # both turns on one replica
    assert all(len(requests) >= 8 for requests in servers.values())  # 48 requests over 3: none left idle


def test_a_slow_replica_gets_fewer_requests(tmp_path):
    with FakeOpenAIServer(latency=0.3) as slow, FakeOpenAIServer(latency=0.01) as fast:
        _collect(tmp_path, [slow, fast])
        assert len(slow.requests) < len(fast.requests) / 2


def test_a_failing_replica_is_left_out_and_its_trajectories_fail_over(tmp_path):
    with FakeOpenAIServer(latency=0.02) as broken, FakeOpenAIServer(latency=0.02) as good:
        broken.fail_always = 503
        summary = _collect(tmp_path, [broken, good], cooldown_s=30.0)
    assert summary.correct == 24 and not summary.finish_reasons.get("error")
    assert len(broken.requests) <= 4  # its share of the first 8 in flight; after their failure it is left out


def test_a_replica_that_does_not_answer_at_start_is_left_out_and_none_answering_is_refused():
    async def check(urls):
        engine = OpenAIEngine(urls, model="m", connect_timeout_s=2.0)
        try:
            await engine.ready()
            return engine
        finally:
            await engine.aclose()

    with FakeOpenAIServer() as alive:
        engine = asyncio.run(check([alive.url, "http://127.0.0.1:9/v1"]))
        assert [replica.healthy(time.monotonic()) for replica in engine.fleet.replicas] == [True, False]
    with pytest.raises(UserError, match=r"\(http://127.0.0.1:9/v1/chat/completions\): cannot be reached"):
        asyncio.run(check(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]))


def test_max_rps_spaces_each_replicas_requests():
    async def send(engine, count):
        requests = [GenerationRequest(messages=[{"role": "user", "content": f"q{i}"}]) for i in range(count)]
        started = time.monotonic()
        await asyncio.gather(*(engine.generate(request) for request in requests))
        await engine.aclose()
        return time.monotonic() - started

    with FakeOpenAIServer(script="answer") as one, FakeOpenAIServer(script="answer") as two:
        engine = OpenAIEngine([one.url, two.url], model="m", max_rps=20.0)
        elapsed = asyncio.run(send(engine, 22))
        assert len(one.requests) + len(two.requests) == 22
    assert elapsed >= 10 / 20.0  # 11 a replica, 1/20 s apart: at least 0.5 s (a lower bound: load only slows)
    with pytest.raises(UserError, match="max_rps must be a positive number"):
        OpenAIEngine(["http://127.0.0.1:9/v1"], max_rps=0.0)


def test_the_router_alone():
    fleet = Fleet(["a", "b"], cooldown_s=10.0)
    first = fleet.pick("t1")
    first.in_flight += 5
    assert fleet.pick("t1") is first  # sticky, however busy
    assert fleet.pick("t2") is not first  # a new conversation: the least busy
    fleet.failed(first)
    moved = fleet.pick("t1")
    assert moved is not first and fleet.failovers == 1 and fleet.pick("t1") is moved
    other = moved
    fleet.failed(other)  # both out: the one whose cooldown ends first is tried
    assert fleet.pick() is first
    fleet.succeeded(first)
    assert first.healthy(time.monotonic())
