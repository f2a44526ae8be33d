"""The GRPO stage's reward functions: the ones its settings name, from `agentdata.verify`.

Rewards are defined once, in `agentdata.verify.rewards`, on the same `verify.grade` verdict that
evaluation uses; the rollout bridge hands each reward the loop's own judgement (`correct`),
its tool-call count and the model's token count as extra columns. `settings.rewards` names
registered rewards (`correctness`, `overlong`) or plug-ins (`mypkg.rewards:brevity`,
`path/to/rewards.py:brevity`).
"""

from __future__ import annotations

from typing import Any

from agentdata.verify.rewards import build_rewards


def reward_functions(config: Any) -> list[Any]:
    """The rewards a GRPOStageConfig asks for, in its order."""
    return build_rewards(config.rewards, config)
