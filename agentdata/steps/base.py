"""A filter is a small named step with a stable drop reason, applied to a polars table.

As in datatrove, the step says only which rows it keeps; `run_steps` does the rest: it
tags every dropped row with the step's reason (the first step that drops a row names
it), counts `dropped_<reason>`, and keeps the rejects so they can be written out.
Steps see only the rows that earlier steps kept, so a row has exactly one reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from agentdata.registry import PluginError, is_builtin

REASON_COLUMN = "drop_reason"


class Step:
    """One filter step: `keep(frame)` returns a boolean Series (True keeps the row).

    `row_local`: the verdict on a row depends on that row alone (not on which other rows the frame
    holds), so a large run may be given to the step a piece at a time (curate/passes.py). False unless
    a step says so: a step that compares rows (dedup, caps) must see them all at once."""

    reason: str = ""
    row_local: bool = False

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        raise NotImplementedError


class ExpressionStep(Step):
    """A per-row rule written as one polars expression (True keeps)."""

    def expression(self) -> pl.Expr:
        raise NotImplementedError

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        return frame.select(self.expression().fill_null(True).alias("keep")).to_series()


class MultiReasonStep(Step):
    """A step that drops for one of several reasons (e.g. a band: too few / too many).

    `reasons(frame)` returns a string Series: null keeps the row, a value is its drop reason.
    """

    def reasons(self, frame: pl.DataFrame) -> pl.Series:
        raise NotImplementedError


class ScoreStep(MultiReasonStep):
    """A step that scores every row (a process reward model, an LLM judge) and drops by the score.

    `score_rows(rows)` turns a batch of rows (dicts holding the trajectory: `messages`, `question`,
    `format`, ...) into one dict of `columns` values per row (`columns`: name -> polars type);
    `annotate(frame)` adds those columns before `reasons` reads them, so the kept rows and the
    rejects both carry the scores. The rows come from the frame itself (it must then hold
    `messages`), or from `loader(frame)`: a stage that keeps messages on disk (curate) sets it to
    stream them, in the frame's order.
    """

    columns: dict[str, pl.DataType] = {}
    loader: Callable[[pl.DataFrame], Iterable[list[dict[str, Any]]]] | None = None

    def score_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def score_batches(self, batches: Iterable[list[dict[str, Any]]], total: int) -> list[dict[str, Any]]:
        """Every batch's scores in order (a step that keeps state across batches, e.g. one event loop, overrides it)."""
        return [values for rows in batches for values in self.score_rows(rows)]

    def annotate(self, frame: pl.DataFrame) -> pl.DataFrame:
        if all(column in frame.columns for column in self.columns):
            return frame  # scored already
        batches = self.loader(frame) if self.loader is not None else [frame.to_dicts()] if frame.height else []
        scored = self.score_batches(batches, frame.height)
        if len(scored) != frame.height:
            raise RuntimeError(f"{type(self).__name__}: {len(scored)} scores for {frame.height} rows")
        values = pl.DataFrame(
            [{column: row.get(column) for column in self.columns} for row in scored], schema=self.columns
        )
        return pl.concat([frame.drop(list(self.columns), strict=False), values], how="horizontal")


@dataclass
class StepResult:
    kept: pl.DataFrame
    rejected: pl.DataFrame
    counts: dict[str, int] = field(default_factory=dict)

    def stats(self) -> dict[str, int]:
        return {f"dropped_{reason}": count for reason, count in self.counts.items()}


def run_steps(
    frame: pl.DataFrame, steps: Sequence[Step], on_step: Callable[[Step, int], None] | None = None
) -> StepResult:
    """Apply `steps` in order; return the kept rows, the rejects (with `drop_reason`) and counts."""
    rejected: list[pl.DataFrame] = []
    counts: dict[str, int] = {}
    for step in steps:
        if isinstance(step, ScoreStep):
            frame = step.annotate(frame)
        reasons = _step_reasons(step, frame)
        dropped = reasons.is_not_null()
        if dropped.any():
            rejects = frame.filter(dropped).with_columns(reasons.filter(dropped).alias(REASON_COLUMN))
            rejected.append(rejects)
            for reason, count in rejects.group_by(REASON_COLUMN).len().iter_rows():
                counts[reason] = counts.get(reason, 0) + count
            frame = frame.filter(~dropped)
        if on_step is not None:
            on_step(step, frame.height)
    empty = frame.clear().with_columns(pl.lit(None, dtype=pl.String).alias(REASON_COLUMN))
    return StepResult(kept=frame, rejected=pl.concat([empty, *rejected], how="diagonal_relaxed"), counts=counts)


def _step_reasons(step: Step, frame: pl.DataFrame) -> pl.Series:
    if isinstance(step, MultiReasonStep):
        reasons = _checked(step, frame, "reasons", pl.String, "a drop reason (or null) per row")
        return reasons.alias(REASON_COLUMN)
    keep = _checked(step, frame, "keep", pl.Boolean, "one boolean per row")
    reason = pl.when(keep).then(pl.lit(None, dtype=pl.String)).otherwise(pl.lit(step.reason))
    return pl.select(reason.alias(REASON_COLUMN)).to_series()


def _checked(step: Step, frame: pl.DataFrame, method: str, dtype: pl.DataType, what: str) -> pl.Series:
    """`step.keep(frame)` (or `reasons`): a Series of `dtype`, one per row. A plug-in step's exception or
    wrong answer is a PluginError naming it; a mask of another length would count its rows wrongly."""
    name = f"{type(step).__module__}:{type(step).__qualname__}"
    try:
        result = getattr(step, method)(frame)
    except Exception as error:
        if is_builtin(step):
            raise
        raise PluginError(name, f"{method}() raised {type(error).__name__}: {error}") from None
    if not isinstance(result, pl.Series) or result.dtype != dtype or result.len() != frame.height:
        shown = f"a {result.dtype} Series of {result.len()}" if isinstance(result, pl.Series) else type(result).__name__
        raise PluginError(name, f"{method}() returned {shown} for {frame.height} rows; it must return {what}")
    return result
