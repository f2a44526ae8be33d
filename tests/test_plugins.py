"""Plug-ins of every kind, loaded from files in tmp_path and used end to end (docs/ARCHITECTURE.md):
an engine and a user tool in `collect`, a protocol, a filter step in `curate` and `filter`'s pool,
a reward in GRPO's reward list."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.errors import UserError
from agentdata.records import Problem, message_tool_calls
from agentdata.settings import build
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.fakes import InProcessSandbox

# Hermes-speaking engine: counts the question's words with the user tool, doubles the count
# in the code interpreter, then answers with what the code printed.
ENGINE = """
import json

from agentdata.engines.base import Engine, Generation


def call(name, arguments):
    return "<tool_call>\\n" + json.dumps({"name": name, "arguments": arguments}) + "\\n"


class ToolUser(Engine):
    def __init__(self, target, *, spec):
        self.spec = spec

    async def generate(self, request):
        responses = [m["content"].split("<tool_response>\\n")[1].split("\\n</tool_response>")[0]
                     for m in request.messages if m["role"] == "user" and "<tool_response>" in m["content"]]
        if not responses:
            first_call = call("word_count", {"text": request.messages[1]["content"]})
            return Generation(first_call, "</tool_call>", "stop", 5, 5)
        if len(responses) == 1:
            return Generation(call("code_interpreter", {"code": f"print({responses[0]} * 2)"}), "</tool_call>",
                              "stop", 5, 5)
        return Generation(f"So \\\\boxed{{{responses[-1]}}}.", None, "stop", 5, 5)
