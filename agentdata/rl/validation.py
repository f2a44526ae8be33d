"""GRPO's validation: the rollouts' own engine, holding the current weights, answers the held-out problems.

The evaluation is `evaluation.during_training.ValidationCallback`; this module only says how
to get an engine generating with the policy as it is now: on the CPU (or a GPU without vLLM)
the trainer's model, unwrapped as for a rollout; with colocated vLLM, TRL's `LLM` after the
weights of the last optimizer step are synced into it (TRL syncs only before its next rollout).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentdata.evaluation.validation import GRPO_EVAL_EVERY


def validation_callback(config: Any, trainer: Any, policy: Any, sandbox: Any) -> Any:
    """The callback for a GRPOStageConfig with eval problems (None without); `policy()` is a context that gives
    the engine holding the policy's current weights (the synchronous stage: `policy_engine`; the asynchronous
    one: its rollout engine, which TRL's weight transfer keeps current)."""
    if not config.validation.enabled:
        return None
    from agentdata.evaluation.during_training import ValidationCallback
    from agentdata.training.metrics import tracker_callbacks

    return ValidationCallback(
        config.validation,
        config.loop,
        config.out,
        policy,
        "GRPO",
        every=config.validation.eval_every or GRPO_EVAL_EVERY,
        at_start=True,
        sandbox=sandbox,
        seed=config.seed,
        trackers=lambda: tracker_callbacks(trainer),
    )


@contextmanager
def policy_engine(trainer: Any, rollout: Any) -> Iterator[Any]:
    engine = rollout.engine
    if not hasattr(engine, "model"):  # vLLM generates: it must hold the policy's current weights
        if trainer.args.use_vllm and trainer.state.global_step != getattr(trainer, "_last_loaded_step", None):
            trainer.vllm_generation.sync_weights()  # TRL's own vLLM syncs at its next generation, not before
            trainer._last_loaded_step = trainer.state.global_step
        # fed by files (rl/vllm_push.py): PushWeightsCallback, added ahead of this callback, pushed after the step
        yield engine
        return
    from trl.models import unwrap_model_for_generation

    model = trainer.model_wrapped
    was_training = bool(getattr(trainer.model, "training", False))
    try:
        with unwrap_model_for_generation(model, trainer.accelerator) as unwrapped:
            engine.model = unwrapped
            try:
                yield engine
            finally:
                engine.wait_idle()  # training resumes next: the generating thread must be out
    finally:
        if was_training:
            trainer.model.train()
