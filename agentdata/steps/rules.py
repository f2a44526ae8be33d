"""Per-row rule filters for trajectories; each has one stable drop reason."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from agentdata.steps.base import ExpressionStep, MultiReasonStep


class NoAnswerFilter(ExpressionStep):
    """Drops trajectories that never gave a final answer."""

    reason = "no_answer"
    row_local = True

    def expression(self) -> pl.Expr:
        return pl.col("final_answer").is_not_null() & (pl.col("final_answer").str.strip_chars() != "")


class IncorrectFilter(ExpressionStep):
    """Drops trajectories whose final answer was checked wrong."""

    reason = "incorrect"
    row_local = True

    def expression(self) -> pl.Expr:
        return pl.col("correct").fill_null(False)


class NoModelTurnFilter(ExpressionStep):
    """Drops trajectories holding no assistant message: nothing of the model to train on (a harness that
    answered without asking its model, recorded before such a run was an error)."""

    reason = "no_model_turn"
    row_local = True

    def expression(self) -> pl.Expr:
        return pl.col("model_turns") > 0


class MalformedToolCallFilter(ExpressionStep):
    """Drops trajectories with a tool call that could not be run as written."""

    reason = "malformed_tool_call"
    row_local = True

    def expression(self) -> pl.Expr:
        return pl.col("malformed_tool_calls") == 0


@dataclass
class ToolErrorRatioFilter(ExpressionStep):
    """Drops trajectories where more than `max_ratio` of the tool calls failed."""

    max_ratio: float = 0.5
    reason = "tool_error_ratio"
    row_local = True

    def expression(self) -> pl.Expr:
        calls = pl.col("num_tool_calls")
        return (calls == 0) | (pl.col("num_tool_errors") / calls <= self.max_ratio)


@dataclass
class ToolCallBandFilter(MultiReasonStep):
    """Keeps trajectories with MIN..MAX tool calls (both inclusive).

    Below MIN the reason is `no_tool_call` (MIN is normally 1); above MAX, `too_many_tool_calls`.
    """

    min_calls: int = 1
    max_calls: int = 8
    reason = "tool_call_band"
    row_local = True

    def reasons(self, frame: pl.DataFrame) -> pl.Series:
        calls = pl.col("num_tool_calls")
        reason = (
            pl.when(calls < self.min_calls)
            .then(pl.lit("no_tool_call"))
            .when(calls > self.max_calls)
            .then(pl.lit("too_many_tool_calls"))
            .otherwise(pl.lit(None, dtype=pl.String))
        )
        return frame.select(reason).to_series()


@dataclass
class TooLongFilter(ExpressionStep):
    """Drops trajectories longer than `max_tokens` (prompt + completion tokens as recorded)."""

    max_tokens: int = 32768
    reason = "too_long"
    row_local = True

    def expression(self) -> pl.Expr:
        return pl.col("total_tokens") <= self.max_tokens
