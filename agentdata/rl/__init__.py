"""GRPO on TRL's GRPOTrainer with agentdata's agent loop and sandbox in the rollouts."""

from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.run import GRPOResult, run_grpo

__all__ = ["GRPOResult", "GRPOStageConfig", "run_grpo"]
