"""Difficulty profile: the student solves each problem k times through the collect runner.

The profile is an ordinary collect run dir in the output folder
(`<folder>/profile/<student>-<settings digest>/`), so it is the cache, keyed on what a
rollout depends on: the digest of the loop and sampling settings and, for a local model dir
(`hf:DIR`, `vllm:DIR`), of the model's files names the dir (retrained weights under the same
path are a new student), and inside it a rollout is reused only when its problem (question,
answer, tests) is unchanged and it did not end in an error. A second `filter` into the same folder, with another band or
another output name, reads it and generates nothing; a larger k only adds the missing
rollouts; a changed problem is profiled again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.agent.config import CollectConfig
from agentdata.agent.resume import plan_resume
from agentdata.agent.rundir import RunDir, settings_differences, settings_digest
from agentdata.agent.shards import Shard
from agentdata.engines.fingerprint import model_fingerprint
from agentdata.errors import UserError
from agentdata.filter.build import pass_rates
from agentdata.records import Problem, write_json

MODEL_FILE = "model.json"  # in a profile dir: which weights made its rollouts
FINGERPRINT_MEMO = "model_fingerprints.json"  # in a profile folder: digests of model dirs already hashed


def student_fingerprint(profiling: CollectConfig, profile_root: Path) -> str | None:
    """The digest of the student's weights when it is a local model dir (see engines/fingerprint.py)."""
    return model_fingerprint(profiling.model, memo=profile_root / FINGERPRINT_MEMO)


def profile_dir_for(out: Path, profiling: CollectConfig, fingerprint: str | None = None) -> Path:
    """One profile per student (its weights too) and settings in the pool's folder (`hf:/a/b` made file-safe);
    the settings as the run uses them (an unset protocol is the student's own: CollectConfig.for_run)."""
    root = out.parent / "profile"
    student = profiling.model
    digest = settings_digest(profiling.for_run().settings())
    fingerprint = fingerprint or student_fingerprint(profiling, root)
    if fingerprint is not None:
        digest = hashlib.sha1(f"{digest}-{fingerprint}".encode()).hexdigest()[:8]
    return root / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', student).strip('_')}-{digest}"


def claim_profile_dir(profile_dir: Path, profiling: CollectConfig, fingerprint: str | None) -> None:
    """Record which weights profile into `profile_dir`; refuse a dir another version of the model filled
    (a --profile-dir given twice for a retrained model would otherwise reuse the old model's rollouts),
    or one whose rollouts were made with other settings (reused silently when none is missing)."""
    student = profiling.model
    manifest = RunDir(profile_dir).manifest() if RunDir(profile_dir).shards() else None
    changed = settings_differences(manifest["settings"], profiling.settings()) if manifest else {}
    if changed:
        described = ", ".join(f"{key} {old!r} → {new!r}" for key, (old, new) in changed.items())
        raise UserError(
            f"{profile_dir}: its rollouts were made with other settings ({described}): give the "
            "same settings, or another --profile-dir"
        )
    record = profile_dir / MODEL_FILE
    if record.is_file():
        previous = json.loads(record.read_text(encoding="utf-8"))
        if previous.get("fingerprint") != fingerprint:
            raise UserError(
                f"{profile_dir}: its rollouts were made by another version of {previous.get('student')} "
                f"(model files {previous.get('fingerprint')}, now {fingerprint}): use another "
                "--profile-dir or move it aside"
            )
        return
    write_json(record, {"student": student, "fingerprint": fingerprint})


NO_RATES_SCHEMA = {
    "problem_id": pl.String,
    "pass_rate": pl.Float64,
    "n_rollouts": pl.Int64,
    "n_errors": pl.Int64,
    "pass_rate_low": pl.Float64,
    "pass_rate_high": pl.Float64,
}


def profile_rates(profile_dir: Path, k: int | None = None) -> pl.DataFrame:
    """Pass rates in the profile run dir; an empty table when it does not exist yet (a fresh
    folder, a new --profile-dir) or holds no shard, rather than a missing-file error."""
    if not RunDir(profile_dir).shards():
        return pl.DataFrame(schema=NO_RATES_SCHEMA)
    return pass_rates([profile_dir], k=k)


def missing_rollouts(problems: Sequence[Problem], profile_dir: Path, k: int, shard: Shard | None = None) -> int:
    """How many student rollouts must still be generated (or redone) for every problem to have k (of those
    the shard holds, with one)."""
    if shard is not None:
        problems = shard.select(problems)
    done = RunDir(profile_dir, shard).done_table()
    return len(plan_resume(list(problems), k, done, retry_errors=True).work)


def profile(
    problems: Sequence[Problem], profile_dir: Path, config: CollectConfig, engine: Any = None
) -> tuple[pl.DataFrame, int]:
    """Pass rates over `config.samples` (k) rollouts per problem by `config.model` (the student),
    generating only what the cache lacks. Returns (pass-rate table, rollouts generated now).
    """
    k = config.samples
    needed = missing_rollouts(problems, profile_dir, k, config.sharding.shard)
    if needed:
        from agentdata.agent.runner import collect

        collect(list(problems), profile_dir, config, engine=engine)
    wanted = pl.Series([problem.id for problem in problems], dtype=pl.String).implode()
    rates = profile_rates(profile_dir, k=k).filter(pl.col("problem_id").is_in(wanted))
    return rates, needed
