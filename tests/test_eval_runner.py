"""The eval runner end to end: collect runs per (model, benchmark, budget), metrics, report, plots, resume."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from agentdata.agent.config import LoopConfig
from agentdata.errors import UserError
from agentdata.evaluation.report import EvalReport
from agentdata.evaluation.runner import EvalConfig, benchmark_names, default_label, parse_model_specs, run_eval
from agentdata.settings import build
from tests.cli_helpers import run_cli
from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

HERMES = LoopConfig(protocol=SCRIPTED_PROTOCOL)  # the scripted engine's protocol

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def benchmarks(tmp_path):
    aime = write_jsonl(
        tmp_path / "aime.jsonl",
        [
            {"Problem": "What is 6*7?", "Answer": "42"},
            {"Problem": "What is 40+2?", "Answer": "42"},
            {"Problem": "What is 3+4?", "Answer": "7"},
        ],
    )
    gpqa = write_jsonl(
        tmp_path / "gpqa.jsonl",
        [
            {"question": "Which is 42? (A) 41 (B) 42", "answer": "B"},
            {"question": "Which is 7? (A) 7 (B) 8", "answer": "A"},
        ],
    )
    return [aime, gpqa]


def engines(spec: str) -> ScriptedEngine:
    """`scripted` answers what its one tool call printed (42); `letters` always answers B."""
    return ScriptedEngine(spec, answer="B" if spec == "letters" else None)


def test_run_eval_reports_every_model_benchmark_and_budget(tmp_path, benchmarks):
    config = EvalConfig(samples=2, tool_call_budgets=[1, 0], concurrency=2, loop=HERMES)
    report = run_eval(
        ["base=scripted", "letters"],
        benchmarks,
        tmp_path / "report",
        config,
        engine_factory=engines,
        sandbox=InProcessSandbox(),
    )
    keys = [(r.model, r.benchmark, r.max_tool_calls) for r in report.results]
    assert keys == [(m, b, n) for m in ("base", "letters") for b in ("aime", "gpqa") for n in (0, 1)]
    by_key = {(r.model, r.benchmark, r.max_tool_calls): r.metrics for r in report.results}

    aime = by_key[("base", "aime", 1)]
    assert aime.num_problems == 3 and aime.samples == 2 and aime.num_responses == 6
    assert aime.avg_at_k == pytest.approx(2 / 3) and aime.maj_at_k == pytest.approx(2 / 3)
    assert aime.pass_at_k == {1: pytest.approx(2 / 3), 2: pytest.approx(2 / 3)}
    assert aime.mean_tool_calls == 1.0 and aime.tool_error_rate == 0.0
    assert by_key[("base", "aime", 0)].mean_tool_calls == 0.0  # the budget really reached the loop
    assert by_key[("base", "aime", 0)].avg_at_k == 0.0
    assert by_key[("letters", "gpqa", 1)].avg_at_k == pytest.approx(0.5)  # B is right for one of two
    assert by_key[("letters", "aime", 1)].avg_at_k == 0.0

    out = tmp_path / "report"
    assert len(list((out / "runs" / "base" / "aime").glob("tools-1-*/trajectories"))) == 1
    assert (out / "accuracy.png").read_bytes().startswith(PNG_MAGIC)
    assert (out / "tool_calls_sweep.png").read_bytes().startswith(PNG_MAGIC)
    again = EvalReport.read(out)
    assert [r.metrics for r in again.results] == [r.metrics for r in report.results]
    assert again.settings["models"] == {"base": "scripted", "letters": "letters"}


def test_compared_models_get_paired_differences_with_intervals(tmp_path, benchmarks):
    """`letters` (always B) against `base` (answers 42): a known per-problem difference on each benchmark."""
    config = EvalConfig(samples=2, tool_call_budgets=[1], concurrency=2, loop=HERMES)
    report = run_eval(
        ["base=scripted", "letters"], benchmarks, tmp_path, config, engine_factory=engines, sandbox=InProcessSandbox()
    )
    aime = {c["metric"]: c for c in report.comparisons if c["benchmark"] == "aime"}
    assert set(aime) == {"avg@2", "pass@2", "maj@2"}
    avg = aime["avg@2"]
    assert (avg["model"], avg["baseline"], avg["problems"]) == ("letters", "base", 3)
    assert avg["difference"] == pytest.approx(-2 / 3)  # base solves 2 of the 3, letters none
    assert avg["interval"]["low"] <= -2 / 3 <= avg["interval"]["high"]
    assert avg["p_value"] == pytest.approx(0.5)  # McNemar: 2 discordant problems, both for base
    assert avg["sentence"].startswith("no difference detectable at this size on avg@2")  # 3 problems say little
    gpqa = next(c for c in report.comparisons if c["benchmark"] == "gpqa" and c["metric"] == "avg@2")
    assert gpqa["difference"] == pytest.approx(0.5)  # letters gets B right, base (42) gets neither
    result = report.results[0]
    assert result.metrics.avg_at_k_ci.low <= result.metrics.avg_at_k <= result.metrics.avg_at_k_ci.high
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["comparisons"] == report.comparisons
    assert saved["results"][0]["ci95"]["avg@2"]["method"] in ("bootstrap", "wilson")


def test_a_second_run_resumes_without_calling_the_model(tmp_path, benchmarks):
    config = EvalConfig(samples=2, tool_call_budgets=[1], concurrency=2, loop=HERMES)
    run_eval(["scripted"], benchmarks[:1], tmp_path, config, engine_factory=engines, sandbox=InProcessSandbox())
    engine = ScriptedEngine("scripted")
    report = run_eval(
        ["scripted"], benchmarks[:1], tmp_path, config, engine_factory=lambda spec: engine, sandbox=InProcessSandbox()
    )
    assert engine.requests == []
    assert report.results[0].metrics.num_responses == 6
    assert report.results[0].engine == ""  # nothing generated: no engine ran (the summary says reused)


def test_a_changed_gold_answer_reruns_that_problem_and_says_so(tmp_path, benchmarks):
    config = EvalConfig(samples=2, tool_call_budgets=[1], concurrency=2, loop=HERMES)
    first = run_eval(
        ["scripted"], benchmarks[:1], tmp_path / "r", config, engine_factory=engines, sandbox=InProcessSandbox()
    )
    assert first.results[0].metrics.avg_at_k == pytest.approx(2 / 3) and first.results[0].cache["generated"] == 6
    write_jsonl(
        benchmarks[0],
        [
            {"Problem": "What is 6*7?", "Answer": "999"},
            {"Problem": "What is 40+2?", "Answer": "42"},
            {"Problem": "What is 3+4?", "Answer": "7"},
        ],
    )
    engine = ScriptedEngine("scripted")
    again = run_eval(
        ["scripted"],
        benchmarks[:1],
        tmp_path / "r",
        config,
        engine_factory=lambda spec: engine,
        sandbox=InProcessSandbox(),
    )
    assert {r.messages[1]["content"] for r in engine.requests} == {"What is 6*7?"}
    assert again.results[0].metrics.avg_at_k == pytest.approx(1 / 3)
    assert again.results[0].cache == {"generated": 2, "redone_problem_changed": 2, "redone_error": 0}


def test_other_sampling_settings_get_their_own_run_and_never_reuse(tmp_path, benchmarks):
    run_eval(
        ["scripted"],
        benchmarks[:1],
        tmp_path,
        EvalConfig(samples=1, concurrency=2, loop=HERMES),
        engine_factory=engines,
        sandbox=InProcessSandbox(),
    )
    engine = ScriptedEngine("scripted")
    report = run_eval(
        ["scripted"],
        benchmarks[:1],
        tmp_path,
        build(EvalConfig, dict(samples=1, concurrency=2, loop=LoopConfig(temperature=0.2))),
        engine_factory=lambda spec: engine,
        sandbox=InProcessSandbox(),
    )
    assert len(engine.requests) == 6 and report.results[0].cache["generated"] == 3


def test_fewer_samples_or_problems_on_rerun_score_only_those(tmp_path, benchmarks):
    run_eval(
        ["scripted"],
        benchmarks[:1],
        tmp_path,
        EvalConfig(samples=2, concurrency=2, loop=HERMES),
        engine_factory=engines,
        sandbox=InProcessSandbox(),
    )
    report = run_eval(
        ["scripted"],
        benchmarks[:1],
        tmp_path,
        EvalConfig(samples=1, limit=2, concurrency=2, loop=HERMES),
        engine_factory=engines,
        sandbox=InProcessSandbox(),
    )
    metrics = report.results[0].metrics
    assert (metrics.num_problems, metrics.num_responses, metrics.samples) == (2, 2, 1)


def test_model_labels():
    assert default_label("hf:/ckpts/sft/checkpoint-500") == "checkpoint-500"
    assert default_label("openai:http://127.0.0.1:8000/v1,http://127.0.0.1:8001/v1") == "openai-127.0.0.1:8000"
    assert default_label("smollm2") == "smollm2"
    assert [m.label for m in parse_model_specs(["base=hf:a", "hf:b"])] == ["base", "b"]
    with pytest.raises(UserError, match="LABEL=SPEC"):
        parse_model_specs(["hf:x/m", "hf:y/m"])


def test_benchmark_names_are_stems_unless_they_clash(tmp_path):
    assert benchmark_names([tmp_path / "a" / "test.jsonl", tmp_path / "b" / "test.jsonl"]) == ["a-test", "b-test"]
    assert benchmark_names([Path("aime24.jsonl"), Path("gpqa.parquet")]) == ["aime24", "gpqa"]


def test_config_rejects_bad_values():
    with pytest.raises(ValueError):
        EvalConfig(samples=0)
    with pytest.raises(ValueError):
        EvalConfig(tool_call_budgets=[-1])
    assert EvalConfig(tool_call_budgets=[8, 1, 8]).tool_call_budgets == [1, 8]


# --------------------------------------------------------------------------- CLI, real engine and sandbox


def load_fake_server():
    path = Path(__file__).resolve().parents[1] / "bench" / "fake_openai_server.py"
    spec = importlib.util.spec_from_file_location("fake_openai_server", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fake_openai_server", module)
    spec.loader.exec_module(module)
    return module


def test_eval_command_with_openai_engine_and_local_sandbox(tmp_path, benchmarks, capsys):
    """The fake server calls print(6*7) through the real local sandbox, then answers 42."""
    server = load_fake_server().FakeOpenAIServer(script="tool")
    with server:
        code = run_cli(
            [
                "eval",
                f"served=openai:{server.url}",
                str(benchmarks[0]),
                "--k",
                "2",
                "--out",
                str(tmp_path / "r"),
                "--max-tool-calls",
                "0,1",
                "--concurrency",
                "4",
                "--protocol",
                "hermes",
            ]
        )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "served" in printed.out  # the per-result lines and the summary table name the model
    assert printed.out.count("generated 6") == 2  # each result says what it generated rather than reused
    assert (tmp_path / "r" / "tool_calls_sweep.png").read_bytes().startswith(PNG_MAGIC)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    with_tool = next(r for r in report["results"] if r["max_tool_calls"] == 1)
    assert with_tool["avg@2"] == pytest.approx(2 / 3)
    assert with_tool["mean_tool_calls"] == 1.0 and with_tool["tool_error_rate"] == 0.0
    assert with_tool["pass@k"] == {"1": pytest.approx(2 / 3), "2": pytest.approx(2 / 3)}
    assert with_tool["finish_reasons"] == {"answer": 6}
    assert "avg@2 66.7% [" in printed.out  # every score is shown with its interval
    # the engine that ran is named (in the summary, and in the report)
    assert "engine · served: openai-compatible server" in " ".join(printed.out.split())
    assert {r["engine"] for r in report["results"]} == {"openai-compatible server"}


def test_eval_compare_prints_the_paired_difference_in_a_sentence(tmp_path, benchmarks, capsys):
    with (
        load_fake_server().FakeOpenAIServer(script="tool") as tool,
        load_fake_server().FakeOpenAIServer(script="echo") as echo,
    ):
        code = run_cli(
            ["eval", f"tool=openai:{tool.url}", str(benchmarks[0]), "--compare", f"echo=openai:{echo.url}"]
            + ["--k", "2", "--out", str(tmp_path / "r"), "--protocol", "hermes", "--concurrency", "4"]
        )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "paired differences against tool" in printed.out
    assert "aime · tools ≤ 4: no difference detectable at this size on avg@2 (echo 0.0% vs tool 66.7%" in printed.out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {c["metric"] for c in report["comparisons"]} == {"avg@2", "pass@2", "maj@2"}


@pytest.mark.parametrize("args,message", [(["--max-tool-calls", "1,x"], "--max-tool-calls"), (["--k", "0"], "--k 0")])
def test_eval_command_reports_bad_flags(tmp_path, benchmarks, capsys, args, message):
    code = run_cli(["eval", "smollm2", str(benchmarks[0]), "--out", str(tmp_path / "out"), *args])
    assert code == 2 and message in capsys.readouterr().err


def test_eval_command_names_a_missing_benchmark(tmp_path, capsys):
    code = run_cli(["eval", "smollm2", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out")])
    assert code == 2 and "missing.jsonl" in capsys.readouterr().err
