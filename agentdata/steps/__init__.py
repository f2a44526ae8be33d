"""Filters: small named steps over polars tables, each with a stable drop reason.

Pure table work: no model, no sandbox. `run_steps` applies a list of steps and keeps
the rejects with their reason.
"""

from agentdata.steps.base import REASON_COLUMN, ExpressionStep, MultiReasonStep, ScoreStep, Step, StepResult, run_steps
from agentdata.steps.config import DedupConfig
from agentdata.steps.decontam import BenchmarkNgrams, ContaminationFilter, contamination_step
from agentdata.steps.dedup import (
    ExactDuplicateFilter,
    NearDuplicateFilter,
    find_near_duplicates,
    minhash_signatures,
    near_duplicate_step,
)
from agentdata.steps.registry import FILTER_STEPS, build_step, build_steps
from agentdata.steps.rules import (
    IncorrectFilter,
    MalformedToolCallFilter,
    NoAnswerFilter,
    ToolCallBandFilter,
    ToolErrorRatioFilter,
    TooLongFilter,
)

__all__ = [
    "FILTER_STEPS",
    "build_step",
    "build_steps",
    "DedupConfig",
    "contamination_step",
    "near_duplicate_step",
    "REASON_COLUMN",
    "Step",
    "ExpressionStep",
    "MultiReasonStep",
    "ScoreStep",
    "StepResult",
    "run_steps",
    "BenchmarkNgrams",
    "ContaminationFilter",
    "ExactDuplicateFilter",
    "NearDuplicateFilter",
    "minhash_signatures",
    "find_near_duplicates",
    "IncorrectFilter",
    "MalformedToolCallFilter",
    "NoAnswerFilter",
    "ToolCallBandFilter",
    "ToolErrorRatioFilter",
    "TooLongFilter",
]
