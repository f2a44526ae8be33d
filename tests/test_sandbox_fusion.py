"""A stock SandboxFusion behind `--sandbox`: stateless `/run_code`, sessions replayed, several URLs.

The SandboxFusion here is `tests/sandboxfusion_standin.py`, copied from SandboxFusion's own
source; `test_sandboxfusion_client_*` runs the real `sandbox-fusion` client package against
`agentdata sandbox serve`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from agentdata.errors import UserError
from agentdata.sandbox import RemoteSandbox, Sandbox, open_sandbox
from agentdata.sandbox.base import RemoteSandboxError
from agentdata.sandbox.fusion import FusionSandbox
from agentdata.sandbox.service import build_app
from agentdata.sandbox.spread import SpreadEndpoints, SpreadSandboxes
from agentdata.settings import build
from tests.sandboxfusion_standin import ServedApp, build_standin, free_port


@pytest.fixture(scope="module")
def fusion():
    """Two stock-SandboxFusion stand-ins; `.calls` holds the request bodies each received."""
    servers = []
    for _ in range(2):
        calls: list = []
        server = ServedApp(build_standin(calls))
        server.calls = calls
        servers.append(server)
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def service():
    """`agentdata sandbox serve`, in-process."""
    sandbox = Sandbox(workers=2, timeout_s=5, memory_mb=768, prefork=1)
    server = ServedApp(build_app(sandbox))
    yield server
    server.stop()
    sandbox.close()


def test_open_sandbox_tells_sandboxfusion_from_agentdata(fusion, service):
    assert isinstance(open_sandbox(fusion[0].url), FusionSandbox)
    assert isinstance(open_sandbox(f"{fusion[0].url}/run_code"), FusionSandbox)  # verl's way to write it
    assert isinstance(open_sandbox(service.url), RemoteSandbox)
    assert isinstance(open_sandbox(f"{service.url},{service.url}"), SpreadSandboxes)
    mixed = open_sandbox(f"{service.url},{fusion[0].url}")  # both speak /run_code
    assert isinstance(mixed, FusionSandbox) and isinstance(mixed.endpoint, SpreadEndpoints)
    with pytest.raises(UserError, match="cannot be reached"):
        open_sandbox(f"http://127.0.0.1:{free_port()}")


def test_stateless_runs_on_a_stock_sandboxfusion(fusion):
    with open_sandbox(fusion[0].url) as sandbox:
        ok = sandbox.run("print(input() * 2)", stdin="ab\n", files={"f.txt": "data"})
        assert (ok.status, ok.stdout, ok.exit_code) == ("ok", "abab\n", 0)
        assert sandbox.run("print(open('f.txt').read())", files={"f.txt": b"bytes"}).stdout == "bytes\n"
        failed = sandbox.run("1/0")
        assert failed.status == "error" and failed.exit_code == 1 and "ZeroDivisionError" in failed.stderr
        assert "<cell 1>" in failed.stderr and "_run" not in failed.stderr  # the cell's frames only
        slow = sandbox.run("import time; time.sleep(5)", timeout=0.5)
        assert slow.status == "timeout"
        assert sandbox.run("6 * 7").stdout == "42\n"  # a bare last expression is displayed, as locally
        assert sandbox.run("6 * 7", display_last=False).stdout == ""
    sent = fusion[0].calls[-1]
    assert sent["language"] == "python" and sent["code"] == "6 * 7"  # plain script: sent as it is


def test_sessions_are_emulated_by_replaying_earlier_cells(fusion):
    sandbox = open_sandbox(fusion[0].url)
    assert sandbox.run("import math\nx = 5\nprint('set')", session_id="s").stdout == "set\n"
    assert sandbox.run("def double(v):\n    return 2 * v", session_id="s").status == "ok"
    second = sandbox.run("print(double(x), math.pi > 3)", session_id="s")
    assert second.stdout == "10 True\n"  # earlier output is not shown again
    assert sandbox.run("x", session_id="other").status == "error"  # sessions are private
    assert sandbox.run("import time; time.sleep(5)", session_id="s", timeout=0.5).status == "timeout"
    assert sandbox.run("y = x + 1\nraise ValueError('half')", session_id="s").status == "error"
    assert sandbox.run("print(y)", session_id="s").stdout == "6\n"  # a failed cell's work before the error stays
    sandbox.close_session("s")
    assert sandbox.run("x", session_id="s").status == "error"
    sandbox.close()


def test_async_sessions_on_sandboxfusion(fusion):
    sandbox = open_sandbox(fusion[0].url)

    async def both():
        await sandbox.arun("total = 40", session_id="a")
        results = await asyncio.gather(*(sandbox.arun(f"total + {i}", session_id="a") for i in range(4)))
        await sandbox.arelease()
        return [result.stdout for result in results]

    assert asyncio.run(both()) == ["40\n", "41\n", "42\n", "43\n"]
    sandbox.close()


def test_several_urls_share_the_load_and_fail_over(fusion):
    dead = f"http://127.0.0.1:{free_port()}"
    before = [len(server.calls) for server in fusion]
    sandbox = open_sandbox(f"{fusion[0].url},{dead},{fusion[1].url}")

    async def many():
        results = await asyncio.gather(*(sandbox.arun(f"print({i})") for i in range(12)))
        await sandbox.arelease()
        return results

    results = asyncio.run(many())
    assert [result.stdout for result in results] == [f"{i}\n" for i in range(12)]  # the dead URL cost nothing
    served = [len(server.calls) - count for server, count in zip(fusion, before)]
    assert sum(served) == 12 and min(served) >= 3  # both live endpoints took a share
    sandbox.close()


def test_a_session_survives_its_endpoint_going_away():
    """Replayed sessions live in the client, so any endpoint can run the next cell."""
    first, second = ServedApp(build_standin()), ServedApp(build_standin())
    sandbox = open_sandbox(f"{first.url},{second.url}")
    try:
        sandbox.run("x = 21", session_id="s")
        first.stop()
        assert sandbox.run("print(2 * x)", session_id="s").stdout == "42\n"
        second.stop()
        with pytest.raises(RemoteSandboxError):
            sandbox.run("print(1)")
    finally:
        sandbox.close()


def test_agentdata_services_pin_sessions_and_fail_over_stateless_calls(service):
    dead = RemoteSandbox(f"http://127.0.0.1:{free_port()}", retries=0)
    spread = SpreadSandboxes([dead, RemoteSandbox(service.url)])
    assert spread.run("x = 3", session_id="p").status == "ok"  # the dead member is passed over
    assert spread.run("print(x + 1)", session_id="p").stdout == "4\n"  # pinned where x lives
    assert spread.run("print('anywhere')").stdout == "anywhere\n"
    spread.close_session("p")
    spread.close()


def test_collect_runs_on_a_stock_sandboxfusion(fusion, tmp_path):
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from agentdata.records import Problem
    from tests.fakes import ScriptedEngine

    summary = collect(
        [Problem("What is 6 times 7?", "42")],
        tmp_path / "run",
        build(CollectConfig, dict(model="x", sandbox=f"{fusion[0].url},{fusion[1].url}")),
        engine=ScriptedEngine(),
    )
    assert summary.correct == 1


# --------------------------------------------------------------------------- the real client package


def sfclient_python() -> Path | None:
    """The `sandbox-fusion` client's venv from scripts/peers.sh ($AGENTDATA_SFCLIENT_PYTHON overrides)."""
    if os.environ.get("AGENTDATA_SFCLIENT_PYTHON"):
        return Path(os.environ["AGENTDATA_SFCLIENT_PYTHON"])
    root = Path(__file__).resolve().parents[1]
    for candidate in (root / ".peers/sfclient/bin/python", root.parent.parent / "main/.peers/sfclient/bin/python"):
        if candidate.is_file():
            return candidate
    return None


