"""Validation during training: which held-out problems, how often, how many responses each.

`ValidationConfig` is composed into both training stages' settings (its fields are flat:
`eval_problems`, `eval_every`, `eval_k` in the config file's `sft:` / `rl:` sections and as
`agentdata train` flags). The evaluation itself is `eval`'s: the same agent loop writes a
collect run dir per evaluation and `evaluation.metrics.benchmark_metrics` scores it
(`evaluation/during_training.py`). This module stays light: the CLI builds options from it.

Keys written to the stage's `metrics.jsonl`, one record per evaluation, with the real k in
the name as papers write it (k = `eval_k`):

    eval/avg@K  eval/pass@K  eval/maj@K               accuracy over the K responses per problem
    eval/avg@K/low  eval/avg@K/high                   avg@K's 95% interval over problems (evaluation/stats.py)
    eval/tools/call_frequency  eval/tools/error_rate  tool calls per response, failed calls / calls
    eval/completions/model_tokens                     model tokens per response (all turns)
    eval/rollouts/failed                              responses that ended in an engine or sandbox error (in no score)
    eval/seconds                                      wall time of the evaluation
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agentdata.settings import check_fields

EVAL_PREFIX = "eval/"
# DemyAgent validated every 10 steps (FINDINGS.md); SFT evaluates only at its end unless asked.
GRPO_EVAL_EVERY = 10
AVG_KEY = re.compile(r"^eval/avg@(\d+)$")


@dataclass
class ValidationConfig:
    eval_problems: str = field(
        default="",
        metadata={
            "help": (
                "Held-out problems (any problem file) the policy is evaluated on during training, with the "
                "stage's agent loop: avg@k, pass@k, tool calls and length per evaluation in metrics.jsonl; "
                "empty: no evaluation."
            )
        },
    )
    eval_every: int | None = field(
        default=None,
        metadata={
            "help": (
                "Evaluate every N optimizer steps (each evaluation also saves a checkpoint); unset: every "
                "10 steps in GRPO, only at the end in SFT. GRPO also evaluates before the first step (the "
                "baseline); both stages evaluate after the last."
            ),
            "range": "[1, inf)",
        },
    )
    eval_k: int = field(
        default=4,
        metadata={
            "override_only": True,
            "help": "Responses per eval problem: eval/avg@k and eval/pass@k (the findings report avg@32).",
            "range": "[1, 1024]",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.eval_problems and not Path(self.eval_problems).exists():  # before any training, not after it
            raise ValueError(f"eval_problems: no such file {self.eval_problems}")

    @property
    def enabled(self) -> bool:
        return bool(self.eval_problems)


def avg_key(record: dict) -> str | None:
    """The `eval/avg@K` key of a metrics record, whatever K is; None if the record has none."""
    return next((key for key in record if AVG_KEY.match(key)), None)
