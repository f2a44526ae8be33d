"""Diversity steps: per-problem caps, source shares, and even selection across clusters."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from agentdata.steps.base import Step


@dataclass
class MaxPerProblemFilter(Step):
    """Keeps at most `limit` trajectories per problem.

    Preference: distinct solutions first (the first trajectory of each distinct tool
    code in a problem ranks before any repeat of a code already kept), then fewer
    tool calls (the deliberative style), then fewer tokens, then input order.
    """

    limit: int = 4
    reason = "max_per_problem"

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        ranked = frame.with_row_index("_order").with_columns(
            pl.int_range(pl.len()).over("problem_id", "code_hash", order_by="_order").alias("_repeat")
        )
        rank = pl.int_range(pl.len()).over(
            "problem_id", order_by=["_repeat", "num_tool_calls", "total_tokens", "_order"]
        )
        return ranked.select(rank < self.limit).to_series()


@dataclass
class SourceShareFilter(Step):
    """Caps every source at `max_share` of the rows kept.

    The cap C solves C = max_share * sum(min(count_s, C)); the rows a capped source
    keeps are spread over its problems (first trajectory of each problem first).
    When there are too few sources for the share (max_share * sources < 1) the cap
    is an equal share.
    """

    max_share: float = 0.5
    reason = "source_share"

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        counts = frame.group_by("source").len()["len"].to_list()
        cap = source_cap(counts, self.max_share)
        ranked = frame.with_row_index("_order").with_columns(
            pl.int_range(pl.len()).over("problem_id", order_by="_order").alias("_in_problem")
        )
        rank = pl.int_range(pl.len()).over("source", order_by=["_in_problem", "num_tool_calls", "_order"])
        return ranked.select(rank < cap).to_series()


def source_cap(counts: list[int], max_share: float) -> int:
    """The largest per-source count that keeps every source within `max_share` of the total."""
    if not counts:
        return 0
    share = max(max_share, 1.0 / len(counts))
    cap = max(counts)
    while True:
        total = sum(min(count, cap) for count in counts)
        allowed = int(share * total + 1e-9)
        if allowed >= cap:
            return cap
        cap = allowed


def spread_order(frame: pl.DataFrame, cluster: str = "cluster", source: str = "source") -> pl.Series:
    """A position per row such that taking rows by position takes clusters in turn and,
    inside each cluster, sources in turn: the first N positions are spread evenly."""
    ranked = frame.with_row_index("_order").with_columns(
        pl.int_range(pl.len()).over(cluster, source, order_by="_order").alias("_in_source")
    )
    within_cluster = pl.int_range(pl.len()).over(cluster, order_by=["_in_source", source, "_order"])
    ranked = ranked.with_columns(within_cluster.alias("_in_cluster"))
    # The rows in taking order; scattering 0..n back onto them gives each row its place.
    order = ranked.select(pl.arg_sort_by(["_in_cluster", cluster, "_order"]))[:, 0]
    positions = pl.Series("position", [0] * frame.height, dtype=pl.UInt32)
    return positions.scatter(order, pl.int_range(frame.height, eager=True, dtype=pl.UInt32))
