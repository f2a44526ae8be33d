"""agentdata regrade: stored trajectories graded again against today's gold, nothing generated; it flips exactly
the verdicts whose gold changed, and its run is read by curate and resumed by collect like any other."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.agent.resume import HASH_KEY, problem_hash
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.curate import CurateConfig, curate
from agentdata.engines.base import Engine, Generation
from agentdata.errors import UserError
from agentdata.records import Problem, write_records
from agentdata.regrade import regrade
from tests.cli_helpers import run_cli
from tests.fakes import SCRIPTED_PROTOCOL, InProcessSandbox, ScriptedEngine

QUESTIONS = [
    "What is six times seven?",
    "Multiply the first two composite numbers and add thirty-four.",
    "What is the product of two and twenty-one?",
    "Solve for the root of x minus forty-one.",
    "Subtract one from forty-two.",
    "How many days do six weeks hold, minus one?",
]
# The engine answers 42 (what its code prints) everywhere: the first three are right, the last three wrong.
GOLDS = ["42", "42", "42", "41", "41", "41"]
# Today's gold: problem 1 turned out to be 41 (right -> wrong), problem 4 is 42 (wrong -> right), problem 2's
# gold is written differently but means the same (changed, no flip).
FIXED = ["42", "41", "42.0", "41", "42", "41"]


def problems(golds: list[str]) -> list[Problem]:
    return [
        Problem(question, gold, id=f"p{n}", source="ladder") for n, (question, gold) in enumerate(zip(QUESTIONS, golds))
    ]


def collected(tmp_path, samples: int = 2):
    config = CollectConfig(
        model="scripted", samples=samples, concurrency=4, shard_size=5, loop=LoopConfig(protocol=SCRIPTED_PROTOCOL)
    )
    collect(problems(GOLDS), tmp_path / "run", config, engine=ScriptedEngine(), sandbox=InProcessSandbox())
    return config


def test_a_regrade_flips_exactly_the_verdicts_whose_gold_changed(tmp_path):
    config = collected(tmp_path)
    before = {t.id: t for t in RunDir(tmp_path / "run").trajectories()}
    assert sum(t.correct for t in before.values()) == 6
    result = regrade(tmp_path / "run", tmp_path / "new", problems(FIXED))
    assert {(flip.problem_id, flip.was_correct, flip.now_correct) for flip in result.flips} == {
        ("p1", True, False),
        ("p4", False, True),
    }
    assert len(result.flips) == 4 and result.to_correct == 2 and result.to_wrong == 2  # two samples each
    assert result.gold_changed == 6 and result.regraded == 12 and result.not_in_problems == 0
    after = {t.id: t for t in RunDir(tmp_path / "new").trajectories()}
    assert after.keys() == before.keys()
    for trajectory_id, trajectory in after.items():
        old = before[trajectory_id]
        number = int(trajectory.problem_id[1:])
        assert trajectory.answer == FIXED[number] and trajectory.messages == old.messages  # nothing generated
        assert trajectory.correct == (FIXED[number] in ("42", "42.0"))
        assert trajectory.metadata["regrade"]["was_correct"] == old.correct
        assert trajectory.metadata[HASH_KEY] == problem_hash(problems(FIXED)[number])
    report = json.loads((tmp_path / "new" / "regrade.json").read_text())
    assert report["flipped_to_correct"] == 2 and len(report["flips"]) == 4

    # curate reads it like any run, and collect resumed on it with today's problems generates nothing
    sft = curate([tmp_path / "new"], tmp_path / "sft.parquet", CurateConfig(max_per_problem=0))
    assert sft.counts == {"incorrect": 6, "duplicate": 3}  # the scripted engine's two samples are the same text
    assert sorted(pl.read_parquet(tmp_path / "sft.parquet")["problem_id"]) == ["p0", "p2", "p4"]
    engine = ScriptedEngine()
    summary = collect(problems(FIXED), tmp_path / "new", config, engine=engine, sandbox=InProcessSandbox())
    assert engine.requests == [] and summary.new == 0 and summary.correct == 6


def test_without_new_gold_nothing_flips_and_errors_are_copied(tmp_path):
    config = CollectConfig(model="scripted", concurrency=2, loop=LoopConfig(protocol=SCRIPTED_PROTOCOL))
    failing = [*problems(GOLDS)[:2], Problem("FAIL this one", "1", id="bad")]
    collect(failing, tmp_path / "run", config, engine=ScriptedEngine(), sandbox=InProcessSandbox())
    result = regrade(tmp_path / "run", tmp_path / "new")
    assert result.flips == [] and result.copied_errors == 1 and result.regraded == 2 and result.gold_changed == 0
    errored = [t for t in RunDir(tmp_path / "new").trajectories() if t.finish_reason == "error"]
    assert errored[0].error == "server said 500" and "regrade" not in errored[0].metadata


def test_the_output_is_a_new_folder_and_a_killed_regrade_leaves_no_half_run(tmp_path, monkeypatch):
    collected(tmp_path, samples=1)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    with pytest.raises(UserError, match="not empty"):
        regrade(tmp_path / "run", tmp_path / "busy")
    import agentdata.regrade.run as module

    real = module._regrade_one
    calls = []

    def killed_midway(*args):
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(module, "_regrade_one", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        regrade(tmp_path / "run", tmp_path / "new", problems(FIXED), module.RegradeConfig(concurrency=1))
    assert not (tmp_path / "new").exists()  # the shards written so far are in the staging folder only
    monkeypatch.setattr(module, "_regrade_one", real)
    assert regrade(tmp_path / "run", tmp_path / "new", problems(FIXED)).trajectories == 6


class WritesAProgram(Engine):
    """A code answer: a program that doubles its input."""

    spec = "coder"

    async def generate(self, request):
        return Generation("Here it is.\n```python\nprint(int(input()) * 2)\n```", None, "stop", 10, 10)


def code_problem(expected: list[str]) -> Problem:
    tests = [{"input": f"{n}\n", "output": out, "testtype": "stdin"} for n, out in zip((3, 5), expected)]
    return Problem("Read n and print twice n.", json.dumps({"tests": tests}), id="double", domain="code", source="code")


def test_fixed_code_tests_flip_the_verdict(tmp_path):
    from agentdata.sandbox import open_sandbox

    config = CollectConfig(model="coder", loop=LoopConfig(protocol="hermes", max_tool_calls=0))
    with open_sandbox("local") as sandbox:
        collect([code_problem(["6\n", "11\n"])], tmp_path / "run", config, engine=WritesAProgram(), sandbox=sandbox)
        assert [t.correct for t in RunDir(tmp_path / "run").trajectories()] == [False]  # the second test was wrong
        result = regrade(tmp_path / "run", tmp_path / "new", [code_problem(["6\n", "10\n"])], sandbox=sandbox)
    (trajectory,) = RunDir(tmp_path / "new").trajectories()
    assert result.to_correct == 1 and trajectory.correct and trajectory.metadata["tests"]["passed"] == 2


def test_the_command_line(tmp_path, capsys):
    collected(tmp_path, samples=1)
    fixed = write_records(problems(FIXED), tmp_path / "fixed.jsonl", Problem)
    code = run_cli(
        ["regrade", str(tmp_path / "run"), "--problems", str(fixed), "--out", str(tmp_path / "new"), "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["flipped_to_correct"], summary["flipped_to_wrong"]) == (1, 1)
    for refused in (tmp_path / "run" / "trajectories" / "x", tmp_path / "run"):  # among its shards; not empty
        code = run_cli(["regrade", str(tmp_path / "run"), "--problems", str(fixed), "--out", str(refused)])
        out, err = capsys.readouterr()
        assert code == 2 and str(refused) in err and len(err.strip().splitlines()) == 1
    code = run_cli(["regrade", str(tmp_path / "run"), "--out", str(tmp_path / "again")])
    out, err = capsys.readouterr()
    assert code == 0 and "flipped wrong → correct" in out


def _kill_leaving_a_journal(run_dir) -> set[str]:
    """A killed collect: its last shard's trajectories only in the journal (finished, in no shard yet)."""
    from agentdata.agent.journal import Journal

    run = RunDir(run_dir)
    last_shard = run.shards()[-1]
    left = [t for t in run.trajectories() if t.id in set(pq.read_table(last_shard, columns=["id"])["id"].to_pylist())]
    journal = Journal(run.journal_path, json.loads(run.manifest_path.read_text())["settings"])
    for trajectory in left:
        journal.append(trajectory)
    journal.handle.close()  # killed: the journal stays
    last_shard.unlink()
    return {t.id for t in left}


