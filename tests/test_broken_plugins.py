"""Every plug-in kind (--tool, --step, --reward, --teacher, --protocol) given each broken form is one line,
exit 2, named as the plug-in's fault (never agentdata's "unexpected" bug), before any work: an import
error, a syntax error, raising at import, the wrong kind, the wrong constructor, a constructor that
raises; and at run time a reward that raises or returns the wrong number of rewards, a step whose mask
has the wrong length or type, a teacher whose generate raises."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import polars as pl
import pytest

from agentdata.errors import UserError
from agentdata.registry import PluginError
from agentdata.steps import Step, run_steps
from agentdata.verify.rewards import build_rewards
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.fakes import InProcessSandbox, ScriptedEngine

# The broken forms every kind is given: (name, file text, what the line says). `attr` is what is named.
IMPORT_FORMS = [
    ("import_error", "import a_module_that_is_not_there\nattr = 1\n", "ModuleNotFoundError"),
    ("syntax_error", "def attr(:\n", "SyntaxError"),
    ("raises_at_import", "raise RuntimeError('broken at import')\n", "RuntimeError: broken at import (at"),
    ("no_such_attribute", "other = 1\n", "has no attribute 'attr'"),
]
KIND_FORMS = {
    "tool": [
        ("wrong_kind", "attr = 5\n", "is int: a tool is a typed function or a Tool"),
        ("wrong_constructor", "class attr:\n    def __init__(self, needed):\n        pass\n", "Class()"),
        (
            "constructor_raises",
            "class attr:\n    def __init__(self):\n        raise ValueError('no')\n",
            "ValueError: no",
        ),
    ],
    "step": [
        ("wrong_kind", "attr = 'a string'\n", "is str, not a Step"),
        ("class_not_a_step", "class attr:\n    reason = 'r'\n", "is the class attr, not a Step"),
        (
            "wrong_constructor",
            "from agentdata.steps import Step\nclass attr(Step):\n    reason = 'r'\n    def __init__(self, x):\n"
            "        pass\n",
            "Class(), which it does not take",
        ),
        ("function_raises", "def attr(settings):\n    raise KeyError('setting')\n", "KeyError: 'setting'"),
        ("returns_wrong_kind", "def attr(settings):\n    return 42\n", "is int, not a Step"),
    ],
    "teacher": [
        ("wrong_kind", "attr = 5\n", "is int, not callable"),
        ("wrong_constructor", "class attr:\n    def __init__(self):\n        pass\n", "which it does not take"),
        ("constructor_raises", "def attr(target, *, spec):\n    raise OSError('no GPU')\n", "OSError: no GPU"),
        ("builds_no_engine", "def attr(target, *, spec):\n    return 'not an engine'\n", "built str, not an engine"),
    ],
    "protocol": [
        ("wrong_kind", "attr = 5\n", "is not a Protocol"),
        (
            "wrong_constructor",
            "class attr:\n    def __init__(self, x):\n        pass\n",
            "Class(), which it does not take",
        ),
        (
            "constructor_raises",
            "class attr:\n    def __init__(self):\n        raise RuntimeError('x')\n",
            "RuntimeError: x",
        ),
    ],
    "reward": [
        ("wrong_kind", "attr = 5\n", "is not callable"),
        (
            "wrong_constructor",
            "class attr:\n    def __init__(self, x):\n        pass\n",
            "Class(), which it does not take",
        ),
        (
            "constructor_raises",
            "class attr:\n    def __init__(self):\n        raise RuntimeError('x')\n",
            "RuntimeError: x",
        ),
    ],
}
CASES = [(kind, *form) for kind in KIND_FORMS for form in IMPORT_FORMS + KIND_FORMS[kind]]


@pytest.fixture(autouse=True)
def scripted_peers(monkeypatch):
    monkeypatch.setattr("agentdata.engines.load_engine", lambda spec, **options: ScriptedEngine())
    monkeypatch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: InProcessSandbox())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    problems = folder / "p.jsonl"
    problems.write_text(json.dumps({"question": "What is 6 * 7?", "answer": "42"}) + "\n")
    rows = [trajectory("t1"), trajectory("t2", "p2", question="What is the sum of the first ten odd numbers?")]
    return {"problems": problems, "run": write_run(folder / "run", rows)}


def command(kind: str, spec: str, inputs: dict[str, Path], out: Path) -> list[str]:
    collect = ["collect", str(inputs["problems"]), "--out", str(out / "run"), "--limit", "1"]
    return {
        "tool": [*collect, "--tool", spec],
        "teacher": [*collect, "--teacher", f"{spec}:x"],
        "protocol": [*collect, "--protocol", spec],
        "step": ["curate", str(inputs["run"]), "--out", str(out / "sft.parquet"), "--step", spec],
    }[kind]


def one_line(args: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(args)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "unexpected" not in lines[0], (args, code, err.getvalue())
    return lines[0]


@pytest.mark.parametrize(("kind", "form", "text", "says"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_broken_plugin_is_one_line_naming_it(kind, form, text, says, inputs, tmp_path, monkeypatch):
    plugin = tmp_path / f"{kind}_{form}.py"
    plugin.write_text(text)
    spec = f"{plugin}:attr"
    if kind == "teacher":  # the real loader, not the scripted stand-in
        monkeypatch.undo()
        monkeypatch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: InProcessSandbox())
    if kind == "reward":  # GRPO builds its rewards before the model loads: the library call is that step
        with pytest.raises(UserError) as caught:
            build_rewards([spec])
        line = str(caught.value)
    else:
        line = one_line(command(kind, spec, inputs, tmp_path))
    assert spec in line and says in line, line
    built = kind == "teacher" and form in ("constructor_raises", "builds_no_engine")  # a wrong signature is not
    if not built:  # what is known without building the model is refused before the run dir is written
        assert not (tmp_path / "run" / "manifest.json").exists()


REWARDS = """
def too_few(prompts, completions, **kwargs):
    return [1.0]