"""

TOOLS = '''
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return len(text.split())
'''

STEP = '''
import polars as pl

from agentdata.steps import ExpressionStep


class ShortQuestion(ExpressionStep):
    """Drops questions under 20 characters."""

    reason = "short_question"

    def expression(self):
        return pl.col("question").str.len_chars() >= 20
'''


@pytest.fixture
def plugins(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name, text in {"engine.py": ENGINE, "my_tools.py": TOOLS, "steps.py": STEP}.items():
        (folder / name).write_text(text)
    return folder


def test_collect_with_an_engine_plugin_and_a_user_tool(tmp_path, plugins):
    problems = [Problem("one two three four", "8", id="p4"), Problem("one two three", "7", id="p3")]
    config = build(
        CollectConfig,
        dict(
            model=f"{plugins / 'engine.py'}:ToolUser",
            concurrency=2,
            protocol="hermes",
            tools=["code_interpreter", f"{plugins / 'my_tools.py'}:word_count"],
        ),
    )  # ToolUser writes hermes
    summary = collect(problems, tmp_path / "run", config, sandbox=InProcessSandbox())
    assert (summary.total, summary.correct, summary.tool_calls, summary.tool_errors) == (2, 1, 4, 0)
    by_problem = {t.problem_id: t for t in RunDir(tmp_path / "run").trajectories()}
    four = by_problem["p4"]
    assert [call.name for m in four.messages for call in message_tool_calls(m)] == ["word_count", "code_interpreter"]
    assert [m["content"] for m in four.messages if m["role"] == "tool"] == ["4", "8"]
    assert [m["name"] for m in four.messages if m["role"] == "tool"] == ["word_count", "code_interpreter"]
    assert four.final_answer == "8" and four.correct and not by_problem["p3"].correct
    # The model saw both schemas, and the trajectory records them for training.
    assert [tool["function"]["name"] for tool in four.tools] == ["code_interpreter", "word_count"]
    assert '"name": "word_count"' in four.messages[0]["content"]


def test_a_tool_that_cannot_load_stops_collect_before_it_starts(tmp_path, plugins):
    config = build(
        CollectConfig, dict(model=f"{plugins / 'engine.py'}:ToolUser", tools=["code_interpreter", "no_such_tool"])
    )
    with pytest.raises(UserError, match="unknown tool 'no_such_tool'"):
        collect([Problem("q", "1")], tmp_path / "run", config, sandbox=InProcessSandbox())


def test_a_protocol_plugin_drives_collect(tmp_path, plugins):
    (plugins / "protocols.py").write_text(
        "from agentdata.formats.hermes import HermesProtocol\n\n"
        "class ShoutingHermes(HermesProtocol):\n    name = 'shouting'\n\n"
        "    def system_prompt(self, tools):\n        return super().system_prompt(tools).upper()\n"
    )
    config = build(
        CollectConfig,
        dict(
            model=f"{plugins / 'engine.py'}:ToolUser",
            protocol=f"{plugins / 'protocols.py'}:ShoutingHermes",
            tools=["code_interpreter", f"{plugins / 'my_tools.py'}:word_count"],
        ),
    )
    collect([Problem("one two", "4", id="p2")], tmp_path / "run", config, sandbox=InProcessSandbox())
    [only] = RunDir(tmp_path / "run").trajectories()
    assert only.correct and only.messages[0]["content"].isupper() and "WORD_COUNT" in only.messages[0]["content"]


def test_eval_passes_the_tools_to_its_collect_runs(plugins):
    from agentdata.evaluation.runner import EvalConfig

    tools = ["code_interpreter", f"{plugins / 'my_tools.py'}:word_count"]
    assert build(EvalConfig, dict(tools=tools)).collect_config("smollm2", 2).loop.tools == tools


def test_curate_cli_runs_a_filter_step_plugin(tmp_path, plugins, capsys):
    rows = [trajectory("a", problem_id="p1"), trajectory("b", problem_id="p2", question="Short?")]
    run = write_run(tmp_path / "run", rows)
    out = tmp_path / "sft.parquet"
    code = run_cli(["curate", str(run), "--out", str(out), "--step", f"{plugins / 'steps.py'}:ShortQuestion"])
    assert code == 0, capsys.readouterr()
    assert pl.read_parquet(out)["problem_id"].to_list() == ["p1"]
    report = json.loads(out.with_name("sft.report.json").read_text())
    assert report["dropped"] == {"dropped_short_question": 1}


def test_a_bad_filter_step_is_a_one_line_error(tmp_path, plugins, capsys):
    run = write_run(tmp_path / "run", [trajectory("a")])
    (plugins / "not_a_step.py").write_text("THING = 1\n")
    code = run_cli(
        ["curate", str(run), "--out", str(tmp_path / "o.parquet"), "--step", f"{plugins / 'not_a_step.py'}:THING"]
    )
    assert code == 2 and "not a Step" in capsys.readouterr().err


def test_the_pool_runs_a_filter_step_plugin(plugins):
    from agentdata.filter.build import PoolConfig, build_pool, problems_table

    problems = problems_table(
        [Problem("What is the sum of the first ten primes?", "129", id="long"), Problem("Short?", "1", id="short")]
    )
    rates = pl.DataFrame({"problem_id": ["long", "short"], "pass_rate": [0.5, 0.5], "n_rollouts": [4, 4]})
    result = build_pool(
        problems, rates, PoolConfig(extra_steps=[f"{plugins / 'steps.py'}:ShortQuestion"], embedding="tfidf")
    )
    assert result.pool["problem_id"].to_list() == ["long"] and result.counts.get("short_question") == 1


def test_a_run_dir_does_not_mix_tool_sets(tmp_path, plugins):
    engine = f"{plugins / 'engine.py'}:ToolUser"
    problem = [Problem("one two", "4", id="p2")]
    collect(
        problem,
        tmp_path / "run",
        build(CollectConfig, dict(model=engine, tools=["code_interpreter", f"{plugins / 'my_tools.py'}:word_count"])),
        sandbox=InProcessSandbox(),
    )
    with pytest.raises(UserError, match="tools"):
        collect(problem, tmp_path / "run", CollectConfig(model=engine), sandbox=InProcessSandbox())


def test_cli_collect_with_teacher_and_tool_plugins_on_the_local_sandbox(tmp_path, plugins, capsys):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "one two three four", "answer": "8"}) + "\n")
    code = run_cli(
        [
            "collect",
            str(problems),
            "--out",
            str(tmp_path / "run"),
            "--teacher",
            f"{plugins / 'engine.py'}:ToolUser",
            "--tool",
            f"{plugins / 'my_tools.py'}:word_count",
            "--protocol",
            "hermes",
        ]
    )
    assert code == 0, capsys.readouterr()
    [only] = RunDir(tmp_path / "run").trajectories()
    assert only.correct and [m["content"] for m in only.messages if m["role"] == "tool"] == ["4", "8"]