def test_a_killed_runs_journal_is_regraded_with_its_shards(tmp_path, capsys):
    """Issue 41: regrade read only the shards; the trajectories a killed run left only in its journal (which
    inspect counts) were silently left out."""
    collected(tmp_path)  # 12 trajectories, shards of 5
    only_in_journal = _kill_leaving_a_journal(tmp_path / "run")
    result = regrade(tmp_path / "run", tmp_path / "new", problems(FIXED))
    assert result.trajectories == 12 and result.from_journal == len(only_in_journal) == 2
    regraded = {t.id: t for t in RunDir(tmp_path / "new").trajectories()}
    assert len(regraded) == 12 and all("regrade" in regraded[i].metadata for i in only_in_journal)
    assert json.loads((tmp_path / "new" / "regrade.json").read_text())["from_journal"] == 2
    code = run_cli(["regrade", str(tmp_path / "run"), "--out", str(tmp_path / "cli")])
    assert code == 0 and "only in the killed run's journal" in capsys.readouterr().out


def test_a_sharded_run_with_a_missing_part_is_named_as_curate_and_view_do(tmp_path, capsys):
    from agentdata.settings import build

    config = build(CollectConfig, {"model": "scripted", "shard": "0/2", "protocol": SCRIPTED_PROTOCOL})
    collect(problems(GOLDS), tmp_path / "run", config, engine=ScriptedEngine(), sandbox=InProcessSandbox())
    result = regrade(tmp_path / "run", tmp_path / "new")
    assert len(result.warnings) == 1 and "missing (never started): 1/2" in result.warnings[0]
    code = run_cli(["regrade", str(tmp_path / "run"), "--out", str(tmp_path / "cli")])
    assert code == 0 and "missing (never started): 1/2" in capsys.readouterr().out


def test_a_second_regrade_into_the_same_out_is_refused_while_the_first_writes(tmp_path, monkeypatch):
    """Issue 41: two regrades into one --out wrote into one staging folder (every row twice), then one rename
    failed with a traceback. The first holds the out's lock; the second is one line, and the first ends whole."""
    import threading

    import agentdata.regrade.run as module

    collected(tmp_path)
    real, grading, release = module._regrade_one, threading.Event(), threading.Event()

    def held(*args):
        grading.set()
        release.wait()
        return real(*args)

    monkeypatch.setattr(module, "_regrade_one", held)
    first: list = []
    worker = threading.Thread(target=lambda: first.append(regrade(tmp_path / "run", tmp_path / "new")))
    worker.start()
    grading.wait()
    try:
        monkeypatch.setattr(module, "_regrade_one", real)
        with pytest.raises(UserError, match="another regrade is writing it now"):
            regrade(tmp_path / "run", tmp_path / "new")
    finally:
        release.set()
        worker.join()
    assert first[0].trajectories == 12 and len(RunDir(tmp_path / "new").trajectories()) == 12
    with pytest.raises(UserError, match="is not empty"):
        regrade(tmp_path / "run", tmp_path / "new")
