import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import RunBroken, collect
from agentdata.errors import UserError
from agentdata.records import Problem
from agentdata.settings import build
from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

PROBLEMS = [Problem(f"What is 6 times 7? (variant {i})", "42", source=f"s{i % 2}") for i in range(6)]


def run_collect(out, engine=None, **settings):
    config = build(
        CollectConfig,
        {
            "model": "scripted",
            "samples": 2,
            "concurrency": 4,
            "shard_size": 3,
            "protocol": SCRIPTED_PROTOCOL,
            **settings,
        },
    )
    return collect(PROBLEMS, out, config, engine=engine or ScriptedEngine(), sandbox=InProcessSandbox())


def test_collect_writes_run_dir(tmp_path):
    summary = run_collect(tmp_path / "run")
    run = RunDir(tmp_path / "run")
    trajectories = run.trajectories()
    assert len(trajectories) == 12 and summary.total == 12 and summary.new == 12
    assert sorted(t.id for t in trajectories) == sorted(f"{p.id}-{i}" for p in PROBLEMS for i in range(2))
    assert summary.accuracy == 1.0 and summary.tool_calls == 12
    assert len(run.shards()) == 4  # 12 trajectories in shards of 3
    stats = json.loads(run.stats_path.read_text())
    assert stats["accuracy"] == 1.0 and stats["finish_reasons"] == {"answer": 12}
    manifest = json.loads(run.manifest_path.read_text())
    assert manifest["settings"]["teacher"] == "scripted" and manifest["problems"] == 6


def test_rerun_generates_nothing_and_duplicates_nothing(tmp_path):
    run_collect(tmp_path / "run")
    engine = ScriptedEngine()
    summary = run_collect(tmp_path / "run", engine=engine)
    assert engine.requests == [] and summary.new == 0 and summary.total == 12


def test_more_samples_extends_a_run(tmp_path):
    run_collect(tmp_path / "run")
    summary = run_collect(tmp_path / "run", samples=3)
    ids = [t.id for t in RunDir(tmp_path / "run").trajectories()]
    assert summary.new == 6 and len(ids) == len(set(ids)) == 18


def test_other_settings_are_refused(tmp_path):
    run_collect(tmp_path / "run")
    with pytest.raises(UserError, match="max_tool_calls: 4 → 2"):
        run_collect(tmp_path / "run", max_tool_calls=2)


def test_one_failure_is_recorded_and_the_run_goes_on(tmp_path):
    problems = PROBLEMS + [Problem("FAIL this one", "1")]
    config = CollectConfig(model="scripted", concurrency=2, loop=LoopConfig(protocol=SCRIPTED_PROTOCOL))
    summary = collect(problems, tmp_path / "run", config, engine=ScriptedEngine(), sandbox=InProcessSandbox())
    assert summary.total == 7 and summary.finish_reasons == {"answer": 6, "error": 1}
    failed = [t for t in RunDir(tmp_path / "run").trajectories() if t.finish_reason == "error"]
    assert failed[0].error == "server said 500"


def test_everything_failing_stops_with_a_clear_message_and_writes_nothing(tmp_path):
    problems = [Problem(f"FAIL {i}", "1") for i in range(20)]
    engine = ScriptedEngine()
    with pytest.raises(RunBroken, match=r"all failed \(model scripted\); first error: server said 500"):
        collect(
            problems,
            tmp_path / "run",
            CollectConfig(model="x", concurrency=2),
            engine=engine,
            sandbox=InProcessSandbox(),
        )
    assert len(engine.requests) < 20 and RunDir(tmp_path / "run").done_ids() == set()


def test_limit_and_duplicate_problems(tmp_path):
    summary = collect(
        PROBLEMS + PROBLEMS,
        tmp_path / "run",
        CollectConfig(model="x", limit=4),
        engine=ScriptedEngine(),
        sandbox=InProcessSandbox(),
    )
    assert summary.total == 4


KILLABLE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from agentdata.records import Problem
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from tests.fakes import InProcessSandbox, ScriptedEngine
    problems = [Problem(f"What is 6 times 7? ({{i}})", "42") for i in range(40)]
    config = CollectConfig(model="scripted", concurrency=2, shard_size=1)
    collect(problems, sys.argv[1], config, engine=ScriptedEngine(delay_s=float(sys.argv[2])),
            sandbox=InProcessSandbox())
