"""Resume never gives a wrong or mixed result: content-keyed reuse, errors retried, settings never mixed."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.journal import Journal
from agentdata.agent.resume import unique_problems
from agentdata.agent.rundir import IDENTITY_KEYS, RunDir
from agentdata.agent.runner import RunBroken, collect
from agentdata.errors import UserError
from agentdata.records import Problem
from agentdata.settings import build
from tests.fakes import InProcessSandbox, ScriptedEngine

PROBLEMS = [Problem(f"What is 6 times 7? (variant {i})", "42", id=f"q{i}") for i in range(4)]


def run_collect(out, problems=PROBLEMS, engine=None, **settings):
    config = build(CollectConfig, {"model": "scripted", "samples": 2, "concurrency": 2, "shard_size": 3, **settings})
    return collect(problems, out, config, engine=engine or ScriptedEngine(), sandbox=InProcessSandbox())


def ids_on_disk(out) -> list[str]:
    return [t.id for t in RunDir(out).trajectories()]


def test_a_changed_answer_reruns_exactly_that_problem_and_says_so(tmp_path):
    run_collect(tmp_path / "run")
    changed = [replace(PROBLEMS[1], answer="999"), *PROBLEMS[:1], *PROBLEMS[2:]]
    engine = ScriptedEngine()
    summary = run_collect(tmp_path / "run", changed, engine=engine)
    assert summary.new == 2 and summary.stale == 2 and summary.retried == 0
    assert sorted(ids_on_disk(tmp_path / "run")) == sorted(f"q{i}-{s}" for i in range(4) for s in range(2))
    redone = [t for t in RunDir(tmp_path / "run").trajectories() if t.problem_id == "q1"]
    assert all(t.answer == "999" and not t.correct for t in redone) and summary.correct == 6


def test_changed_metadata_such_as_tests_counts_as_a_change(tmp_path):
    run_collect(tmp_path / "run", samples=1)
    changed = [replace(PROBLEMS[0], metadata={"tests": ["assert f(1) == 2"]}), *PROBLEMS[1:]]
    assert run_collect(tmp_path / "run", changed, samples=1).stale == 1


def test_error_rows_are_retried_and_replaced_unless_asked_not_to(tmp_path):
    run_collect(tmp_path / "run", engine=ScriptedEngine(fail_on={0}))
    assert run_collect(tmp_path / "run", retry_errors=False).new == 0
    summary = run_collect(tmp_path / "run")
    ids = ids_on_disk(tmp_path / "run")
    assert summary.retried == 1 and summary.new == 1 and summary.finish_reasons == {"answer": 8}
    assert len(ids) == len(set(ids)) == 8
    run = RunDir(tmp_path / "run")
    assert all(run.shard_settings(shard)["temperature"] == 0.7 for shard in run.shards())  # rewritten shards too


def test_two_problems_sharing_an_id_with_different_content_are_refused_naming_both():
    clash = [PROBLEMS[0], Problem("Another question", "1", id="q0")]
    with pytest.raises(UserError, match=r"problems 1 and 2 share the id 'q0'.*question"):
        unique_problems(clash)
    assert unique_problems([PROBLEMS[0], PROBLEMS[0], PROBLEMS[1]]) == PROBLEMS[:2]


def test_settings_travel_with_the_shards_when_the_manifest_is_gone(tmp_path):
    run_collect(tmp_path / "run")
    RunDir(tmp_path / "run").manifest_path.unlink()
    with pytest.raises(UserError, match=r"temperature: 0.7 → 0.2.*part-00000.parquet"):
        run_collect(tmp_path / "run", temperature=0.2, protocol="codeblock")
    assert run_collect(tmp_path / "run").new == 0  # the same settings still resume


def test_a_setting_recorded_before_it_existed_is_not_compared_but_a_recorded_one_is(tmp_path):
    run_collect(tmp_path / "run")
    run = RunDir(tmp_path / "run")
    manifest = json.loads(run.manifest_path.read_text())
    del manifest["settings"]["tool_timeout"]
    run.write_manifest(manifest)
    for shard in run.shards():  # shards from before settings travelled with them: the manifest is the record
        pq.write_table(pq.read_table(shard).replace_schema_metadata({}), shard)
    run_collect(tmp_path / "run", tool_timeout=3.0)
    with pytest.raises(UserError, match="tool_timeout: 3.0 → 5.0"):
        run_collect(tmp_path / "run", tool_timeout=5.0)


def test_every_identity_setting_is_one_the_config_records():
    assert set(IDENTITY_KEYS) <= set(CollectConfig(model="x").settings())  # a renamed field must not slip out


def test_settings_compare_by_value_and_nan_is_refused_at_the_start(tmp_path):
    run_collect(tmp_path / "run", top_p=1)
    assert run_collect(tmp_path / "run", top_p=1.0).new == 0
    with pytest.raises((UserError, ValueError), match="top.p"):
        run_collect(tmp_path / "nan", top_p=float("nan"))
    assert not list((tmp_path / "nan").glob("trajectories/*.parquet"))


def test_a_failed_start_that_wrote_nothing_is_no_obstacle(tmp_path):
    failing = [Problem(f"FAIL {i}", "1", id=f"f{i}") for i in range(10)]
    with pytest.raises(RunBroken):
        run_collect(tmp_path / "run", failing, protocol="codeblock")
    assert RunDir(tmp_path / "run").done_ids() == set()
    assert run_collect(tmp_path / "run", protocol="hermes").new == 8


def test_a_journal_left_by_a_killed_run_becomes_a_shard_without_duplicates(tmp_path):
    run_collect(tmp_path / "run", samples=1)
    run = RunDir(tmp_path / "run")
    last_shard = run.shards()[-1]
    in_last = [t for t in run.trajectories() if t.id in {"q3-0"}]
    settings = json.loads(run.manifest_path.read_text())["settings"]
    journal = Journal(run.journal_path, settings)
    for trajectory in run.trajectories():  # a kill between a shard's rename and the journal's reset
        journal.append(trajectory)
    journal.handle.write('{"id": "cut short by the ki')  # a kill in the middle of a line
    journal.handle.flush()
    last_shard.unlink()  # so q3-0 exists only in the journal
    engine = ScriptedEngine()
    summary = run_collect(tmp_path / "run", samples=1, engine=engine)
    ids = ids_on_disk(tmp_path / "run")
    assert engine.requests == [] and summary.new == 0 and sorted(ids) == [f"q{i}-0" for i in range(4)]
    assert [t for t in run.trajectories() if t.id == "q3-0"] == in_last and not run.journal_path.exists()


def test_cli_refuses_a_file_with_two_problems_under_one_id(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        '{"id": "x", "question": "What is 1+1?", "answer": "2"}\n'
        '{"id": "x", "question": "What is 2+2?", "answer": "4"}\n'
    )
    code = run_cli(["collect", str(problems), "--out", str(tmp_path / "run"), "--teacher", "openai:http://127.0.0.1:9"])
    error = capsys.readouterr().err
    assert code == 2 and "rows 1 and 2 share the id 'x'" in " ".join(error.split())
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("retry_errors", [True, False])
def test_the_plan_sorts_every_row_on_disk_by_what_it_was_made_from(retry_errors):
    import polars as pl

    from agentdata.agent.resume import plan_resume, problem_hash

    problems = PROBLEMS[:3]
    digest = problem_hash(problems[0])
    done = pl.DataFrame(
        {  # q0: reused, changed, failed; q1: two rows older than the hash, one the same problem, one not
            "id": ["q0-0", "q0-1", "q0-2", "q1-0", "q1-1"],
            "problem_hash": [digest, "another-problem", digest, None, None],
            "question": [problems[0].question] * 3 + [problems[1].question, "an older question"],
            "answer": ["42"] * 5,
            "finish_reason": ["answer", "answer", "error", "answer", "answer"],
        }
    )
    plan = plan_resume(problems, 3, done, retry_errors)
    assert plan.stale == {"q0-1", "q1-1"} and plan.retried == ({"q0-2"} if retry_errors else set())
    redone = ["q0-1", *(["q0-2"] if retry_errors else []), "q1-1", "q1-2", "q2-0", "q2-1", "q2-2"]
    assert [f"{problem.id}-{index}" for problem, index in plan.work] == redone  # in problem, then sample order
    assert plan.reused == 9 - len(redone)
