"""GRPO on TRL's GRPOTrainer with agentdata's agent loop and sandbox in the rollouts.

The trainer (torch, TRL) is imported when first asked for, so reading the settings stays light.
"""

from agentdata.rl.config import GRPOStageConfig

__all__ = ["GRPOResult", "GRPOStageConfig", "run_grpo"]


def __getattr__(name: str):
    if name in ("GRPOResult", "run_grpo"):
        from agentdata.rl import run

        return getattr(run, name)
    raise AttributeError(name)
