"""filter's built-in pool steps, registered by name; the settings choose which run and how.

Each entry of `POOL_STEPS` is a `Step` class or a function of the `PoolConfig` returning its
step (None: turned off). `pool_steps` builds them from names, in order, the user's
`extra_steps` last: every name goes the same way (this registry, then the shared filter
steps, then a plug-in path). The diverse selection after them is not a filter step: it
ranks what is left (`build.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from agentdata.filter.config import DEFAULT_BAND, PoolConfig
from agentdata.registry import Registry
from agentdata.settings import Band
from agentdata.steps import (
    FILTER_STEPS,
    ExactDuplicateFilter,
    ExpressionStep,
    Step,
    build_steps,
    contamination_step,
    near_duplicate_step,
)

# The profile's three reasons say why a problem has no place in the band: no rollout at all, too many
# rollouts that ended in an engine or sandbox error to trust its pass rate, or a pass rate outside it.
POOL_STEP_NAMES = ("no_rollouts", "too_many_errors", "out_of_band", "contaminated", "duplicate", "near_duplicate")

POOL_STEPS: Registry = Registry("filter step", parent=FILTER_STEPS)
step = POOL_STEPS.register


@dataclass
class PassRateBand(ExpressionStep):
    """Keeps problems the student solves sometimes: LO < pass rate < HI."""

    band: Band = DEFAULT_BAND
    reason = "out_of_band"

    def expression(self) -> pl.Expr:
        return self.band.contains(pl.col("pass_rate"))


@step("no_rollouts")
class NoRollouts(ExpressionStep):
    """Drops problems with no student rollout in the profile (not even a failed one)."""

    reason = "no_rollouts"

    def expression(self) -> pl.Expr:
        return _attempted() > 0


@dataclass
class TooFewValidRollouts(ExpressionStep):
    """Drops problems whose rollouts mostly failed (engine or sandbox errors): their pass rate
    rests on too few answers to place them in or out of the band."""

    min_valid_share: float = 0.5
    reason = "too_many_errors"

    def expression(self) -> pl.Expr:
        valid = pl.col("n_rollouts").fill_null(0)
        return (valid > 0) & (valid >= self.min_valid_share * _attempted())


def _attempted() -> pl.Expr:
    return pl.col("n_rollouts").fill_null(0) + pl.col("n_errors").fill_null(0)


@step("out_of_band")
def out_of_band(config: PoolConfig) -> Step:
    return PassRateBand(config.band)


@step("too_many_errors")
def too_many_errors(config: PoolConfig) -> Step:
    return TooFewValidRollouts(config.min_valid_share)


# The names of 0.3 (a config's `extra_steps` may list them): refused, naming the step they are now.
POOL_STEPS.retire("not_profiled", "no_rollouts")
POOL_STEPS.retire("unprofiled", "too_many_errors")


@step("contaminated")
def contaminated(config: PoolConfig) -> Step | None:
    return contamination_step(config.dedup)


@step("duplicate")
def duplicate(config: PoolConfig) -> Step:
    return ExactDuplicateFilter("question_hash")


@step("near_duplicate")
def near_duplicate(config: PoolConfig) -> Step | None:
    return near_duplicate_step(config.dedup, text="question")


def pool_steps(config: PoolConfig) -> list[Step]:
    return build_steps([*POOL_STEP_NAMES, *config.extra_steps], config, POOL_STEPS)
