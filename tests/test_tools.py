"""Tools: the `Tool` protocol, the code interpreter on the sandbox, user functions with derived
schemas, dispatch by name, and the sandbox protocol both sandboxes share."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

from agentdata.errors import UserError
from agentdata.records import CODE_TOOL
from agentdata.sandbox.base import CodeSandbox
from agentdata.tools import (
    CodeInterpreter,
    FunctionTool,
    Tool,
    ToolContext,
    argument_problem,
    call_tool,
    load_tool,
    load_tools,
)
from tests.fakes import InProcessSandbox

WORD_TOOLS = '''
def word_count(text: str, unique: bool = False) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
        unique: Count each distinct word once.
    """
    words = text.split()
    return len(set(words)) if unique else len(words)


def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise RuntimeError(reason)
'''


def context(sandbox=None, timeout=5.0, output_chars=256):
    return ToolContext(sandbox if sandbox is not None else InProcessSandbox(), "session-1", timeout, output_chars)


def call(tools, name, arguments, ctx=None):
    return asyncio.run(call_tool(tools, name, arguments, ctx or context()))


@pytest.fixture
def word_tools(tmp_path):
    path = tmp_path / "word_tools.py"
    path.write_text(WORD_TOOLS)
    return path


def test_a_user_function_gets_its_schema_from_hints_and_docstring(word_tools):
    tool = load_tool(f"{word_tools}:word_count")
    assert isinstance(tool, Tool) and tool.name == "word_count"
    function = tool.schema["function"]
    assert tool.schema["type"] == "function" and function["description"] == "Count the words in a text."
    assert function["parameters"]["properties"]["text"] == {"type": "string", "description": "The text to count."}
    assert function["parameters"]["required"] == ["text"]


def test_calls_dispatch_by_name_and_failures_become_tool_errors(word_tools):
    tools = load_tools(["code_interpreter", f"{word_tools}:word_count", f"{word_tools}:explode"])
    counted = call(tools, "word_count", {"text": "a b a", "unique": True})
    assert (counted.content, counted.ok) == ("2", True)
    code = call(tools, "code_interpreter", {"code": "print(6 * 7)"})
    assert (code.content, code.ok) == ("42", True)
    for name, arguments, message in [
        ("search", {"q": "x"}, "unknown tool 'search'; the tools are 'code_interpreter', 'word_count', 'explode'"),
        ("word_count", {}, "missing argument(s) ['text']"),
        ("word_count", {"text": "a", "lang": "en"}, "unknown argument(s) ['lang']"),
        ("word_count", {"text": 3}, "argument 'text' should be string, got int"),
        ("explode", {"reason": "no"}, "explode raised RuntimeError: no"),
        ("code_interpreter", {"script": "1"}, 'needs a "code" string argument'),
    ]:
        result = call(tools, name, arguments)
        assert not result.ok and result.content.startswith("Error: ") and message in result.content, result


SLOW_TOOLS = '''
import asyncio
import time


def slow(seconds: float) -> str:
    """Sleep, then talk a lot.

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return "x" * 1000


def spin() -> str:
    """Never returns, and holds the GIL while it runs.

    """
    while True:
        pass


def chatty() -> str:
    """Prints, then answers."""
    print("printed, not the answer")
    return "the answer"


async def lookup(key: str) -> dict:
    """Look a key up.

    Args:
        key: The key.
    """
    await asyncio.sleep(0)
    return {"key": key, "found": True}
'''


@pytest.fixture
def slow_tools(tmp_path):
    path = tmp_path / "slow_tools.py"
    path.write_text(SLOW_TOOLS)
    return path


def test_a_slow_user_tool_times_out_and_long_output_is_cut(slow_tools):
    tool = load_tool(f"{slow_tools}:slow")
    timed_out = asyncio.run(tool.call({"seconds": 30}, context(timeout=0.5)))
    assert not timed_out.ok and "timed out after 0.5 s" in timed_out.content
    shown = asyncio.run(tool.call({"seconds": 0}, context(output_chars=100)))
    assert shown.ok and len(shown.content) <= 100 and "characters cut" in shown.content


def test_a_tool_that_never_returns_is_stopped_by_its_timeout_and_the_run_does_not_hang(slow_tools):
    tool = load_tool(f"{slow_tools}:spin")
    started = time.monotonic()
    results = asyncio.run(_gather(tool, 3, timeout=1.0))
    assert all(not r.ok and "timed out" in r.content for r in results)
    assert time.monotonic() - started < 30  # the three ran at once, each stopped at 1 s (plus the process start)
    assert tool._workers.workers == set()  # every stopped worker was killed, none is kept
    script = f"""
