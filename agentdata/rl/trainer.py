"""GRPOTrainer, configured for agentic RL, with the one behaviour TRL lacks: dynamic sampling.

Pinned to TRL 1.16 (`trl==1.16.*` in pyproject): `_generate_and_score_completions` is a
private method whose output dict (completion_mask, tool_mask, advantages,
num_items_in_batch) this override relies on; tests/test_rl.py checks it.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer

ZERO_ADVANTAGE = 1e-6


class AgentGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that can leave groups with all-equal rewards out of the loss.

    Such a group has zero advantage everywhere, so it adds no gradient, but under the
    token-level (dapo) loss its tokens still count in the normaliser and dilute the groups
    that do carry signal. Dropping them from the mask is DAPO's dynamic sampling without
    the over-sampling (agentic rollouts are too expensive to draw extra groups).
    """

    def __init__(self, *args: Any, dynamic_sampling: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.dynamic_sampling = dynamic_sampling

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.dynamic_sampling:
            mode = "train" if self.model.training else "eval"
            group_size = self.num_generations if mode == "train" else self.num_generations_eval
            kept = drop_flat_groups(output, group_size)
            self._metrics[mode]["dynamic_sampling/kept_group_ratio"].append(kept)
            loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output


def drop_flat_groups(output: dict[str, Any], group_size: int) -> float:
    """Zero the completion mask of every group whose advantages are all zero; return the share kept."""
    advantages = output["advantages"]
    rows = advantages.shape[0]
    if rows % group_size:
        return 1.0  # groups split across processes: leave the batch as TRL built it
    flat = (advantages.abs() < ZERO_ADVANTAGE).view(-1, group_size).all(dim=1)
    keep_rows = (~flat).repeat_interleave(group_size).to(output["completion_mask"].dtype)
    output["completion_mask"] = output["completion_mask"] * keep_rows.unsqueeze(1)
    return float((~flat).float().mean().item()) if flat.numel() else 1.0
