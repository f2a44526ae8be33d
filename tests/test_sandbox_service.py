"""The sandbox over HTTP: SandboxFusion's /run_code, sessions, RemoteSandbox, and the CLI."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from agentdata.cli.app import app
from agentdata.errors import UserError
from agentdata.sandbox import RemoteSandbox, Sandbox, open_sandbox
from agentdata.sandbox.base import RemoteSandboxError
from agentdata.sandbox.service import build_app


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def service_url():
    sandbox = Sandbox(workers=2, timeout_s=5, memory_mb=768, prefork=1)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(sandbox), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(timeout=10)
    sandbox.close()


def test_run_code_speaks_sandboxfusion(service_url):
    body = {
        "code": "print(input() * 2)",
        "language": "python",
        "run_timeout": 5,
        "memory_limit_MB": 512,
        "stdin": "ab\n",
        "files": {"f.txt": base64.b64encode(b"data").decode()},
    }
    reply = httpx.post(f"{service_url}/run_code", json=body).json()
    assert reply["status"] == "Success"
    run = reply["run_result"]
    assert (run["status"], run["stdout"], run["return_code"]) == ("Finished", "abab\n", 0)
    assert set(run) >= {"status", "stdout", "stderr", "return_code", "execution_time"}
    files = httpx.post(
        f"{service_url}/run_code", json={"code": "print(open('f.txt').read())", **{"files": body["files"]}}
    ).json()
    assert files["run_result"]["stdout"] == "data\n"


def test_run_code_failures_and_timeouts(service_url):
    failed = httpx.post(f"{service_url}/run_code", json={"code": "1/0", "language": "python"}).json()
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] == 1
    assert "ZeroDivisionError" in failed["run_result"]["stderr"]
    slow = httpx.post(f"{service_url}/run_code", json={"code": "import time; time.sleep(9)", "run_timeout": 0.5}).json()
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    script = httpx.post(f"{service_url}/run_code", json={"code": "1 + 1"}).json()
    assert script["run_result"]["stdout"] == ""  # a script does not echo its last expression


def test_run_code_rejects_bad_requests(service_url):
    assert httpx.post(f"{service_url}/run_code", json={"code": "x", "language": "cpp"}).status_code == 400
    assert httpx.post(f"{service_url}/run_code", content=b"not json").status_code == 400
    assert httpx.post(f"{service_url}/run_code", json={"nocode": 1}).status_code == 400


def test_remote_sandbox_has_sessions(service_url):
    with RemoteSandbox(service_url) as remote:
        assert remote.run("x = 5", session_id="r1").status == "ok"
        assert remote.run("x * 2", session_id="r1").stdout == "10\n"
        assert "NameError" in remote.run("x", session_id="r2").stderr
        remote.close_session("r1")
        assert "NameError" in remote.run("x", session_id="r1").stderr
        remote.close_session("r2")
        assert remote.run("print(open('in.txt').read())", files={"in.txt": "file"}).stdout == "file\n"


def test_remote_arun_queues_many_concurrent_requests(service_url):
    remote = RemoteSandbox(service_url)

    async def scenario():
        results = await asyncio.gather(*(remote.arun(f"print({i})") for i in range(40)))
        await remote.aclose()
        return results

    results = asyncio.run(scenario())
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(40)]


def test_remote_sandbox_retries_then_reports_an_unreachable_service():
    remote = RemoteSandbox(f"http://127.0.0.1:{free_port()}", retries=2, backoff_s=0.01)
    started = time.monotonic()
    with pytest.raises(RemoteSandboxError):
        remote.run("print(1)")
    assert time.monotonic() - started < 5


def test_remote_sandbox_retries_until_the_service_is_up(service_url):
    # A proxy port that refuses at first and forwards once "the service is up".
    port = free_port()
    target = httpx.URL(service_url)

    async def forward(reader, writer):
        upstream_reader, upstream_writer = await asyncio.open_connection(target.host, target.port)

        async def pipe(source, sink):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    def run_proxy_later(ready: threading.Event):
        async def main():
            await asyncio.sleep(0.3)
            server = await asyncio.start_server(forward, "127.0.0.1", port)
            ready.set()
            async with server:
                await asyncio.sleep(3)

        asyncio.run(main())

    ready = threading.Event()
    threading.Thread(target=run_proxy_later, args=(ready,), daemon=True).start()
    remote = RemoteSandbox(f"http://127.0.0.1:{port}", retries=6, backoff_s=0.1)
    assert remote.run("print('through')").stdout == "through\n"
    assert ready.is_set()


def test_open_sandbox_picks_by_spec(service_url):
    assert isinstance(open_sandbox(service_url), RemoteSandbox)
    with pytest.raises(UserError):
        open_sandbox("ftp://nowhere")


def test_cli_run_prints_output_and_status(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["sandbox", "run", "-c", "print(6 * 7)"])
    assert result.exit_code == 0 and "42" in result.output and "ok" in result.output
    script = tmp_path / "fail.py"
    script.write_text("raise SystemExit(3)\n")
    failed = runner.invoke(app, ["sandbox", "run", str(script)])
    assert failed.exit_code == 1 and "error" in failed.output


def test_cli_run_against_the_service(service_url):
    result = CliRunner().invoke(app, ["sandbox", "run", "--url", service_url, "-c", "print('remote')"])
    assert result.exit_code == 0 and "remote" in result.output


def test_cli_run_needs_code(tmp_path):
    from agentdata.cli.app import main

    with pytest.raises(SystemExit) as exit_info:
        main(["sandbox", "run", str(tmp_path / "missing.py")])
    assert exit_info.value.code == 2


def test_collect_through_the_service_leaves_no_open_http_session(service_url, tmp_path, recwarn):
    """The async client belongs to collect's event loop: collect releases it before the loop ends."""
    import gc

    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from agentdata.records import Problem
    from agentdata.sandbox.remote import RemoteSandbox
    from tests.fakes import ScriptedEngine

    sandbox = RemoteSandbox(service_url)
    summary = collect(
        [Problem("What is 6 times 7?", "42")],
        tmp_path / "run",
        CollectConfig(model="x"),
        engine=ScriptedEngine(),
        sandbox=sandbox,
    )
    gc.collect()
    assert summary.correct == 1 and sandbox.http._async_sessions == {}
    assert not [w for w in recwarn if "Unclosed" in str(w.message)]
    assert sandbox.run("print(1)").stdout == "1\n"  # the blocking client is still usable
    sandbox.close()


def test_agentdata_names_each_session_with_128_random_bits():
    """Issue 41 (questionable, decided): the service keys sessions by the name a client gives and trusts whoever
    reaches it, as SandboxFusion does; a session's name is what lets a client run in it or close it. So the
    names agentdata's clients make hold 128 random bits (they held 32), which no other client guesses."""
    import asyncio
    import re

    from agentdata.agent.config import LoopConfig
    from agentdata.agent.loop import solve
    from agentdata.records import Problem
    from agentdata.synth.stitch.build import StitchConfig, stitch_solution
    from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

    sandbox = InProcessSandbox()
    problem = Problem("What is 6 * 7?", "42", id="p1")
    asyncio.run(solve(problem, ScriptedEngine(), sandbox, LoopConfig(protocol=SCRIPTED_PROTOCOL), sample_index=3))
    stitch_solution(problem, "6 * 7 = 42, so the answer is \\boxed{42}.", sandbox, StitchConfig())
    loop_session, stitch_session = sandbox.closed
    assert re.fullmatch(r"p1-3-[0-9a-f]{32}", loop_session), loop_session
    assert re.fullmatch(r"stitch-p1-[0-9a-f]{32}", stitch_session), stitch_session
