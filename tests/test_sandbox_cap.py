"""`--sandbox-max-rps`: a cap on the requests per second each sandbox URL gets (agentdata/pacing.py, the
engine fleet's cap too), against real `agentdata sandbox serve` apps and SandboxFusion stand-ins on
127.0.0.1. Each server's arrivals are timed where they land, so the spacing measured is the server's."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from agentdata.cli.app import app
from agentdata.errors import UserError
from agentdata.pacing import Pacer, check_max_rps
from agentdata.sandbox import Sandbox, open_sandbox
from agentdata.sandbox.fusion import FusionSandbox
from agentdata.sandbox.service import build_app
from agentdata.sandbox.spread import SpreadEndpoints, SpreadSandboxes
from agentdata.settings import SettingError, build
from tests.sandboxfusion_standin import Arrivals, ServedApp, build_standin, free_port

RPS = 5.0  # 0.2 s apart: far above the jitter of a loaded machine, and a test of a few seconds
# How much earlier than its booked moment an arrival may seem to land: the moments are booked 1/RPS apart
# from the first, and a late wake-up or a busy server thread (these servers share the test's process)
# moves one arrival, not the schedule: the cap is "the k-th request no sooner than k / max_rps".
JITTER_S = 0.1


def _serve(app) -> tuple[ServedApp, Arrivals]:
    arrivals = Arrivals(app)
    return ServedApp(arrivals), arrivals


@pytest.fixture(scope="module")
def box():
    sandbox = Sandbox(workers=2, timeout_s=5, memory_mb=768, prefork=1)
    yield sandbox
    sandbox.close()


@pytest.fixture
def services(box):
    """Two `agentdata sandbox serve` apps over one local sandbox, each timing its own arrivals."""
    served = [_serve(build_app(box)) for _ in range(2)]
    yield served
    for server, _ in served:
        server.stop()


@pytest.fixture
def fusions():
    served = [_serve(build_standin()) for _ in range(2)]
    yield served
    for server, _ in served:
        server.stop()


def _assert_capped(arrivals: Arrivals, rps: float = RPS) -> None:
    """The k-th arrival at least k / rps after the first (less the jitter); uncapped, 4 calls land at once."""
    times = arrivals.times
    assert len(times) >= 4, "too few requests reached this server to measure a spacing"
    early = max(index / rps - (moment - times[0]) for index, moment in enumerate(times))
    assert early <= JITTER_S, arrivals.gaps()


def test_the_pacer_books_moments_1_over_max_rps_apart_and_refuses_what_is_not_a_rate():
    pacer = Pacer(10.0)
    waits = [pacer.book() for _ in range(4)]
    assert waits[0] == 0.0 and waits[1:] == pytest.approx([0.1, 0.2, 0.3], abs=0.01)
    assert [Pacer(None).book() for _ in range(3)] == [0.0, 0.0, 0.0]
    for bad in (0, -1.0, float("inf"), float("nan"), True, "5"):
        with pytest.raises(UserError, match="max_rps must be a positive number"):
            check_max_rps(bad, "here")


def test_agentdata_services_each_get_at_most_max_rps_and_share_the_sessions(services):
    sandbox = open_sandbox(",".join(server.url for server, _ in services), max_rps=RPS)
    assert isinstance(sandbox, SpreadSandboxes)

    async def trajectory(index: int) -> str:  # two cells in one session, then its close: three requests
        await sandbox.arun(f"x = {index}", session_id=f"t{index}")
        result = await sandbox.arun("print(x * 2)", session_id=f"t{index}")
        await sandbox.aclose_session(f"t{index}")
        return result.stdout

    async def all_of_them():
        try:
            return await asyncio.gather(*(trajectory(index) for index in range(6)))
        finally:
            await sandbox.arelease()

    assert asyncio.run(all_of_them()) == [f"{2 * index}\n" for index in range(6)]
    sandbox.close()
    for _, arrivals in services:
        assert len(arrivals.times) >= 6  # the sessions spread over both: neither took them all
        _assert_capped(arrivals)


def test_one_url_is_capped_too_and_blocking_calls_from_threads_are(services):
    (server, arrivals), _ = services
    sandbox = open_sandbox(server.url, max_rps=RPS)
    assert isinstance(sandbox, SpreadSandboxes)  # one member: the spread holds the cap
    with ThreadPoolExecutor(max_workers=4) as threads:  # as regrade and validate call it
        outputs = list(threads.map(lambda index: sandbox.run(f"print({index})").stdout, range(6)))
    sandbox.close()
    assert outputs == [f"{index}\n" for index in range(6)]
    assert len(arrivals.times) == 6
    _assert_capped(arrivals)


def test_a_dead_agentdata_service_is_failed_over_with_the_cap_on(services):
    (server, arrivals), _ = services
    dead = f"http://127.0.0.1:{free_port()}"
    sandbox = open_sandbox(f"{dead},{server.url}", max_rps=RPS, retries=0)

    async def calls():
        try:
            return await asyncio.gather(
                *(sandbox.arun(f"print({index})", session_id=f"s{index}") for index in range(6))
            )
        finally:
            await sandbox.arelease()

    assert [result.stdout for result in asyncio.run(calls())] == [f"{index}\n" for index in range(6)]
    sandbox.close()
    assert len(arrivals.times) == 6  # every call ran, on the live one
    _assert_capped(arrivals)


def test_sandboxfusion_endpoints_are_capped_spread_and_failed_over(fusions):
    dead = f"http://127.0.0.1:{free_port()}"
    urls = [fusions[0][0].url, dead, fusions[1][0].url]
    sandbox = open_sandbox(",".join(urls), max_rps=RPS)
    assert isinstance(sandbox, FusionSandbox) and isinstance(sandbox.endpoint, SpreadEndpoints)

    async def calls():
        try:
            return await asyncio.gather(*(sandbox.arun(f"print({index})") for index in range(12)))
        finally:
            await sandbox.arelease()

    assert [result.stdout for result in asyncio.run(calls())] == [f"{index}\n" for index in range(12)]
    sandbox.close()
    served = [len(arrivals.times) for _, arrivals in fusions]
    assert sum(served) == 12 and min(served) >= 4  # the dead URL cost nothing; both live ones took a share
    for _, arrivals in fusions:
        _assert_capped(arrivals)


def test_collect_paces_its_sandbox_calls_by_the_setting(fusions, tmp_path):
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from agentdata.records import Problem
    from tests.fakes import ScriptedEngine

    urls = ",".join(server.url for server, _ in fusions)
    config = build(CollectConfig, {"model": "x", "sandbox": urls, "sandbox_max_rps": RPS, "concurrency": 8})
    problems = [Problem(f"What is 6 times 7? (take {index})", "42", id=f"p{index}") for index in range(8)]
    summary = collect(problems, tmp_path / "run", config, engine=ScriptedEngine())
    assert summary.correct == 8
    for _, arrivals in fusions:
        _assert_capped(arrivals)


def test_bad_caps_are_refused_before_anything_runs(tmp_path):
    from agentdata.agent.config import CollectConfig

    for bad in (0, -2.5, float("inf")):
        with pytest.raises(SettingError, match="sandbox_max_rps"):
            build(CollectConfig, {"model": "x", "sandbox": "http://127.0.0.1:9", "sandbox_max_rps": bad})
    with pytest.raises(SettingError, match=r"inf: must be a finite number \(greater than 0\)"):
        build(CollectConfig, {"model": "x", "sandbox": "http://127.0.0.1:9", "sandbox_max_rps": float("inf")})
    with pytest.raises(SettingError, match="sandbox is 'local'"):
        build(CollectConfig, {"model": "x", "sandbox_max_rps": 5})
    with pytest.raises(UserError, match="caps requests to sandbox services"):
        open_sandbox("local", max_rps=5)
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"question": "q", "answer": "1"}\n')
    for command in (["collect", str(problems), "-o", str(tmp_path / "out")], ["regrade", str(tmp_path)]):
        refused = CliRunner().invoke(app, [*command, "--sandbox", "http://127.0.0.1:9", "--sandbox-max-rps", "0"])
        assert refused.exit_code != 0 and "--sandbox-max-rps 0: must be greater than 0" in refused.output