""")


def test_kill_9_then_resume_loses_nothing_and_duplicates_nothing(tmp_path):
    script = tmp_path / "collect_script.py"
    script.write_text(KILLABLE.format(root=str(Path(__file__).resolve().parents[1])))
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, str(script), str(out), "0.05"])
    run = RunDir(out)
    deadline = time.time() + 60
    while len(run.shards()) < 5 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done_before = run.done_ids()
    assert 5 <= len(done_before) < 40
    subprocess.run([sys.executable, str(script), str(out), "0"], check=True, timeout=120)
    ids = [t.id for t in run.trajectories()]
    assert len(ids) == len(set(ids)) == 40 and done_before <= set(ids)
    assert not list((out / "trajectories").glob(".*.tmp"))


def _collect_cli(out, url, *extra):
    return [
        sys.executable,
        "-m",
        "agentdata.cli.app",
        "collect",
        "--out",
        str(out),
        "--teacher",
        f"openai:{url}",
        "--model",
        "fake-model",
        "--temperature",
        "0",
        "--protocol",
        "hermes",
        *extra,
    ]


def test_cli_collect_against_openai_server_runs_real_code(tmp_path):
    from bench.fake_openai_server import FakeOpenAIServer

    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(json.dumps({"question": f"6 times 7, take {i}?", "answer": "42"}) + "\n" for i in range(5))
    )
    with FakeOpenAIServer(latency=0.0) as server:
        command = _collect_cli(tmp_path / "run", server.url, "--limit", "3", "--samples", "2")
        result = subprocess.run(
            [*command[:4], str(problems), *command[4:]], capture_output=True, text=True, timeout=240
        )
    assert result.returncode == 0, result.stderr
    trajectories = RunDir(tmp_path / "run").trajectories()
    assert len(trajectories) == 6 and all(t.correct for t in trajectories)
    assert all(t.messages[3]["role"] == "tool" and t.messages[3]["content"] == "42" for t in trajectories)
    assert "accuracy" in result.stdout and "100.0%" in result.stdout


def test_cli_collect_sigterm_keeps_finished_trajectories(tmp_path):
    from bench.fake_openai_server import FakeOpenAIServer

    out = tmp_path / "run"
    with FakeOpenAIServer(latency=0.3) as server:
        process = subprocess.Popen(
            _collect_cli(out, server.url, "--concurrency", "2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.time() + 120
        while sum("<tool_response>" in json.dumps(r) for r in server.requests) < 4 and time.time() < deadline:
            time.sleep(0.05)  # at least two trajectories are past their tool call: some will have finished
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    done = RunDir(out).done_ids()
    assert process.returncode != 0 and len(done) >= 2  # finished ones were flushed, not lost


class _SlowToStart(ScriptedEngine):
    """Takes a while to be ready, as a model load or a managed server's start does."""

    label = "scripted (test)"

    async def ready(self) -> None:
        await asyncio.sleep(0.3)


def test_the_summary_gives_the_progress_lines_speed_and_names_the_engine(tmp_path, capsys):
    # the progress line counted from the first rollout, the summary over the whole run (engine start-up
    # included): one run read 1.89 traj/s live and 0.41 at the end. Both are over the time generating now.
    from rich.console import Console

    from agentdata.cli.views import collect_table
    from agentdata.events import listening

    events = []
    with listening(events.append):
        summary = run_collect(tmp_path / "run", engine=_SlowToStart())
    last = [event.stats for event in events if event.task == "collect" and event.kind == "advance"][-1]
    assert summary.new == 12 and summary.trajectories_per_s == pytest.approx(last["trajectories_per_s"], rel=1e-9)
    assert summary.tokens_per_s == pytest.approx(last["tokens_per_s"], rel=1e-9)
    assert 0 < summary.generating_s < summary.elapsed_s  # the start-up is in the whole run's time only
    assert summary.engine == "scripted (test)" and summary.as_dict()["engine"] == "scripted (test)"

    console = Console(record=True, width=140)
    console.print(collect_table(summary))
    text = console.export_text()
    assert "engine" in text and "scripted (test)" in text and "while generating" in text
