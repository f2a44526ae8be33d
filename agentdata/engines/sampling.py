"""How a rollout samples, as one value: `Sampling` (temperature, top_p, max_new_tokens, seed, stop).

Every default is written here once. The agent loop builds its requests from its loop's `Sampling`, the
recording gateway fills what a harness's request leaves unset from the run's, GRPO's rollouts and the
policy evaluated during training sample at `ROLLOUT_TEMPERATURE`; a setting the user types
(`--temperature`, `temperature=`, `loop.temperature=`) lands in a `LoopConfig`, which hands its
`Sampling` on (`LoopConfig.rollout_sampling`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

# collect's and eval's teacher: a little below the model's full distribution.
DEFAULT_TEMPERATURE = 0.7
# RL rollouts sample the full distribution (the findings' setting: exploration needs it). GRPO's rollouts run at
# it, filter profiles the student at it so the pass rates are the ones GRPO will see, and validation during
# training evaluates at it.
ROLLOUT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 1.0
DEFAULT_MAX_NEW_TOKENS = 512  # the agent loop: every turn of a trajectory together; the gateway: each request's cap


@dataclass(frozen=True)
class Sampling:
    """One rollout's sampling settings. `max_new_tokens` is a budget: the agent loop spends it over a
    trajectory's turns, the gateway caps each request of a harness at it. `seed` None: unseeded."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def request_fields(self) -> dict[str, Any]:
        """The keywords of a `GenerationRequest` that samples so (engines/base.py)."""
        return asdict(self)

    def with_(self, **changes: Any) -> Sampling:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """As a trajectory records it: the stop strings as a list."""
        return {**asdict(self), "stop": list(self.stop)}
