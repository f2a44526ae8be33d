"""The scoring settings curate composes (`scoring`): a process reward model and an LLM judge.

Light on purpose (no torch, no polars): the CLI builds its options from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdata.settings import check_fields

AGGREGATES = ("min", "mean", "last")
STEP_UNITS = ("turn", "paragraph")


@dataclass
class ScoringConfig:
    prm: str | None = field(
        default=None,
        metadata={
            "help": "Process reward model scoring every assistant step: hf:PATH (a token-classification or reward "
            "head read at step separators, Qwen2.5-Math-PRM style, or a causal LM read at good/bad tokens), "
            "openai:URL (a served pooling endpoint, e.g. `vllm serve --runner pooling`), or a plug-in "
            "module:Factory[:TARGET]. Stored as `prm_score`."
        },
    )
    min_prm: float | None = field(
        default=None, metadata={"help": "Drop rows whose PRM score is below this (`prm_low`).", "range": "[0, 1]"}
    )
    prm_aggregate: str = field(
        default="min",
        metadata={
            "override_only": True,
            "help": "How the step scores make `prm_score`: min (the weakest step), mean, or last.",
            "choices": AGGREGATES,
        },
    )
    prm_steps: str = field(
        default="turn",
        metadata={
            "override_only": True,
            "help": "What a step is: turn (each assistant turn) or paragraph (each blank-line-separated part).",
            "choices": STEP_UNITS,
        },
    )
    prm_batch_size: int = field(
        default=8,
        metadata={
            "override_only": True,
            "help": "Trajectories per PRM forward pass (or requests in flight).",
            "range": "[1, 4096]",
        },
    )
    prm_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "override_only": True,
            "help": "KEY=VALUE for the PRM (repeatable): step_token, positive_label, good_token, bad_token, "
            "prompt=plain|chat, trust_remote_code, model, ... (docs/curate.md).",
            "flag": "--prm-option",
        },
    )
    judge: str | None = field(
        default=None,
        metadata={
            "help": "LLM judge grading each trajectory against the rubric: any engine spec (smollm2, hf:PATH, "
            "vllm:PATH, openai:URL). Stored as `judge_score` and `judge_rationale`."
        },
    )
    min_judge: float | None = field(
        default=None,
        metadata={"help": "Drop rows whose judge score (0-1) is below this (`judge_low`).", "range": "[0, 1]"},
    )
    judge_rubric: str | None = field(
        default=None,
        metadata={"help": "A text file of grading criteria replacing the built-in rubric (docs/curate.md)."},
    )
    judge_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "KEY=VALUE for the judge's engine (repeatable), e.g. model=NAME.", "flag": "--judge-option"},
    )
    judge_concurrency: int = field(
        default=16,
        metadata={"override_only": True, "help": "Judge requests in flight at once.", "range": "[1, 100000]"},
    )
    judge_max_tokens: int = field(
        default=512, metadata={"help": "Tokens the judge may write per verdict.", "range": "[1, 1000000]"}
    )
    score_retries: int = field(
        default=2,
        metadata={
            "override_only": True,
            "help": "Tries again after a PRM or judge failure before counting it apart.",
            "range": "[0, 100]",
        },
    )
    score_cache: str | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "Folder of the journal of PRM scores and verdicts (a rerun scores only what is new; kept "
            "through a kill). Default: $AGENTDATA_CACHE/scores (~/.cache/agentdata/scores).",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.min_prm is not None and not self.prm:
            raise ValueError("--min-prm needs a process reward model: give --prm SPEC")
        if self.min_judge is not None and not self.judge:
            raise ValueError("--min-judge needs a judge: give --judge SPEC")
