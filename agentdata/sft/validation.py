"""SFT's validation: the model being fine-tuned answers the held-out problems at the end (and every
`eval_every` steps when set), through the agent loop in the protocol and under the system prompt
the set teaches (`sft/prompt.py`).

The loop has its defaults otherwise (the SFT stage has no rollouts to copy settings from), at
temperature 1.0 as the findings evaluate (GRPO's rollout loop, `rollout_loop`). With `--stage all`, GRPO's
step-0 evaluation is the same model under GRPO's own loop settings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentdata.agent.config import rollout_loop


def validation_callback(config: Any, trainer: Any, taught: Any) -> Any:
    """The callback for an SFTStageConfig with eval problems (None without); `taught` is the set's SetPrompt."""
    if not config.validation.enabled:
        return None
    from agentdata.evaluation.during_training import ValidationCallback, model_engine
    from agentdata.training.metrics import tracker_callbacks

    loop = replace(rollout_loop(), protocol=taught.protocol, system_prompt=taught.system_prompt)
    return ValidationCallback(
        config.validation,
        loop,
        config.out,
        lambda: model_engine(trainer.accelerator.unwrap_model(trainer.model_wrapped), trainer.processing_class),
        "SFT",
        every=config.validation.eval_every,
        at_start=False,
        seed=config.seed,
        trackers=lambda: tracker_callbacks(trainer),
    )
