"""Sharded runs (`--shard I/N`): a fixed split by problem id, parts that never step on each other, read as one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from agentdata.agent.journal import Journal
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import CollectConfig, collect
from agentdata.agent.shard_status import FINISHED, MISSING, UNFINISHED, read_sharded
from agentdata.agent.shards import Shard, shard_index
from agentdata.errors import UserError
from agentdata.records import Problem
from agentdata.settings import SettingError, build
from tests.fakes import InProcessSandbox, ScriptedEngine

PROBLEMS = [Problem(f"What is 6 times 7? (variant {i})", "42", id=f"q{i}") for i in range(12)]


def run_part(out, shard, problems=PROBLEMS, engine=None, **settings):
    values = {"model": "scripted", "samples": 2, "concurrency": 2, "shard_size": 3, **settings}
    if shard is not None:
        values["shard"] = shard
    config = build(CollectConfig, values)
    return collect(problems, out, config, engine=engine or ScriptedEngine(), sandbox=InProcessSandbox())


def ids(run: RunDir) -> list[str]:
    return [t.id for t in run.trajectories()]


def test_the_split_is_by_problem_id_fixed_and_covers_every_problem_once():
    owners = [[Shard(i, 3).owns(p.id) for i in range(3)] for p in PROBLEMS]
    assert all(sum(row) == 1 for row in owners)
    assert [shard_index(p.id, 3) for p in PROBLEMS] == [shard_index(p.id, 3) for p in PROBLEMS[::-1]][::-1]
    here = [shard_index(p.id, 7) for p in PROBLEMS]
    script = "from agentdata.agent.shards import shard_index; print([shard_index(f'q{i}', 7) for i in range(12)])"
    elsewhere = subprocess.run(  # another process, another string hash seed: the same split (a digest)
        [sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": "123"}, capture_output=True, text=True
    )
    assert elsewhere.stdout.strip() == str(here) and len(set(here)) > 3
    selected = [p.id for i in range(3) for p in Shard(i, 3).select(PROBLEMS)]
    assert sorted(selected) == sorted(p.id for p in PROBLEMS)
    assert Shard(1, 3).select(PROBLEMS) == Shard(1, 3).select(PROBLEMS[:5] + PROBLEMS[5:])  # order kept


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3/3", "counts from 0 to N-1: 3 is not one of 0..2"),
        ("1", "expected I/N"),
        ("a/4", "two whole numbers"),
        ("0/0", "needs 1 <= N"),
        ("-1/4", "counts from 0"),
        ("1.5/4", "two whole numbers"),
    ],
)
def test_a_bad_shard_is_one_line_naming_it(text, message):
    with pytest.raises(SettingError, match=message) as error:
        build(CollectConfig, {"shard": text})
    assert "shard" in str(error.value) and "\n" not in str(error.value)


def test_parts_fill_one_run_dir_each_in_files_of_its_own_and_read_as_one(tmp_path):
    out = tmp_path / "run"
    summaries = [run_part(out, f"{i}/3") for i in range(3)]
    assert sum(s.new for s in summaries) == 24
    whole = RunDir(out)
    assert sorted(ids(whole)) == sorted(f"q{i}-{s}" for i in range(12) for s in range(2))
    for index in range(3):
        part = RunDir(out, Shard(index, 3))
        mine = {t.problem_id for t in part.trajectories()}
        assert mine == {p.id for p in Shard(index, 3).select(PROBLEMS)}
        assert all(path.name.startswith(f"shard-{index:05d}-of-00003.part-") for path in part.shards())
        assert part.manifest()["shard"] == f"{index}/3" and part.manifest()["expected"] == 2 * len(mine)
        assert json.loads(part.stats_path.read_text())["total"] == 2 * len(mine)
    assert not (out / "manifest.json").exists() and not (out / "journal.jsonl").exists()
    status = read_sharded(out)
    assert status.complete and [p.state for p in status.parts] == [FINISHED] * 3
    assert whole.manifest()["shards"] == 3 and whole.manifest()["settings"]["samples"] == 2
    # without --shard: read as one run, nothing generated
    engine = ScriptedEngine()
    summary = run_part(out, None, engine=engine)
    assert summary.total == 24 and summary.new == 0 and not engine.requests


def test_each_part_resumes_on_its_own(tmp_path):
    out = tmp_path / "run"
    run_part(out, "0/2")
    again = ScriptedEngine()
    assert run_part(out, "0/2", engine=again).new == 0 and not again.requests
    assert run_part(out, "1/2").new == 2 * len(Shard(1, 2).select(PROBLEMS))


def test_missing_and_unfinished_parts_are_named_and_an_unsharded_run_refuses_to_guess(tmp_path):
    out = tmp_path / "run"
    run_part(out, "0/4")
    run_part(out, "1/4")
    part = RunDir(out, Shard(1, 4))
    kept = part.trajectories()[0]
    part.remove_rows({kept.id})
    journal = Journal(part.journal_path, part.manifest()["settings"])  # a killed run: one row only in its journal
    journal.append(kept)
    journal.handle.close()
    status = read_sharded(out)
    states = {p.shard: p.state for p in status.parts}
    assert states == {"0/4": FINISHED, "1/4": UNFINISHED, "2/4": MISSING, "3/4": MISSING}
    assert status.parts[1].only_in_journal == 1
    expected = status.parts[1].expected
    assert f"unfinished: 1/4 ({expected} of {expected} trajectories)" in status.line()
    assert "missing (never started): 2/4, 3/4" in status.line()
    with pytest.raises(UserError, match=r"trajectories still to make \(4 shards: 1 finished.*missing.*--shard I/4"):
        run_part(out, None)
    assert len(RunDir(out).journaled()) == 1  # every part's journal is read with the run


def test_a_part_started_with_other_settings_or_another_split_is_refused(tmp_path):
    out = tmp_path / "run"
    run_part(out, "0/2")
    with pytest.raises(UserError, match=r"shard 0/2 was started with other settings \(temperature: 0.7 → 0.2\)"):
        run_part(out, "1/2", temperature=0.2)
    with pytest.raises(UserError, match=r"split 2 ways, and this is --shard 1/3: give --shard I/2"):
        run_part(out, "1/3")
    assert not list(out.glob("shard-00001-*")) and not list(out.glob("trajectories/shard-00001-*"))
    assert run_part(out, "1/2", samples=3).new > 0  # samples is no setting a trajectory depends on


def test_sharded_and_unsharded_runs_never_share_a_dir(tmp_path):
    run_part(tmp_path / "plain", None)
    with pytest.raises(UserError, match="holds a run that is not sharded: --shard 0/2 needs another --out"):
        run_part(tmp_path / "plain", "0/2")
    run_part(tmp_path / "sharded", "0/2")
    run = RunDir(tmp_path / "sharded")
    with pytest.raises(UserError, match="holds a sharded run"):
        run.prepare({"teacher": "scripted"}, {})


def test_a_part_drops_only_its_own_unfinished_writes(tmp_path):
    out = tmp_path / "run"
    run_part(out, "0/2")
    sibling_temp = out / "trajectories" / ".shard-00001-of-00002.part-00000.parquet.abc.tmp"
    own_temp = out / "trajectories" / ".shard-00000-of-00002.part-00009.parquet.abc.tmp"
    sibling_temp.write_bytes(b"half")
    own_temp.write_bytes(b"half")
    run_part(out, "0/2")
    assert sibling_temp.exists() and not own_temp.exists()


def test_a_part_with_no_problems_is_finished_at_once(tmp_path):
    out = tmp_path / "run"
    lonely = [PROBLEMS[0]]
    owner = shard_index("q0", 2)
    assert run_part(out, f"{1 - owner}/2", problems=lonely).new == 0
    assert read_sharded(out).parts[1 - owner].state == FINISHED
    run_part(out, f"{owner}/2", problems=lonely)
    assert read_sharded(out).complete and pq.read_table(RunDir(out).shards()[0]).num_rows == 2


# ------------------------------------------------------------------ eval and filter, shard by shard
def _benchmark(tmp_path):
    path = tmp_path / "bench.jsonl"
    rows = [{"question": f"What is 6*7? (take {i})", "answer": "42" if i % 3 else "7"} for i in range(9)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_eval_makes_one_shard_of_every_run_then_reports_from_all_of_them(tmp_path):
    from agentdata.agent.config import LoopConfig, ShardingConfig
    from agentdata.evaluation.runner import EvalConfig, run_eval
    from agentdata.problems import load_problems

    bench = _benchmark(tmp_path)

    def run(shard, engine=None):
        sharding = ShardingConfig(shard=Shard.parse(shard)) if shard else ShardingConfig()
        config = EvalConfig(samples=2, concurrency=2, loop=LoopConfig(protocol="hermes"), sharding=sharding)
        made = engine or ScriptedEngine()
        return run_eval(["scripted"], [bench], tmp_path / "eval", config, lambda spec: made, InProcessSandbox())

    first = run("0/2")
    assert first.shard == "0/2" and not first.results and not (tmp_path / "eval" / "report.json").exists()
    owned = Shard(0, 2).select(load_problems(bench))
    assert first.shard_runs[0]["generated"] == 2 * len(owned) and 0 < len(owned) < 9
    with pytest.raises(UserError, match=r"still to make \(2 shards: 1 finished; missing \(never started\): 1/2\)"):
        run(None)
    run("1/2")
    idle = ScriptedEngine()
    report = run(None, idle)
    assert not idle.requests and report.results[0].metrics.num_responses == 18
    assert report.results[0].metrics.avg_at_k == pytest.approx(6 / 9)  # the gold of every third is 7: wrong
    unsharded = EvalConfig(samples=2, concurrency=2, loop=LoopConfig(protocol="hermes"))
    whole = run_eval(
        ["scripted"], [bench], tmp_path / "plain", unsharded, lambda spec: ScriptedEngine(), InProcessSandbox()
    )
    assert whole.results[0].metrics == report.results[0].metrics


def test_filter_profiles_shard_by_shard_and_builds_the_pool_from_every_shard(tmp_path):
    from agentdata.agent.config import LoopConfig, ShardingConfig
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import profile_student, run_filter

    problems = [Problem(f"What is 6*7? (take {i})", "42" if i % 3 else "7", id=f"p{i}") for i in range(9)]
    out = tmp_path / "pool.parquet"
    pool = PoolConfig(embedding="tfidf")

    def profiling(shard=None):
        sharding = ShardingConfig(shard=Shard.parse(shard)) if shard else ShardingConfig()
        return CollectConfig(model="scripted", samples=2, loop=LoopConfig(protocol="hermes"), sharding=sharding)

    with pytest.raises(UserError, match="profiles one shard"):
        run_filter(problems, out, pool, profiling("0/2"), engine=ScriptedEngine())
    part = profile_student(problems, out, pool, profiling("0/2"), engine=ScriptedEngine())
    assert part.shard == "0/2" and set(part.rates["problem_id"]) == {p.id for p in Shard(0, 2).select(problems)}
    assert part.generated == 2 * part.rates.height
    with pytest.raises(
        UserError, match=r"sharded run with \d+ trajectories still to make.*missing \(never started\): 1/2"
    ):
        run_filter(problems, out, pool, profiling(), engine=ScriptedEngine())
    profile_student(problems, out, pool, profiling("1/2"), engine=ScriptedEngine())
    idle = ScriptedEngine()
    built = run_filter(problems, out, pool, profiling(), engine=idle)
    assert not idle.requests and built.generated == 0 and built.profile_dir == part.profile_dir
    rates = dict(built.result.profiled.select("problem_id", "pass_rate").iter_rows())
    assert rates == {p.id: (1.0 if p.answer == "42" else 0.0) for p in problems}  # every shard's, read as one


def test_no_output_lands_on_a_part_of_a_sharded_input_run(tmp_path):
    from agentdata.outputs import check_output_file

    out = tmp_path / "run"
    run_part(out, "1/2")
    manifest = out / "shard-00001-of-00002.manifest.json"
    with pytest.raises(UserError, match="is shard-00001-of-00002.manifest.json of the input"):
        check_output_file(manifest, "--out", (".json",), inputs=[out])
    with pytest.raises(UserError, match="inside the run dir .* trajectories/ folder"):
        check_output_file(out / "trajectories" / "sft.parquet", "--out", (".parquet",))


def test_regrade_reads_every_part_and_writes_one_unsharded_run(tmp_path):
    from agentdata.regrade.run import regrade

    out = tmp_path / "run"
    for index in range(2):
        run_part(out, f"{index}/2")
    fixed = [Problem(p.question, "41" if p.id == "q3" else "42", id=p.id) for p in PROBLEMS]
    result = regrade(out, tmp_path / "regraded", fixed, sandbox=InProcessSandbox())
    regraded = RunDir(tmp_path / "regraded")
    assert not regraded.sharded() and len(regraded.trajectories()) == 24
    assert {t.id for t in regraded.trajectories() if not t.correct} == {"q3-0", "q3-1"}
    assert result.run_dir == tmp_path / "regraded"


def test_an_openai_teacher_with_its_model_named_is_the_same_whatever_servers_serve_it():
    from agentdata.agent.rundir import settings_differences

    one = {"teacher": "openai:http://node-0:8000/v1", "model": "qwen", "temperature": 0.7}
    other = {**one, "teacher": "openai:http://node-1:8000/v1,http://node-2:8000/v1"}
    assert settings_differences(one, other) == {}  # each machine's shard on its own replicas of the model
    assert settings_differences(one, {**other, "model": "llama"}) == {"model": ("qwen", "llama")}
    unnamed = {key: value for key, value in one.items() if key != "model"}  # the server says which model
    assert "teacher" in settings_differences(unnamed, {**unnamed, "teacher": other["teacher"]})
    assert "teacher" in settings_differences(one, {**one, "teacher": "hf:/models/qwen"})


def test_the_viewer_opens_a_sharded_run_as_one_and_says_what_is_missing(tmp_path):
    from agentdata.view.catalog import open_artifacts
    from agentdata.view.pages import notes

    out = tmp_path / "run"
    run_part(out, "0/2")
    artifact = next(iter(open_artifacts([out])))
    owned = 2 * len(Shard(0, 2).select(PROBLEMS))
    assert artifact.kind == "run" and len(artifact.rows) == owned
    assert any("not complete" in line and "missing (never started): 1/2" in line for line in notes(artifact))
    run_part(out, "1/2")
    artifact = next(iter(open_artifacts([out])))
    assert len(artifact.rows) == 24
    assert any(line == "a sharded run of 2 shards: 2 finished" for line in notes(artifact))


def test_a_shard_copied_into_a_second_part_is_read_once(tmp_path):
    """Issue 41: a shard file copied into another part's name was read twice (17 rows for 12). Parts split the
    problems, so a file whose ids were all read in another part is a copy, left out, wherever it sorts."""
    import shutil

    import polars as pl

    from agentdata.agent.rundir import shard_paths
    from agentdata.agent.shard_files import scan_shards
    from agentdata.curate import CurateConfig, curate
    from agentdata.view.catalog import open_artifacts

    out = tmp_path / "run"
    for index in range(2):
        run_part(out, f"{index}/2", samples=1, shard_size=100)
    first, second = sorted((out / "trajectories").glob("shard-*"))
    shutil.copy(first, out / "trajectories" / "shard-00001-of-00002.part-00001.parquet")
    assert scan_shards(shard_paths([out])).select(pl.len()).collect().item() == 12
    assert curate([out], tmp_path / "sft.parquet", CurateConfig()).input_rows == 12
    assert len(next(iter(open_artifacts([out]))).rows) == 12
    shutil.copy(second, out / "trajectories" / "shard-00000-of-00002.part-00001.parquet")  # and back, sorted first
    assert scan_shards(shard_paths([out])).select(pl.len()).collect().item() == 12


def test_two_parts_merged_into_one_file_count_each_trajectory_once(tmp_path):
    """A part's file that holds some of another part's rows beside its own (overlapping shards merged into one
    file) is no whole copy: it was read in full (17 trajectories for 12). Every reader counts each id once."""
    import pyarrow as pa

    from agentdata.agent.inspection import inspect_path
    from agentdata.curate import CurateConfig, curate
    from agentdata.regrade import regrade
    from agentdata.view.catalog import open_artifacts

    out = tmp_path / "run"
    for index in range(2):
        run_part(out, f"{index}/2", samples=1, shard_size=100)
    first, second = sorted((out / "trajectories").glob("shard-*"))
    own, other = pq.read_table(second), pq.read_table(first)
    merged = pa.concat_tables([own.slice(0, 1), other.slice(0, 5)])  # one of its own, five of part 0's
    pq.write_table(merged, out / "trajectories" / "shard-00001-of-00002.part-00001.parquet")
    assert inspect_path(out).as_dict()["trajectories"] == 12
    assert regrade(out, tmp_path / "regraded").trajectories == 12
    assert len(next(iter(open_artifacts([out]))).rows) == 12
    curated = curate([out], tmp_path / "sft.parquet", CurateConfig())
    assert (curated.input_rows, curated.kept_rows, curated.counts.get("duplicate")) == (12, 12, None)


def test_two_runs_of_the_same_problems_are_two_sets_of_trajectories_for_curate(tmp_path):
    # ids are `PROBLEM-SAMPLE` in every run: two teachers' runs of the same problems hold the same ids, and
    # each is its own trajectory (only within one run does a later row of an id replace an earlier one)
    from agentdata.curate import CurateConfig, curate

    for name in ("a", "b"):
        run_part(tmp_path / name, None, samples=1, engine=ScriptedEngine(spec=f"teacher-{name}"))
    curated = curate([tmp_path / "a", tmp_path / "b"], tmp_path / "sft.parquet", CurateConfig(max_per_problem=0))
    assert curated.input_rows == 24
