"""How sure a pass rate is: the Wilson score interval of each problem's k rollouts.

Four rollouts put a problem solved twice anywhere between 0.15 and 0.85 (95%). `filter`
writes the interval next to each pass rate (`pass_rate_low`, `pass_rate_high`) and, with
`--k-adaptive N`, profiles again — up to N rollouts — only the problems whose interval
straddles an edge of the band: the ones more rollouts can still move in or out of it.
"""

from __future__ import annotations

import polars as pl

from agentdata.evaluation.stats import Z as CONFIDENCE_Z  # two-sided 95%
from agentdata.evaluation.stats import wilson_bounds, wilson_interval
from agentdata.settings import Band

__all__ = ["CONFIDENCE_Z", "straddling", "wilson_interval", "with_intervals"]


def with_intervals(rates: pl.DataFrame, z: float = CONFIDENCE_Z) -> pl.DataFrame:
    """`rates` (pass_rate over n_rollouts valid rollouts) plus `pass_rate_low` and `pass_rate_high`;
    null where a problem has no valid rollout."""
    trials = pl.col("n_rollouts").cast(pl.Float64)
    low, high = wilson_bounds(pl.col("pass_rate"), trials, z)
    valid = trials > 0
    return rates.with_columns(
        pl.when(valid).then(low.clip(0.0, 1.0)).alias("pass_rate_low"),
        pl.when(valid).then(high.clip(0.0, 1.0)).alias("pass_rate_high"),
    )


def straddling(rates: pl.DataFrame, band: Band) -> list[str]:
    """Problems whose interval holds a band edge strictly inside: more rollouts may move them across it."""
    inside = band.straddles(pl.col("pass_rate_low"), pl.col("pass_rate_high"))
    return rates.filter(inside.fill_null(False))["problem_id"].to_list()
