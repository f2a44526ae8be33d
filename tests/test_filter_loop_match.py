"""filter's profile is keyed on the student's weights, records its loop settings in the pool, and warns
when they are not the ones GRPO samples with."""

from __future__ import annotations

import json
import os

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.engines.defaults import DEFAULT_ENGINE
from agentdata.engines.fingerprint import model_fingerprint
from agentdata.errors import UserError
from agentdata.filter.build import PoolConfig
from agentdata.filter.loop_match import grpo_default_loop, recorded_profile
from agentdata.filter.profile import FINGERPRINT_MEMO, profile_dir_for
from agentdata.filter.run import default_profiling, run_filter
from tests.test_filter import crafted_problems


def fake_collect_writing(problems, correct_per_problem: int, calls: list):
    """A stand-in for the collect runner: k rollouts per problem (of these very problems, so a rerun finds
    them in the cache), the first `correct_per_problem` correct."""

    def fake_collect(problem_list, out_dir, config, engine=None):
        from dataclasses import replace

        from agentdata.records import Trajectory, write_records
        from tests.curate_fixtures import trajectory

        calls.append((out_dir, config.model))
        rows = [
            replace(
                trajectory(f"{p.id}-{i}", problem_id=p.id, question=p.question, correct=i < correct_per_problem),
                answer=p.answer,
            )
            for p in problem_list
            for i in range(config.samples)
        ]
        write_records(rows, out_dir / "trajectories" / f"part-{len(calls):05d}.parquet", Trajectory)

    return fake_collect


