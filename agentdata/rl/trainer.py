"""GRPOTrainer, configured for agentic RL, with two behaviours TRL lacks: dynamic sampling and
failed rollouts masked out of their group; and every step logs its share of flat groups
(`groups/flat_share`: every scorable reward of the group equal, so no gradient) and its samples that carry
a gradient (`groups/gradient_samples`: advantage not zero).

Pinned to TRL 1.16 (`trl==1.16.*` in pyproject): `_generate_and_score_completions` and
`_calculate_rewards` are private methods. This code relies on: the output dict
(completion_mask, tool_mask, advantages, num_items_in_batch); the rollout function's extra
fields being merged into the `inputs` dicts; and a row whose rewards are all NaN being left
out of its group's mean and std with its advantage set to 0 ("unscorable" in TRL).
tests/test_rl.py checks these against the installed TRL.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer

ZERO_ADVANTAGE = 1e-6
FAILED_FIELD = "rollout_failed"  # set by AgentRollout: True where the engine or sandbox failed
# Logged every step, whatever dynamic sampling and scale_rewards are: TRL's frac_reward_zero_std is
# the batch's std under scale_rewards=batch, and misses a group with one scorable rollout.
FLAT_GROUPS_KEY = "groups/flat_share"
# The samples of the step (all processes) whose advantage is not zero: what a pool's band is meant to raise.
GRADIENT_SAMPLES_KEY = "groups/gradient_samples"


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

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards, with every reward of a failed rollout set to NaN: TRL then leaves the row
        out of its group's baseline and std and gives it no advantage (a failure is no wrong answer)."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        failed = self.accelerator.gather(failed_rows(inputs, rewards_per_func.device))  # rewards are gathered too
        rewards_per_func[failed] = float("nan")
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        total = (rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(dim=1)
        total[rewards_per_func.isnan().all(dim=1)] = float("nan")
        self._metrics[mode][FLAT_GROUPS_KEY].append(flat_group_share(total, group_size))
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        failed = failed_rows(inputs, output["completion_mask"].device)  # inputs now hold the rollout's extra fields
        carrying = (output["advantages"].abs() >= ZERO_ADVANTAGE) & ~failed
        self._metrics[mode][GRADIENT_SAMPLES_KEY].append(float(self.accelerator.gather(carrying.sum()).sum().item()))
        masked = bool(failed.any())
        if masked:  # their tokens would still count in the token-level loss's normaliser
            output["completion_mask"] = output["completion_mask"] * (~failed).to(
                output["completion_mask"].dtype
            ).unsqueeze(1)
        if self.dynamic_sampling:
            group_size = self.num_generations if mode == "train" else self.num_generations_eval
            kept = drop_flat_groups(output, group_size)
            self._metrics[mode]["dynamic_sampling/kept_group_ratio"].append(kept)
        if masked or self.dynamic_sampling:
            loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output


def failed_rows(inputs: list[dict[str, Any]], device: Any) -> Any:
    """A bool tensor: which rows of the batch are rollouts that failed for infrastructure reasons."""
    import torch

    return torch.tensor([bool(row.get(FAILED_FIELD, False)) for row in inputs], dtype=torch.bool, device=device)


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


def flat_group_share(rewards: Any, group_size: int) -> float:
    """The share of groups whose scorable rewards are all equal (NaN: a failed rollout, left out): such a
    group gives no advantage, so no gradient. A group with fewer than two scorable rollouts is flat."""
    import torch

    if group_size < 1 or rewards.numel() % group_size:
        return float("nan")  # groups split across processes: not measurable here
    grouped = rewards.view(-1, group_size)
    scorable = ~grouped.isnan()
    highest = torch.where(scorable, grouped, -torch.inf).max(dim=1).values
    lowest = torch.where(scorable, grouped, torch.inf).min(dim=1).values
    flat = (scorable.sum(dim=1) < 2) | torch.isclose(highest, lowest)
    return float(flat.float().mean().item()) if flat.numel() else float("nan")