import asyncio
from agentdata.tools import load_tool, ToolContext
tool = load_tool({str(slow_tools) + ":spin"!r})
print(asyncio.run(tool.call({{}}, ToolContext(None, "s", 0.5, 100))).content)
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "timed out" in done.stdout, done.stderr  # and the interpreter exited


async def _gather(tool, count, timeout):
    return await asyncio.gather(*(tool.call({}, context(timeout=timeout)) for _ in range(count)))


def test_a_tools_prints_do_not_reach_the_model_and_workers_are_reused(slow_tools):
    tool = load_tool(f"{slow_tools}:chatty")
    first = asyncio.run(tool.call({}, context()))
    assert (first.content, first.ok) == ("the answer", True)
    (worker,) = tool._workers.workers
    asyncio.run(tool.call({}, context()))
    assert tool._workers.workers == {worker}  # one process served both calls
    tool.close()
    assert worker.process.poll() is not None


def test_an_async_user_tool_is_awaited(slow_tools):
    result = asyncio.run(load_tool(f"{slow_tools}:lookup").call({"key": "k"}, context()))
    assert (result.content, result.ok) == ('{"key": "k", "found": true}', True)


def test_a_function_a_fresh_process_cannot_find_is_refused():
    def local(x: int) -> int:
        """A local function.

        Args:
            x: A number.
        """
        return x

    with pytest.raises(UserError, match="define it at the top level of a module or file"):
        FunctionTool(local)


def test_a_function_without_hints_is_a_user_error(tmp_path):
    (tmp_path / "bad_tools.py").write_text("def untyped(x):\n    '''No hints.'''\n    return x\n")
    with pytest.raises(UserError, match="tool 'untyped': cannot derive its JSON schema"):
        load_tool(f"{tmp_path / 'bad_tools.py'}:untyped")
    with pytest.raises(UserError, match="unknown tool 'nope': use one of code_interpreter"):
        load_tool("nope")


def test_two_tools_with_one_name_are_refused(word_tools, tmp_path):
    (tmp_path / "other.py").write_text(WORD_TOOLS)
    with pytest.raises(UserError, match="both called 'word_count'"):
        load_tools([f"{word_tools}:word_count", f"{tmp_path / 'other.py'}:word_count"])


def test_argument_checks_follow_json_schema_types():
    parameters = {
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": ["number", "null"]},
            "mode": {"type": "string", "enum": ["a", "b"]},
        },
        "required": ["n"],
    }
    assert argument_problem({"n": 1, "x": None, "mode": "a"}, parameters) is None
    assert argument_problem({"n": 1.5}, parameters) == "argument 'n' should be integer, got float"
    assert argument_problem({"n": True}, parameters) == "argument 'n' should be integer, got bool"
    assert "one of ['a', 'b']" in argument_problem({"n": 1, "mode": "c"}, parameters)


def test_the_code_interpreter_keeps_its_session_and_reports_errors():
    sandbox = InProcessSandbox()
    tool = CodeInterpreter()
    assert tool.schema == CODE_TOOL
    asyncio.run(tool.call({"code": "x = 5"}, context(sandbox)))
    assert asyncio.run(tool.call({"code": "print(x + 1)"}, context(sandbox))).content == "6"
    failed = asyncio.run(tool.call({"code": "1 / 0"}, context(sandbox)))
    assert not failed.ok and "ZeroDivisionError" in failed.content


@pytest.mark.parametrize("sandbox_class", ["local", "remote", "fusion", "fake"])
def test_every_sandbox_has_the_whole_protocol(sandbox_class):
    from agentdata.sandbox.fusion import FusionSandbox
    from agentdata.sandbox.local import Sandbox
    from agentdata.sandbox.remote import RemoteSandbox

    cls = {"local": Sandbox, "remote": RemoteSandbox, "fusion": FusionSandbox, "fake": InProcessSandbox}[sandbox_class]
    members = [
        name for name, value in vars(CodeSandbox).items() if inspect.isfunction(value) and not name.startswith("_")
    ]
    assert set(members) == {"run", "arun", "close_session", "aclose_session", "arelease", "close"}
    for name in members:
        method = getattr(cls, name)
        assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(getattr(CodeSandbox, name)), name