def raises(prompts, completions, **kwargs):
    raise ZeroDivisionError("oops")

def not_a_list(prompts, completions, **kwargs):
    return 1.0

def nan(prompts, completions, **kwargs):
    return [float("nan")] * len(completions)

async def async_too_many(prompts, completions, **kwargs):
    return [0.0] * (len(completions) + 1)

def fine(prompts, completions, **kwargs):
    return [None if i else 0.5 for i, _ in enumerate(completions)]
"""


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("too_few", "returned 1 rewards for 3 completions"),
        ("raises", "raised ZeroDivisionError: oops on a batch of 3"),
        ("not_a_list", "returned float; a reward returns a list"),
        ("nan", "reward 0 is nan"),
        ("async_too_many", "returned 4 rewards for 3 completions"),
    ],
)
def test_a_reward_that_raises_or_miscounts_is_named(name, says, tmp_path):
    import asyncio
    import inspect

    path = tmp_path / "rewards.py"
    path.write_text(REWARDS)
    (reward,) = build_rewards([f"{path}:{name}"])
    with pytest.raises(PluginError, match=says) as caught:
        values = reward(prompts=["p"] * 3, completions=["a", "b", "c"])
        if inspect.isawaitable(values):
            asyncio.run(values)
    assert f"{path}:{name}" in str(caught.value)
    (fine,) = build_rewards([f"{path}:fine"])
    assert fine(prompts=["p"] * 2, completions=["a", "b"]) == [0.5, None] and fine.__name__ == "fine"


STEPS = """
import polars as pl
from agentdata.steps import Step

class ShortMask(Step):
    reason = "short"
    def keep(self, frame):
        return pl.Series([False])  # one value: polars would broadcast it over every row

class IntMask(Step):
    reason = "ints"
    def keep(self, frame):
        return pl.Series([1] * frame.height)

class Raises(Step):
    reason = "raises"
    def keep(self, frame):
        raise RuntimeError("step broke")
"""


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("ShortMask", "keep() returned a Boolean Series of 1 for 2 rows; it must return one boolean per row"),
        ("IntMask", "keep() returned a Int64 Series of 2 for 2 rows"),
        ("Raises", "keep() raised RuntimeError: step broke"),
    ],
)
def test_a_step_whose_mask_is_wrong_is_named_and_counts_nothing(name, says, inputs, tmp_path):
    path = tmp_path / "steps.py"
    path.write_text(STEPS)
    line = one_line(command("step", f"{path}:{name}", inputs, tmp_path))
    assert says in line and name in line, line
    assert not (tmp_path / "sft.parquet").exists()


def test_a_right_step_still_counts_its_rows():
    class Odd(Step):
        reason = "odd"

        def keep(self, frame):
            return frame["n"] % 2 == 0

    result = run_steps(pl.DataFrame({"n": [1, 2, 3, 4]}), [Odd()])
    assert result.kept["n"].to_list() == [2, 4] and result.counts == {"odd": 2}


def test_a_teacher_whose_generate_raises_is_named_when_the_run_stops(inputs, tmp_path, monkeypatch):
    monkeypatch.undo()
    monkeypatch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: InProcessSandbox())
    plugin = tmp_path / "teacher.py"
    plugin.write_text(
        "from agentdata.engines.base import Engine\nclass Broken(Engine):\n"
        "    def __init__(self, target, *, spec):\n        self.spec = spec\n"
        "    async def generate(self, request):\n        raise RuntimeError('model exploded')\n"
    )
    line = one_line(
        ["collect", str(inputs["problems"]), "--out", str(tmp_path / "r"), "--teacher", f"{plugin}:Broken:x"]
    )
    assert "all failed (model" in line and "Broken" in line and "RuntimeError: model exploded" in line, line


def test_a_plugin_tool_whose_call_raises_is_a_tool_error_the_model_reads(tmp_path):
    import asyncio

    from agentdata.tools import ToolContext, call_tool, load_tools

    path = tmp_path / "lookup.py"
    path.write_text(
        "class Lookup:\n    name = 'lookup'\n    schema = {'type': 'function', 'function': {'name': 'lookup'}}\n"
        "    async def call(self, arguments, context):\n        raise KeyError('no such key')\n"
    )
    tools = load_tools([f"{path}:Lookup"])
    result = asyncio.run(call_tool(tools, "lookup", {}, ToolContext(InProcessSandbox(), "s", 5.0, 256)))
    assert not result.ok and result.content == "Error: lookup raised KeyError: 'no such key'"
