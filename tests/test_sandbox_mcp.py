"""`agentdata sandbox serve --mcp`: the sandbox as an MCP server, driven by the `mcp` SDK's own client over
stdio and streamable HTTP, with the hostile programs the HTTP service is held to."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import pytest

mcp = pytest.importorskip("mcp")  # the `mcp` extra

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from tests.sandboxfusion_standin import free_port  # noqa: E402
from tests.test_sandbox_service_limits import first_json_document  # noqa: E402

CLI = [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--mcp", "--timeout", "2", "-w", "2"]
# The server's environment holds a secret that code run in it must not see.
ENV = {**os.environ, "PYTHONPATH": os.getcwd(), "AGENTDATA_SANDBOX_SECRET": "do-not-leak"}


def text_of(result) -> str:
    return "".join(block.text for block in result.content)


async def calls(client: Client, *codes: str) -> list:
    return [await client.call_tool("code_interpreter", {"code": code}) for code in codes]


@pytest.fixture(scope="module")
def http_url():
    """`sandbox serve --mcp --transport http` as a user starts it; its URL from the --json line."""
    port = free_port()
    server = subprocess.Popen(
        [*CLI, "--transport", "http", "--port", str(port), "--json", "--prefork", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        settings = first_json_document(server.stdout)
        assert settings["url"] == f"http://127.0.0.1:{port}/mcp"
        yield settings["url"]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


def test_over_stdio_the_tool_is_listed_and_keeps_its_state():
    async def run():
        parameters = StdioServerParameters(command=CLI[0], args=CLI[1:], env=ENV)
        async with Client(parameters) as client:
            (tool,) = (await client.list_tools()).tools
            assert tool.name == "code_interpreter" and tool.input_schema["required"] == ["code"]
            return await calls(client, "import math\nx = 41", "print('hi')\nx + 1", "1/0")

    assigned, shown, failed = asyncio.run(run())
    assert not assigned.is_error and text_of(shown) == "hi\n42"  # a variable kept, the last expression shown
    assert failed.is_error and "ZeroDivisionError" in text_of(failed)


def test_over_http_each_client_has_its_own_session(http_url):
    async def run():
        async with Client(http_url, mode="legacy") as first, Client(http_url, mode="legacy") as second:
            await calls(first, "secret = 'first'\nopen('note.txt', 'w').write('mine')")
            (own,) = await calls(first, "print(secret, open('note.txt').read())")
            theirs = await calls(second, "secret", "open('note.txt').read()")
            return own, theirs

    own, (variable, file) = asyncio.run(run())
    assert text_of(own) == "first mine"
    assert variable.is_error and "NameError" in text_of(variable)  # another client's variables are out of sight
    assert file.is_error and "FileNotFoundError" in text_of(file)  # and its files


def test_a_stateless_http_client_gets_a_fresh_interpreter_each_call(http_url):
    async def run():
        async with Client(http_url) as client:  # the 2026 protocol: no MCP session
            return await calls(client, "x = 1", "x")

    assigned, read = asyncio.run(run())
    assert not assigned.is_error and read.is_error and "NameError" in text_of(read)


def test_hostile_programs_are_held_to_the_sandboxs_limits(http_url):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        async def run():
            async with Client(http_url, mode="legacy") as client:
                return await calls(
                    client,
                    "kept = 'still here'",
                    "while True:\n    pass",  # past the server's 2 s limit
                    "kept",  # the session survives its timeout
                    "x = bytearray(4 * 1024 ** 3)",
                    f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
                    "import os\nprint(dict(os.environ))",
                    "import time\ntime.sleep(30)",
                )

        kept, endless, survived, memory, network, environment, sleep = asyncio.run(run())
    assert endless.is_error and "time limit" in text_of(endless)
    assert text_of(survived) == "'still here'" and not kept.is_error
    assert memory.is_error and "MemoryError" in text_of(memory)
    assert network.is_error and "OSError" in text_of(network)
    assert "do-not-leak" not in text_of(environment)
    assert sleep.is_error and "time limit" in text_of(sleep)


def test_a_missing_sdk_is_one_line(monkeypatch):
    from agentdata.errors import MissingDependencyError
    from agentdata.sandbox import mcp_server

    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # as if the extra were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'agentdata\[mcp\]'"):
        mcp_server.load_mcp()


def test_an_unknown_transport_or_one_without_mcp_is_refused():
    refused = subprocess.run([*CLI, "--transport", "carrier-pigeon"], capture_output=True, text=True, env=ENV)
    assert refused.returncode == 2 and "--transport 'carrier-pigeon': use stdio or http" in refused.stderr
    plain = [arg for arg in CLI if arg != "--mcp"]
    refused = subprocess.run([*plain, "--transport", "http"], capture_output=True, text=True, env=ENV)
    assert refused.returncode == 2 and "--transport is for --mcp" in refused.stderr


FORK_BOMB = "import os\nwhile True:\n    os.fork()"  # stopped when a fork fails: its children fork on
BACKGROUND_BOMB = """
import os
ready, told = os.pipe()
if os.fork() == 0:  # a child forks on behind the call, holding every process slot
    full = False
    while True:
        try:
            os.fork()
        except OSError:
            if not full:
                full = True
                os.write(told, b"x")  # every slot is taken: the call may return
os.read(ready, 1)
"""


def first_line(result) -> str:
    return text_of(result).split("\n")[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only an executor with its own uid has a process limit")
def test_the_session_survives_a_contained_fork_bomb_and_says_what_was_stopped():
    # the bomb's call ended at the process limit, but its children forked on: the executor's next call could
    # not start its output thread and died ("the session's state is lost"), one or two calls later. A limit
    # far above what filling the process slots takes on a busy machine: the bombs end by themselves.
    args = [*CLI[1 : CLI.index("--timeout")], "--timeout", "300", *CLI[CLI.index("--timeout") + 2 :]]

    async def run():
        async with Client(StdioServerParameters(command=CLI[0], args=args, env=ENV)) as client:
            return await calls(
                client, "x = 41", FORK_BOMB, "x += 1\nx", "x += 1\nx", BACKGROUND_BOMB, "x += 1\nx", "x += 1\nx"
            )

    _, bomb, after, again, _, after_background, last = asyncio.run(run())
    assert bomb.is_error and "BlockingIOError" in text_of(bomb) and "were all stopped" in text_of(bomb)
    # the killed processes may hold their slots a moment longer: the next call may find (and say) it again
    assert [first_line(after), first_line(again)] == ["42", "43"], text_of(after)
    assert first_line(after_background) == "44", text_of(after_background)
    assert "were all stopped" in text_of(after_background)  # said on the call that found them
    assert first_line(last) == "45" and not any("state is lost" in text_of(r) for r in (after, again, last))
