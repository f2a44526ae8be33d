"""curate's built-in filter steps, registered by name; the settings choose which run and how.

Each entry of `CURATE_STEPS` is a function of the `CurateConfig`, returning its step or None
when the settings turn it off. `curate_steps` builds two phases from names: the rules on
the stored scalar columns (cheap, run on every row), then the steps that need text features
(run on the rows left) with the user's `extra_steps` last. Every name, built-in or extra,
goes the same way: this registry, then the shared filter steps, then a plug-in path.
"""

from __future__ import annotations

from agentdata.curate.config import CurateConfig
from agentdata.registry import Registry
from agentdata.steps import (
    FILTER_STEPS,
    ExactDuplicateFilter,
    IncorrectFilter,
    Step,
    ToolCallBandFilter,
    ToolErrorRatioFilter,
    TooLongFilter,
    build_steps,
    contamination_step,
    near_duplicate_step,
)
from agentdata.steps.diversity import MaxPerProblemFilter, SourceShareFilter
from agentdata.steps.health import HealthFilter

# no_answer, no_model_turn, malformed_tool_call, prm_low and judge_low come from the shared registry as they are.
SCALAR_STEPS = ("no_answer", "incorrect", "tool_error_ratio", "tool_call_band", "too_long")
FEATURE_STEPS = (
    "no_model_turn",
    "malformed_tool_call",
    "health",
    "contaminated",
    "duplicate",
    "near_duplicate",
    "prm_low",  # scored by a model: after every cheaper step, so only the rows still in the running are paid for
    "judge_low",
    "max_per_problem",
    "source_share",
)

CURATE_STEPS: Registry = Registry("filter step", parent=FILTER_STEPS)
step = CURATE_STEPS.register


@step("incorrect")
def incorrect(config: CurateConfig) -> Step | None:
    return None if config.keep_incorrect else IncorrectFilter()


@step("tool_error_ratio")
def tool_error_ratio(config: CurateConfig) -> Step:
    return ToolErrorRatioFilter(config.max_tool_error_ratio)


@step("tool_call_band")
def tool_call_band(config: CurateConfig) -> Step:
    return ToolCallBandFilter(*config.tool_calls)


@step("too_long")
def too_long(config: CurateConfig) -> Step:
    return TooLongFilter(config.max_tokens)


@step("health")
def health(config: CurateConfig) -> Step | None:
    """The rollout health checks (formats.health), each failed one its own drop reason."""
    return HealthFilter(config.rollout_health) if config.rollout_health.health else None


@step("contaminated")
def contaminated(config: CurateConfig) -> Step | None:
    return contamination_step(config.dedup)


@step("duplicate")
def duplicate(config: CurateConfig) -> Step:
    return ExactDuplicateFilter("text_hash")


@step("near_duplicate")
def near_duplicate(config: CurateConfig) -> Step | None:
    """By question, a problem whose question repeats another's goes whole; by solution, single rows."""
    if config.near_dup_field == "solution":
        return near_duplicate_step(config.dedup, text="solution_text")
    return near_duplicate_step(config.dedup, text="question", group="problem_id")


@step("max_per_problem")
def max_per_problem(config: CurateConfig) -> Step | None:
    return MaxPerProblemFilter(config.max_per_problem) if config.max_per_problem is not None else None


@step("source_share")
def source_share(config: CurateConfig) -> Step | None:
    return SourceShareFilter(config.balance_sources) if config.balance_sources is not None else None


def curate_steps(config: CurateConfig) -> tuple[list[Step], list[Step]]:
    """The steps in order, in two phases: on the scalar columns, then on the text features."""
    return (
        build_steps(SCALAR_STEPS, config, CURATE_STEPS),
        build_steps([*FEATURE_STEPS, *config.extra_steps], config, CURATE_STEPS),
    )
