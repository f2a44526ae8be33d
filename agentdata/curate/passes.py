"""curate's filter steps over a run of any size, a piece of rows at a time, so memory stays bounded.

Every piece of `PIECE_ROWS` rows (by global row number, across shards) goes through pass 1 (its stored
scalar columns and the cheap rules) and pass 2 (the text features of the rows left, then every step
that judges a row by itself alone: `Step.row_local`, as the rules, malformed calls, health and
contamination). Of a piece only what later code reads stays in memory: the rows still kept, and of
each reject its row number, its reason and the columns the report counts. The steps that compare rows
(exact and near dedup, per-problem caps, source shares) and every step after the first of them (a
scorer, a plug-in step) then run once on all the kept rows of the run. They see the table they saw
when the whole run was read at once: a row-local step gives a row the same verdict in any piece, and
the pieces are joined in input order. `run_curate_steps(..., piece_rows=None)` reads the run whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from agentdata.agent.shard_files import ROW_ID
from agentdata.curate.config import CurateConfig
from agentdata.curate.health import stored_health_columns, with_health
from agentdata.curate.messages import trajectory_batches
from agentdata.curate.shards import Shards
from agentdata.curate.steps import curate_steps
from agentdata.steps import REASON_COLUMN, ScoreStep, Step, StepResult, run_steps
from agentdata.steps.features import trajectory_features

PIECE_ROWS = 500_000  # rows read at once by the row-local steps: about 0.5 GB of scalars and features
SCORED_COLUMNS = ("messages", "question", "format")  # what a scoring step (PRM, judge) reads of a trajectory
SCORED_BATCH_ROWS = 4096  # rows a scoring step holds at once: its requests stay in flight across them
SCALAR_COLUMNS = (
    "id",
    "problem_id",
    "question",
    "source",
    "domain",
    "teacher",
    "format",
    "correct",
    "final_answer",
    "num_tool_calls",
    "num_tool_errors",
    "prompt_tokens",
    "completion_tokens",
)
INPUT_COLUMNS = ("source", "domain", "problem_id", "correct", "num_tool_calls", "num_tool_errors")  # the report's


def scalar_table(shards: Shards, start: int = 0, rows: int | None = None) -> pl.DataFrame:
    """Pass 1: the stored scalar columns of rows `start`.. (`rows` of them, default all; no message is read)."""
    frame = shards.scan("scalars").slice(start, rows).select(ROW_ID, *SCALAR_COLUMNS)
    frame = frame.filter(~pl.col(ROW_ID).is_in(shards.replaced.implode())) if len(shards.replaced) else frame
    frame = frame.with_columns((pl.col("prompt_tokens") + pl.col("completion_tokens")).alias("total_tokens"))
    return frame.collect(engine="streaming")


def feature_table(
    shards: Shards, rows: pl.Series, with_text: bool = False, within: tuple[int, int | None] = (0, None)
) -> pl.DataFrame:
    """Pass 2: text features (from the messages) of `rows` (global row numbers, all in the `within` slice of
    the run: only its shards' messages are read), streamed."""
    wanted = pl.DataFrame({ROW_ID: rows}).lazy()
    frame = shards.scan("features").slice(*within).join(wanted, on=ROW_ID, how="semi")
    features = frame.select(ROW_ID, *trajectory_features(with_text), *stored_health_columns())
    return with_health(shards, features.collect(engine="streaming"))


def run_curate_steps(
    shards: Shards,
    config: CurateConfig,
    on_step: Callable[[Step, int], None] | None = None,
    piece_rows: int | None = PIECE_ROWS,
) -> tuple[int, StepResult, list[ScoreStep]]:
    """Every step, piece by piece then on the whole run; returns (input rows, the combined result, the
    scoring steps that ran). The rejects hold only `compact_columns`; the kept rows every column."""
    scalar_steps, feature_steps = curate_steps(config)
    scorers = [step for step in feature_steps if isinstance(step, ScoreStep)]
    for scorer in scorers:  # they read whole trajectories: streamed from the shards, only for the rows left
        scorer.loader = scorer.loader or (
            lambda frame: trajectory_batches(shards, frame[ROW_ID], SCORED_COLUMNS, SCORED_BATCH_ROWS, "scoring")
        )
    local, whole_run = split_row_local(feature_steps)
    columns = compact_columns(scorers)
    total = shards.total
    size = max(1, piece_rows or total)
    rows_left: dict[int, int] = {}  # per step (by id), the rows it left, summed over the pieces
    kept, rejected, counts = [], [], {}
    for start in range(0, max(total, 1), size):  # an empty run is one empty piece: the tables keep their schema
        piece = run_piece(shards, (start, size), scalar_steps, local, config, rows_left)
        kept.append(piece.kept)
        rejected.append(compact(piece.rejected, columns))
        counts = added(counts, piece.counts)
    if on_step is not None:
        for step in [*scalar_steps, *local]:
            on_step(step, rows_left[id(step)])
    last = run_steps(pl.concat(kept), whole_run, on_step=on_step)
    rejected.append(compact(last.rejected, columns))
    result = StepResult(last.kept, pl.concat(rejected, how="diagonal_relaxed"), added(counts, last.counts))
    return shards.trajectories, result, scorers


def run_piece(
    shards: Shards,
    within: tuple[int, int],
    scalar_steps: Sequence[Step],
    local: Sequence[Step],
    config: CurateConfig,
    rows_left: dict[int, int],
) -> StepResult:
    """Passes 1 and 2 of the rows in `within` (start, rows): the cheap rules, then the row-local feature steps."""

    def tally(step: Step, rows: int) -> None:
        rows_left[id(step)] = rows_left.get(id(step), 0) + rows

    table = scalar_table(shards, *within)
    first = run_steps(table, scalar_steps, on_step=tally)
    features = feature_table(shards, first.kept[ROW_ID], config.near_dup_field == "solution", within)
    joined = first.kept.join(features, on=ROW_ID, how="left", maintain_order="left")
    second = run_steps(joined, local, on_step=tally)
    rejected = pl.concat([first.rejected, second.rejected], how="diagonal_relaxed")
    return StepResult(second.kept, rejected, added(first.counts, second.counts))


def split_row_local(steps: Sequence[Step]) -> tuple[list[Step], list[Step]]:
    """The leading steps that judge each row alone (they run piece by piece), and the rest, in order."""
    split = next((index for index, step in enumerate(steps) if not step.row_local), len(steps))
    return list(steps[:split]), list(steps[split:])


def compact_columns(scorers: Sequence[ScoreStep]) -> list[str]:
    """What is read of a reject after the steps: its row number (the rejects file is read back from the
    shards by it), its reason, the report's columns and the scores of the scorers."""
    return [ROW_ID, REASON_COLUMN, *INPUT_COLUMNS, *(column for scorer in scorers for column in scorer.columns)]


def compact(rejected: pl.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    return rejected.select(column for column in columns if column in rejected.columns)


def added(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {reason: counts.get(reason, 0) + more.get(reason, 0) for reason in {**counts, **more}}
