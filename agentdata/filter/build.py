"""The RL pool: problems with a student pass rate -> band, decontam, dedup, diverse selection.

Library functions on polars tables, no model: `pass_rates` reads a profile run dir,
`build_pool` runs the named filter steps (`steps.py`) and the selection. Profiling itself
(the student's rollouts) is in `profile.py`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from agentdata.agent.rundir import shard_paths
from agentdata.agent.shard_files import scan_shards
from agentdata.errors import UserError
from agentdata.filter.confidence import with_intervals
from agentdata.filter.config import PoolConfig
from agentdata.filter.mix import mix_step
from agentdata.filter.steps import TooFewValidRollouts, pool_steps
from agentdata.records import Problem
from agentdata.steps import Step, StepResult, run_steps
from agentdata.steps.diversity import spread_order
from agentdata.steps.embed import cluster_labels, embed_texts
from agentdata.steps.text import normalised


@dataclass
class PoolResult:
    pool: pl.DataFrame  # the selected problems, agentdata columns plus `cluster`
    profiled: pl.DataFrame  # every problem with its pass rate (before the band)
    counts: dict[str, int]
    rejected: pl.DataFrame
    embedding: str


def problems_table(problems: Sequence[Problem]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "problem_id": [p.id for p in problems],
            "question": [p.question for p in problems],
            "answer": [p.answer for p in problems],
            "source": [p.source for p in problems],
            "domain": [p.domain for p in problems],
        },
        schema={name: pl.String for name in ("problem_id", "question", "answer", "source", "domain")},
    ).unique("problem_id", keep="first", maintain_order=True)


def pass_rates(run_dirs: Sequence[str | os.PathLike], k: int | None = None) -> pl.DataFrame:
    """Per problem, over its first `k` rollouts: `pass_rate` (share correct among the valid ones),
    `n_rollouts` (valid: ended without an engine or sandbox error) and `n_errors` (the others).

    A failure is not a wrong answer: an errored rollout counts in no pass rate. A rollout redone
    on resume (same id, a later shard) replaces the earlier one.
    """
    rollouts = scan_shards(shard_paths(run_dirs)).select("id", "problem_id", "correct", "finish_reason")
    rollouts = rollouts.unique("id", keep="last", maintain_order=True)
    if k is not None:
        rollouts = rollouts.filter(pl.int_range(pl.len()).over("problem_id") < k)
    failed = pl.col("finish_reason") == "error"
    grouped = rollouts.group_by("problem_id", maintain_order=True).agg(
        pl.col("correct").filter(~failed).fill_null(False).cast(pl.Float64).mean().alias("pass_rate"),
        (~failed).sum().cast(pl.Int64).alias("n_rollouts"),
        failed.sum().cast(pl.Int64).alias("n_errors"),
    )
    return with_intervals(grouped.collect())


def build_pool(
    problems: pl.DataFrame, rates: pl.DataFrame, config: PoolConfig | None = None, steps: list[Step] | None = None
) -> PoolResult:
    """Band, decontaminate, dedup, then select `size` problems spread over clusters and sources; `steps`: the
    filter steps of `config` when they were built already (steps.pool_steps)."""
    config = config or PoolConfig()
    if "n_errors" not in rates.columns:  # a table of rates from elsewhere: no failed rollouts known
        rates = rates.with_columns(pl.lit(0, dtype=pl.Int64).alias("n_errors"))
    if "pass_rate_low" not in rates.columns:
        rates = with_intervals(rates)
    profiled = problems.join(rates, on="problem_id", how="left").with_columns(
        normalised(pl.col("question")).hash(seed=0).alias("question_hash")
    )
    result = run_steps(profiled, pool_steps(config) if steps is None else steps)
    pool, embedding, selection = _select(result.kept, config)
    counts = dict(result.counts)
    if selection.rejected.height:
        counts.update(selection.counts)
    rejected = pl.concat([result.rejected, selection.rejected], how="diagonal_relaxed")
    valid = TooFewValidRollouts(config.min_valid_share).expression()
    return PoolResult(pool.drop("question_hash"), profiled.filter(valid), counts, rejected, embedding)


class NotSelected(Step):
    reason = "not_selected"

    def __init__(self, size: int):
        self.size = size

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        return frame.select(pl.col("position") < self.size).to_series()


def _select(frame: pl.DataFrame, config: PoolConfig) -> tuple[pl.DataFrame, str, StepResult]:
    """Cluster the questions and keep the first `size` rows of the even spread order."""
    vectors, embedding = embed_texts(frame["question"].to_list(), config.embedding) if frame.height else (None, "none")
    labels = cluster_labels(vectors, config.clusters, config.seed) if frame.height else []
    clustered = frame.with_columns(pl.Series("cluster", labels, dtype=pl.Int64))
    clustered = clustered.with_columns(spread_order(clustered).alias("position"))
    if config.domain_mix:
        steps: list[Step] = [mix_step(clustered, config.domain_mix, config.size)]
    else:
        steps = [NotSelected(config.size)] if config.size is not None else []
    selection = run_steps(clustered, steps)
    return selection.kept.sort("position").drop("position"), embedding, selection


def pool_rows(pool: pl.DataFrame, format: str = "agentdata") -> pl.DataFrame:
    """The output columns: agentdata's (`prompt`, `answer`, `source`, `pass_rate`, `n_rollouts`, ...) or verl's."""
    prompt = pl.concat_list(pl.struct(pl.lit("user").alias("role"), pl.col("question").alias("content"))).alias(
        "prompt"
    )
    if format == "verl":
        return pool.with_row_index("index").select(
            pl.col("source").alias("data_source"),
            prompt,
            pl.col("domain").alias("ability"),
            pl.struct(pl.lit("rule").alias("style"), pl.col("answer").alias("ground_truth")).alias("reward_model"),
            pl.struct(
                pl.lit("train").alias("split"),
                pl.col("index").cast(pl.Int64),
                "problem_id",
                "question",
                "answer",
                "pass_rate",
                "n_rollouts",
                "pass_rate_low",
                "pass_rate_high",
            ).alias("extra_info"),
        )
    return pool.select(
        "problem_id",
        prompt,
        "answer",
        "source",
        "domain",
        "pass_rate",
        "n_rollouts",
        "pass_rate_low",
        "pass_rate_high",
        "cluster",
    )


def source_table(result: PoolResult) -> list[dict]:
    """Per source: problems profiled, in band, selected, and mean pass rate."""
    band_rejects = result.rejected.filter(pl.col("drop_reason") == "out_of_band")
    profiled = result.profiled.group_by("source").agg(
        pl.len().alias("profiled"), pl.col("pass_rate").mean().alias("mean_pass_rate")
    )
    out_of_band = band_rejects.group_by("source").agg(pl.len().alias("out_of_band"))
    selected = result.pool.group_by("source").agg(pl.len().alias("selected"))
    joined = profiled.join(out_of_band, on="source", how="left").join(selected, on="source", how="left")
    joined = joined.with_columns(pl.col("out_of_band", "selected").fill_null(0))
    return (
        joined.with_columns((pl.col("profiled") - pl.col("out_of_band")).alias("in_band"))
        .sort("source")
        .select("source", "profiled", "in_band", "selected", "mean_pass_rate")
        .to_dicts()
    )


REJECT_COLUMNS = (
    "problem_id",
    "source",
    "domain",
    "pass_rate",
    "n_rollouts",
    "n_errors",
    "pass_rate_low",
    "pass_rate_high",
    "drop_reason",
)


def write_rejects(result: PoolResult, path: str | os.PathLike) -> Path:
    """One row per problem the pool left out, with its pass rate and `drop_reason` (what `agentdata view`
    shows on a problem's page); written even when empty, so a reader never mistakes an old file for it."""
    from agentdata.records import atomic_write

    frame = result.rejected
    columns = [pl.col(name) if name in frame.columns else pl.lit(None).alias(name) for name in REJECT_COLUMNS]
    rows = frame.select(columns)
    return atomic_write(Path(path), lambda tmp: rows.write_parquet(tmp))


class EmptyPoolError(UserError):
    """Nothing to write: `datasets` and verl cannot open a Parquet file with no rows."""


def write_pool(
    result: PoolResult, out: str | os.PathLike, format: str = "agentdata", metadata: dict[str, str] | None = None
) -> Path:
    """Write the pool (with `metadata` as Parquet key-value metadata, by the writer SFT sets share); an
    empty one is refused (a 0-row Parquet file loads nowhere) instead of written."""
    from agentdata.records import write_parquet_tables

    if result.pool.height == 0:
        raise EmptyPoolError(
            f"{out}: the RL pool is empty ({result.profiled.height} problems profiled, none kept), so nothing "
            "was written: widen --band, raise --k, or profile with a student that solves some of these problems"
        )
    rows = pool_rows(result.pool, format).to_arrow()
    return write_parquet_tables(Path(out), rows.schema, [rows], metadata)
