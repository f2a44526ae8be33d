"""Which engine generates GRPO's rollouts: the policy itself, TRL's vLLM, or a vLLM server fed by files.

`plan_rollouts` decides from the stage's settings and the machine (`RolloutPlan.kind`):

- `policy` (`use_vllm: no`, or no vLLM to be had): the model being trained (`rl.policy.PolicyEngine`);
- `trl` (a CUDA GPU and vLLM in this process): TRL's own vLLM, whose mode follows the TRL config —
  `vllm_mode: colocate` (TRL's default): the `vllm.LLM` TRL builds in this process
  (`rl.vllm_policy.ColocatedVLLMEngine`); `vllm_mode: server` (`vllm_server: URL`, or TRL's own
  `vllm_server_*` fields): a `trl vllm-serve` server on other GPUs that TRL pushes weights to over NCCL
  (`rl.vllm_server_policy.ServerVLLMEngine`);
- `file-push` (no CUDA, or vLLM only in an environment of its own): a vLLM server on this machine — the
  one `vllm_server` names, else one agentdata starts from the policy's checkpoint — generates
  (`ServerVLLMEngine` over `rl.vllm_completions.CompletionsClient`), and the new weights reach it as
  files after every step (rl/vllm_push.py).

`use_vllm: auto` takes vLLM where it is installed (`trl` on a GPU, `file-push` on a CPU with
`.venv-vllm`) unless `AGENTDATA_VLLM=off`; `yes` insists on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentdata.errors import UserError


@dataclass(frozen=True)
class RolloutPlan:
    kind: str  # "policy" | "trl" | "file-push"
    server_url: str = ""  # file-push to this server; empty: agentdata starts one
    # file-push: the server was started on the policy's starting checkpoint (by run_grpo or the closed loop); a
    # server the user named (`vllm_server`) holds weights of its own, so the policy's go to it before any rollout
    server_has_start_weights: bool = False

    @property
    def trl_vllm(self) -> bool:
        """TRL itself drives vLLM (GRPOConfig.use_vllm)."""
        return self.kind == "trl"


def plan_rollouts(use_vllm: str, vllm_server: str) -> RolloutPlan:
    """Where the rollouts come from (see the module's docstring); a `yes` that cannot be met is one line."""
    import torch

    from agentdata.engines.vllm_server import INSTALL_HINT, find_vllm_python, in_process_vllm, vllm_by_default

    if use_vllm == "no":
        return RolloutPlan("policy")
    if torch.cuda.is_available() and in_process_vllm():
        return RolloutPlan("trl")
    if vllm_server:
        return RolloutPlan("file-push", vllm_server.rstrip("/"))
    if use_vllm == "yes":
        if find_vllm_python() is None:
            raise UserError(f"use_vllm yes: vLLM is not installed ({INSTALL_HINT})")
        return RolloutPlan("file-push")
    return RolloutPlan("file-push") if vllm_by_default() else RolloutPlan("policy")


class AfterWeightSync:
    """Every process waits for the others before its rollouts: in server mode only the main process
    pushes the new weights, and the others must not generate from the server before it has them."""

    def __init__(self, rollout_func: Any):
        self.rollout_func = rollout_func

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        trainer.accelerator.wait_for_everyone()
        return self.rollout_func(prompts, trainer)


def attach_rollout_engine(trainer: Any, rollout: Any, tokenizer: Any, plan: RolloutPlan | None = None) -> Any:
    """Give `rollout` (an AgentRollout) the engine `plan` asks for; returns it. Without a plan the TRL
    config decides (policy, or TRL's vLLM mode)."""
    if plan is not None and plan.kind == "file-push":
        return _attach_file_push(trainer, rollout, tokenizer, plan)
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


def _attach_file_push(trainer: Any, rollout: Any, tokenizer: Any, plan: RolloutPlan) -> Any:
    """Rollouts from the server through `/v1/completions` with token ids; the weights pushed as files after every
    step, and before the first rollouts where the server was not started on the policy's checkpoint."""
    from agentdata.rl.vllm_completions import CompletionsClient
    from agentdata.rl.vllm_push import FileWeightPush, PushWeightsCallback, check_file_push_server
    from agentdata.rl.vllm_server_policy import ServerVLLMEngine

    if trainer.accelerator.num_processes > 1:
        raise UserError("vLLM rollouts fed by files run in one training process; on several GPUs TRL uses NCCL")
    check_file_push_server(plan.server_url)
    pusher = FileWeightPush(plan.server_url)
    trainer.add_callback(PushWeightsCallback(pusher, push_at_start=not plan.server_has_start_weights))
    trainer.weight_push = pusher  # run_grpo reports its count and time, and removes its staging folder
    client = CompletionsClient(plan.server_url)
    rollout.engine = ServerVLLMEngine(client, tokenizer, spec="policy-vllm-file-push")
    return rollout.engine
