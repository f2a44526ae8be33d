"""Every command ends the same way: its result as tables, or with --json as one document (its `as_dict()`).

The commands run for real, in process, on a plug-in engine that answers at once: it adds the two
numbers of "What is A + B?", wrong the first time it sees a question and right after, so with k=2
every problem's pass rate is 0.5 and filter's default band keeps it.
"""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import run_cli

ADDER = """
import re
from collections import Counter

from agentdata.engines.base import Engine, Generation


class Adder(Engine):
    seen = Counter()

    def __init__(self, target="", *, spec):
        self.spec = spec

    async def generate(self, request):
        question = request.messages[-1]["content"]
        a, b = map(int, re.findall(r"\\d+", question)[:2])
        self.seen[question] += 1
        answer = a + b if self.seen[question] > 1 else a + b + 1
        return Generation(f"The answer is \\\\boxed{{{answer}}}.", None, "stop", 10, 5)
"""
# filter's --json keys as cli/filter.py wrote them by hand before FilterRun.as_dict, and the secret scan's
FILTER_KEYS = {
    "output",
    "card",
    "pushed",
    "empty",
    "profile_dir",
    "generated",
    "problems",
    "selected",
    "dropped",
    "per_source",
    "per_domain",
    "warnings",
    "reprofiled",
    "still_straddling",
    "secrets",
    "report",
    "plot",
}


def problems_file(path, numbers):
    path.write_text(
        "".join(json.dumps({"question": f"What is {a} + {a + 1}?", "answer": str(2 * a + 1)}) + "\n" for a in numbers)
    )
    return path


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "adder.py").write_text(ADDER)
    return tmp_path, f"{tmp_path / 'adder.py'}:Adder", problems_file(tmp_path / "problems.jsonl", range(1, 4))


def run_json(args, capsys) -> tuple[int, dict]:
    code = run_cli([*args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


def test_filter_json_is_the_runs_as_dict_with_the_keys_it_always_had(setup, capsys):
    tmp_path, engine, problems = setup
    code, data = run_json(
        ["filter", str(problems), "--student", engine, "--k", "2", "--out", str(tmp_path / "pool.parquet")], capsys
    )
    assert code == 0 and set(data) == FILTER_KEYS
    assert (data["problems"], data["selected"], data["generated"]) == (3, 3, 6)
    assert data["output"] == str(tmp_path / "pool.parquet") and data["empty"] is None


def test_filter_prints_its_tables_and_an_empty_pool_ends_with_one_error_line(setup, capsys):
    tmp_path, engine, problems = setup
    assert (
        run_cli(["filter", str(problems), "--student", engine, "--k", "2", "--out", str(tmp_path / "pool.parquet")])
        == 0
    )
    out = capsys.readouterr().out
    assert "filter: problems per drop reason" in out and "RL pool:" in out and "per source" in out
    # a band no pass rate of 0.5 is inside: nothing to write; the tables are still printed, then the error
    code = run_cli(
        [
            "filter",
            str(problems),
            "--student",
            engine,
            "--k",
            "2",
            "--band",
            "0.6,1",
            "--out",
            str(tmp_path / "none.parquet"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and "dropped_out_of_band" in captured.out and "RL pool:" not in captured.out
    assert captured.err.count("error:") == 1 and "report:" in captured.err
    # the same empty band over the first pool: it and its card are removed, not left looking current (issue 41)
    code = run_cli(
        [
            "filter",
            str(problems),
            "--student",
            engine,
            "--k",
            "2",
            "--band",
            "0.6,1",
            "--out",
            str(tmp_path / "pool.parquet"),
        ]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "the RL pool is empty" in err and "the earlier set there was removed" in err
    assert not (tmp_path / "pool.parquet").exists() and not (tmp_path / "pool.README.md").exists()


def test_collect_and_eval_json_are_their_results(setup, capsys):
    tmp_path, engine, problems = setup
    code, collected = run_json(
        ["collect", str(problems), "--teacher", engine, "--samples", "2", "--out", str(tmp_path / "run")], capsys
    )
    assert (
        code == 0
        and (collected["total"], collected["correct"]) == (6, 3)
        and collected["run_dir"] == str(tmp_path / "run")
    )
    benchmark = problems_file(tmp_path / "bench.jsonl", range(10, 13))  # questions the engine has not seen
    code, report = run_json(
        ["eval", f"adder={engine}", str(benchmark), "--k", "2", "--out", str(tmp_path / "eval")], capsys
    )
    assert code == 0 and set(report) == {"settings", "results", "plots", "comparisons"}
    assert [(r["model"], r["avg@2"]) for r in report["results"]] == [("adder", 0.5)]


def test_a_first_run_prints_our_lines_whole_and_no_library_progress_bars(tmp_path, tiny_model_dir):
    # as in a log file or CI: stdout is a pipe, so rich lays out 80 columns
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "HF_HUB_DISABLE_PROGRESS_BARS")}
    command = [sys.executable, "-m", "agentdata.cli.app", "collect", "--teacher", f"hf:{tiny_model_dir}"]
    command += ["--limit", "1", "--samples", "1", "--max-new-tokens", "8", "--out", str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, env={**env, "PYTHONPATH": str(root)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    header = next(line for line in done.stdout.splitlines() if line.startswith("collect 1 problems"))
    assert header.endswith(f"→ {tmp_path / 'run'}") and len(header) > 80  # one line, not folded at 80
    assert "Loading weights" not in done.stderr and "it/s]" not in done.stderr, done.stderr[-2000:]
    assert "Warning" not in done.stderr, done.stderr[-2000:]


def test_train_json_is_one_document_each_stage_under_its_name(capsys):
    # (a run is tested end to end in test_train_cli; here, the shape every command shares)
    from types import SimpleNamespace

    from agentdata.cli.render import show
    from agentdata.train.run import TrainResult

    sft = SimpleNamespace(steps=3, seconds=1.5, model_dir="out/sft", final_loss=0.5, trained_tokens=120, history=[])
    rl = SimpleNamespace(
        steps=2,
        seconds=9.0,
        model_dir="out/rl",
        history=[{"step": 2, "accuracy": 0.25}],
        rollouts="policy",
        weight_pushes=0,
    )
    result = TrainResult([("sft", sft), ("rl", rl)])
    assert [stage for stage, _ in result] == ["sft", "rl"]
    show(result, True, lambda result: [])
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["sft", "rl"] and data["sft"]["final_loss"] == 0.5 and data["rl"]["accuracy"] == 0.25
