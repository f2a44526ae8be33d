"""The rollout health checks as one filter step: each failed check is its own drop reason.

The step reads the measure columns (`health_<measure>`, see `formats.health`) that curate
takes from each trajectory's stored `metadata.health` (or measures, for trajectories
collected before it was stored), and drops a row for the first check it fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from agentdata.formats.health import MEASURE_NAMES, HealthLimits, check_limits
from agentdata.steps.base import MultiReasonStep

COLUMN_PREFIX = "health_"
HEALTH_COLUMNS = tuple(COLUMN_PREFIX + name for name in MEASURE_NAMES)


@dataclass
class HealthFilter(MultiReasonStep):
    """Drops trajectories that fail a health check, with the check's name as the reason."""

    limits: HealthLimits = field(default_factory=HealthLimits)
    reason = "health"
    row_local = True

    def reasons(self, frame: pl.DataFrame) -> pl.Series:
        missing = [column for column in HEALTH_COLUMNS if column not in frame.columns]
        if missing:
            raise ValueError(f"the health step needs the measure columns {missing} (see agentdata.formats.health)")
        reason = pl.lit(None, dtype=pl.String)
        for check, measure, limit in reversed(check_limits(self.limits)):  # built inside out: the first check wins
            failed = pl.col(COLUMN_PREFIX + measure).fill_null(0) > limit
            reason = pl.when(failed).then(pl.lit(check)).otherwise(reason)
        return frame.select(reason.alias("reason")).to_series()