CLIENT_SCRIPT = r"""
import base64, json, sys
from sandbox_fusion import RunCodeRequest, RunStatus, run_code
endpoint = sys.argv[1]
def call(**fields):
    reply = run_code(RunCodeRequest(language="python", **fields), endpoint=endpoint, max_attempts=1)
    run = reply.run_result
    return {"status": reply.status.value, "message": reply.message, "run_status": run.status.value,
            "return_code": run.return_code, "stdout": run.stdout, "stderr": run.stderr, "files": reply.files}
def refused(**fields):
    try:
        call(**fields)
    except Exception as error:  # the client raises on any answer but 200
        return str(error)
data = base64.b64encode(b"numbers 1 2 3").decode()
print("RESULT" + json.dumps({
    "success": call(code="print(sum(range(10)))"),
    "stdin": call(code="print(input()[::-1])", stdin="olleh\n"),
    "error": call(code="raise ValueError('bad input')"),
    "timeout": call(code="import time\ntime.sleep(10)", run_timeout=0.5),
    "files": call(code="text = open('in.txt').read()\nopen('out.txt', 'w').write(text.upper())",
                  files={"in.txt": data, "skipped.txt": None}, fetch_files=["out.txt", "skipped.txt"]),
    "above_ceiling": call(code="import time\ntime.sleep(60)", run_timeout=3600),
    "refused": refused(code="print(1)", run_timeout=-1),
}))
"""


def test_sandboxfusion_client_parses_agentdata_sandbox_serve(service):
    python = sfclient_python()
    if python is None:
        pytest.skip("the sandbox-fusion client is not installed: run `bash scripts/peers.sh sfclient`")
    done = subprocess.run(
        [str(python), "-c", CLIENT_SCRIPT, service.url],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    replies = json.loads(done.stdout.split("RESULT", 1)[1])
    assert replies["success"] == {
        "status": "Success",
        "message": "",
        "run_status": "Finished",
        "return_code": 0,
        "stdout": "45\n",
        "stderr": "",
        "files": {},
    }
    assert replies["stdin"]["stdout"] == "hello\n"
    error = replies["error"]
    assert (error["status"], error["run_status"], error["return_code"]) == ("Failed", "Finished", 1)
    assert "ValueError: bad input" in error["stderr"] and error["message"] == ""
    timeout = replies["timeout"]
    assert (timeout["status"], timeout["run_status"], timeout["return_code"]) == ("Failed", "TimeLimitExceeded", None)
    import base64

    assert replies["files"]["status"] == "Success"
    assert {name: base64.b64decode(value) for name, value in replies["files"]["files"].items()} == {
        "out.txt": b"NUMBERS 1 2 3"
    }  # a null file is skipped, as SandboxFusion's restore_files does
    assert replies["above_ceiling"]["run_status"] == "TimeLimitExceeded"  # the server's 5 s, not the hour asked for
    assert "responded with code 400" in replies["refused"] and "run_timeout: expected seconds" in replies["refused"]