def fake_model_dir(path, weights: bytes = b"weights-1"):
    """Enough of a model dir for its identity: a config and a weights file (nothing loads it)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "model.safetensors").write_bytes(weights)
    (path / "metrics.jsonl").write_text('{"step": 1, "seconds": 3.2}\n')  # training bookkeeping: not the model
    return path


def test_the_profile_dir_follows_the_students_weights_not_its_path(tmp_path):
    model = fake_model_dir(tmp_path / "sft")
    out = tmp_path / "pools" / "pool.parquet"
    profiling = CollectConfig(model=f"hf:{model}")
    first = profile_dir_for(out, profiling)
    (model / "metrics.jsonl").write_text('{"step": 2}\n')
    (model / "model.safetensors").write_bytes(b"weights-1")  # rewritten, same content (a deterministic rerun)
    assert profile_dir_for(out, profiling) == first
    (model / "model.safetensors").write_bytes(b"weights-2")  # retrained under the same path
    assert profile_dir_for(out, profiling) != first
    # a spec that names no local dir keys on the spec and settings only, as before
    assert profile_dir_for(out, CollectConfig()).name.startswith("smollm2-")


def test_an_unchanged_model_dir_is_not_hashed_again(tmp_path):
    # The memo trusts each file's size and modification time: new bytes under the old stamp are not
    # read (the digest stays), a new stamp is (the digest follows the bytes).
    model, memo = fake_model_dir(tmp_path / "sft"), tmp_path / FINGERPRINT_MEMO
    digest = model_fingerprint(f"hf:{model}", memo=memo)
    weights = model / "model.safetensors"
    stamp = (weights.stat().st_atime_ns, weights.stat().st_mtime_ns)
    weights.write_bytes(b"weights-2")  # the same size
    os.utime(weights, ns=stamp)
    assert model_fingerprint(f"hf:{model}", memo=memo) == digest
    os.utime(weights, ns=(stamp[0], stamp[1] + 10**9))
    rehashed = model_fingerprint(f"hf:{model}", memo=memo)
    assert rehashed != digest and rehashed == model_fingerprint(f"hf:{fake_model_dir(tmp_path / 'b', b'weights-2')}")


def test_a_given_profile_dir_refuses_rollouts_of_another_version_of_the_model(tmp_path, monkeypatch):
    import agentdata.agent.runner as collect_module

    problems, calls = crafted_problems(1), []
    monkeypatch.setattr(collect_module, "collect", fake_collect_writing(problems, 2, calls))
    model = fake_model_dir(tmp_path / "sft")
    profiling = CollectConfig(model=f"hf:{model}", samples=2, loop=LoopConfig(temperature=1.0))
    config, profile_dir = PoolConfig(embedding="tfidf"), tmp_path / "profile-here"
    run_filter(problems, tmp_path / "pool.parquet", config, profiling, profile_dir=profile_dir)
    assert run_filter(problems, tmp_path / "pool.parquet", config, profiling, profile_dir=profile_dir).generated == 0
    (model / "model.safetensors").write_bytes(b"retrained")
    with pytest.raises(UserError, match="another version of"):
        run_filter(problems, tmp_path / "pool.parquet", config, profiling, profile_dir=profile_dir)
    assert len(calls) == 1


def test_the_pool_records_its_profile_and_warns_when_grpo_samples_otherwise(tmp_path, monkeypatch):
    import agentdata.agent.runner as collect_module

    problems = crafted_problems(1)
    monkeypatch.setattr(collect_module, "collect", fake_collect_writing(problems, 2, []))
    matched = run_filter(problems, tmp_path / "pool.parquet", PoolConfig(embedding="tfidf"), default_profiling())
    assert matched.warnings == []
    recorded = recorded_profile(matched.output)
    assert recorded["student"] == DEFAULT_ENGINE and recorded["k"] == 4 and recorded["loop"] == grpo_default_loop()

    other = CollectConfig(samples=4, loop=LoopConfig(temperature=0.7, max_new_tokens=1024))
    run = run_filter(problems, tmp_path / "cold.parquet", PoolConfig(embedding="tfidf"), other)
    [warning] = run.warnings
    assert "temperature 0.7 (GRPO: 1.0)" in warning and "max_new_tokens 1024 (GRPO: 512)" in warning
    assert json.loads(run.report.read_text())["warnings"] == [warning]
    assert recorded_profile(run.output)["loop"]["temperature"] == 0.7


def test_cli_filter_profiles_at_grpos_temperature_and_warns_otherwise(tmp_path, monkeypatch, capsys):
    import agentdata.agent.runner as collect_module
    from tests.cli_helpers import run_cli

    problems = crafted_problems(1)
    monkeypatch.setattr(collect_module, "collect", fake_collect_writing(problems, 1, []))
    problems_file = tmp_path / "problems.jsonl"
    problems_file.write_text("".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in problems))
    args = ["filter", str(problems_file), "--k", "2", "embedding=tfidf"]
    assert run_cli([*args, "--out", str(tmp_path / "a.parquet")]) == 0
    assert "warning" not in capsys.readouterr().out
    assert recorded_profile(tmp_path / "a.parquet")["loop"]["temperature"] == 1.0
    assert run_cli([*args, "--out", str(tmp_path / "b.parquet"), "temperature=0.6"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert len(lines) == 1 and "temperature 0.6 (GRPO: 1.0)" in lines[0]


def test_a_given_profile_dir_made_with_other_settings_is_refused_even_when_nothing_is_missing(tmp_path):
    from agentdata.agent.rundir import RunDir
    from tests.test_filter import write_profile

    problems, profile_dir = crafted_problems(1), tmp_path / "collect"
    write_profile(profile_dir, problems, 4, [1, 2, 3])
    settings = CollectConfig(loop=LoopConfig(temperature=0.7)).for_run().settings()  # as collect records them
    RunDir(profile_dir).write_manifest({"settings": settings})
    with pytest.raises(UserError, match=r"other settings \(temperature 0.7 → 1.0\)"):
        run_filter(
            problems,
            tmp_path / "pool.parquet",
            PoolConfig(embedding="tfidf"),
            default_profiling(),
            profile_dir=profile_dir,
        )
    same = CollectConfig(samples=4, loop=LoopConfig(temperature=0.7))
    assert (
        run_filter(
            problems, tmp_path / "pool.parquet", PoolConfig(embedding="tfidf"), same, profile_dir=profile_dir
        ).generated
        == 0
    )
