"""Which engine generates GRPO's rollouts: the policy itself, TRL's colocated vLLM, or a vLLM server.

- no vLLM (CPU, or `use_vllm: no`): the model being trained (`rl.policy.PolicyEngine`);
- `vllm_mode: colocate` (TRL's default): the `vllm.LLM` TRL builds in this process
  (`rl.vllm_policy.ColocatedVLLMEngine`);
- `vllm_mode: server` (`vllm_server: URL` in the `rl:` section, or TRL's own `vllm_server_*`
  fields): a `trl vllm-serve` server on other GPUs (`rl.vllm_server_policy.ServerVLLMEngine`).

The choice follows the TRL config the trainer runs with, so TRL-only settings reach it too.
"""

from __future__ import annotations

from typing import Any

from agentdata.errors import UserError


class AfterWeightSync:
    """Every process waits for the others before its rollouts: in server mode only the main process
    pushes the new weights, and the others must not generate from the server before it has them."""

    def __init__(self, rollout_func: Any):
        self.rollout_func = rollout_func

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        trainer.accelerator.wait_for_everyone()
        return self.rollout_func(prompts, trainer)


def attach_rollout_engine(trainer: Any, rollout: Any, tokenizer: Any) -> Any:
    """Give `rollout` (an AgentRollout) the engine the trainer's settings ask for; returns it."""
    args = trainer.args
    if not args.use_vllm:
        from agentdata.rl.policy import PolicyEngine

        rollout.engine = PolicyEngine(trainer.model, tokenizer)
    elif args.vllm_mode == "server":
        from agentdata.rl.vllm_server_policy import ServerVLLMEngine

        rollout.engine = ServerVLLMEngine.for_trainer(trainer)
        if trainer.accelerator.num_processes > 1:
            trainer.rollout_func = AfterWeightSync(trainer.rollout_func)
    else:
        from agentdata.rl.vllm_policy import ColocatedVLLMEngine

        if getattr(args, "vllm_enable_sleep_mode", False):
            raise UserError(
                "vllm_enable_sleep_mode is not supported with agent rollouts: TRL wakes the sleeping "
                "vLLM only around its own generate calls; leave it off"
            )

        rollout.engine = ColocatedVLLMEngine.for_trainer(trainer)
    return rollout.engine
