"""GRPO pools other than the band's, from the same profile: random, easy or hard problems, sized like the band.

The band's pool comes from `filter` itself (stages.profile_student). The others are the
comparisons the findings make against it, each of the same size so that only the choice differs:

- `random`: a seeded sample of the profiled problems;
- `easy`: the highest pass rates (the student solves them nearly always: groups that all agree);
- `hard`: the lowest (it nearly never does: groups that all fail);

ties broken by a seeded shuffle. The file has the band pool's columns and its profile record (the
Parquet metadata GRPO checks its loop settings against), so `train` reads it the same way.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from agentdata.records import Problem

POOL_RULES = ("random", "easy", "hard")


def pick(kind: str, pass_rates: dict[str, float | None], size: int, seed: int) -> list[str]:
    """The problem ids a rule picks (profiled problems only; an unprofiled one has no rate)."""
    if kind not in POOL_RULES:
        raise ValueError(f"unknown pool rule {kind!r}: {', '.join(POOL_RULES)}")
    rated = [pid for pid, rate in pass_rates.items() if rate is not None]
    random.Random(seed).shuffle(rated)  # the order a tie keeps, and the random pool itself
    if kind == "easy":
        rated.sort(key=lambda pid: -pass_rates[pid])
    elif kind == "hard":
        rated.sort(key=lambda pid: pass_rates[pid])
    return rated[:size]


def write_pool_like(
    kind: str,
    problems: Sequence[Problem],
    pass_rates: dict[str, float | None],
    size: int,
    seed: int,
    band_pool: str | None,
    folder: Path,
) -> Path:
    """Write `folder/pool.parquet` in the band pool's layout (prompt, answer, pass_rate, ...)."""
    from agentdata.filter.build import pool_rows
    from agentdata.records import atomic_write

    chosen = pick(kind, pass_rates, size, seed)
    by_id = {problem.id: problem for problem in problems}
    frame = pl.DataFrame(
        {
            "problem_id": chosen,
            "question": [by_id[pid].question for pid in chosen],
            "answer": [by_id[pid].answer for pid in chosen],
            "source": [by_id[pid].source for pid in chosen],
            "domain": [by_id[pid].domain for pid in chosen],
            "pass_rate": [float(pass_rates[pid]) for pid in chosen],
        }
    ).with_columns(
        pl.lit(None, dtype=pl.Int64).alias("n_rollouts"),
        pl.lit(None, dtype=pl.Float64).alias("pass_rate_low"),
        pl.lit(None, dtype=pl.Float64).alias("pass_rate_high"),
        pl.lit(-1, dtype=pl.Int64).alias("cluster"),
    )
    metadata = _profile_metadata(band_pool)
    path = folder / "pool.parquet"
    return atomic_write(path, lambda tmp: pool_rows(frame).write_parquet(tmp, metadata=metadata))


def _profile_metadata(band_pool: str | None) -> dict[str, str] | None:
    """The band pool's profile record, carried over: the same profile chose this pool."""
    if not band_pool:
        return None
    import pyarrow.parquet as pq

    from agentdata.filter.loop_match import POOL_METADATA_KEY

    metadata = pq.read_schema(band_pool).metadata or {}
    value = metadata.get(POOL_METADATA_KEY.encode())
    return {POOL_METADATA_KEY: value.decode()} if value else None
