"""Tool-use efficiency (calls per correct answer, failed-call share, per source and domain): one definition,
the same numbers in collect's stats, curate's report and eval's metrics."""

from __future__ import annotations

import json

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.agent.tool_use import ToolUse, tool_use_by
from agentdata.curate import CurateConfig, curate
from agentdata.evaluation.metrics import benchmark_metrics
from agentdata.formats.health import HealthLimits
from agentdata.records import Problem
from agentdata.settings import CountBand
from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

# Two calls each; the engine answers what the tool printed (42), so the `algebra` problems (gold 41) are wrong.
QUESTIONS = (
    ("What is six times seven?", "42", "arithmetic", "math"),
    ("Multiply the first two composite numbers and add thirty-four.", "42", "arithmetic", "math"),
    ("Solve for the root of x minus forty-one.", "41", "algebra", "math"),
    ("Print the answer to life, the universe and everything.", "42", "puzzles", "code-free"),
)


def test_the_numbers_from_counts():
    use = ToolUse()
    for correct, calls, errors in ((True, 2, 0), (True, 3, 1), (False, 1, 0)):
        use.add(correct, calls, errors)
    numbers = use.as_dict()
    assert numbers["calls_per_trajectory"] == 2.0 and numbers["calls_per_correct"] == 3.0
    assert numbers["failed_call_share"] == pytest.approx(1 / 6)
    assert ToolUse().as_dict()["calls_per_correct"] is None  # no correct answer: no cost per correct answer
    rows = tool_use_by([("b", True, 1, 0), ("a", False, 2, 2), ("b", True, 3, 0)], "source")
    assert [(row["source"], row["calls_per_correct"], row["failed_call_share"]) for row in rows] == [
        ("a", None, 1.0),
        ("b", 2.0, 0.0),
    ]


def test_collect_curate_and_eval_report_the_same_numbers(tmp_path):
    problems = [Problem(question, gold, source=source, domain=domain) for question, gold, source, domain in QUESTIONS]
    config = CollectConfig(model="scripted", concurrency=4, loop=LoopConfig(protocol=SCRIPTED_PROTOCOL))
    engine = ScriptedEngine(calls_per_answer=2)
    summary = collect(problems, tmp_path / "run", config, engine=engine, sandbox=InProcessSandbox())
    assert summary.correct == 3 and summary.tool_calls == 8
    assert summary.tool_use["calls_per_correct"] == pytest.approx(8 / 3)
    by_source = {row["source"]: row for row in summary.tool_use_by_source}
    assert by_source["algebra"]["calls_per_correct"] is None and by_source["arithmetic"]["calls_per_correct"] == 2.0
    assert {row["domain"]: row["trajectories"] for row in summary.tool_use_by_domain} == {"code-free": 1, "math": 3}
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["tool_use_by_source"] == summary.tool_use_by_source

    # the scripted engine runs the same code twice: allowed here, so the right answers are all kept
    config = CurateConfig(tool_calls=CountBand(1, 2), rollout_health=HealthLimits(max_repeated_code=1))
    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", config)
    assert result.tool_use["input"] == summary.tool_use
    assert result.tool_use["by_source"] == summary.tool_use_by_source
    assert result.tool_use["by_domain"] == summary.tool_use_by_domain
    assert result.tool_use["kept"]["trajectories"] == 3 and result.tool_use["kept"]["calls_per_correct"] == 2.0
    report = json.loads(result.report.read_text())
    assert report["tool_use"] == result.tool_use

    metrics = benchmark_metrics(RunDir(tmp_path / "run").trajectories())
    assert metrics.calls_per_correct == pytest.approx(8 / 3)
    assert metrics.tool_use_by_source == summary.tool_use_by_source
    assert metrics.tool_use_by_domain == summary.tool_use_by_domain
