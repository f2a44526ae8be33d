"""Tool-use efficiency: the numbers the deliberative style is judged by, one definition for every report.

collect's stats, curate's report and eval's report each sum four counts over a group of
trajectories (all of them, one source, one domain) and turn them into the same numbers here:

- `calls_per_trajectory`: tool calls made per trajectory;
- `calls_per_correct`: tool calls made (by right and wrong trajectories alike) per correct answer,
  what a right answer costs in calls; None when none is correct;
- `failed_call_share`: the share of the calls that failed (an error, a timeout, an unknown tool).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class ToolUse:
    trajectories: int = 0
    correct: int = 0
    tool_calls: int = 0
    tool_errors: int = 0

    def add(self, correct: bool, tool_calls: int, tool_errors: int) -> None:
        self.trajectories += 1
        self.correct += bool(correct)
        self.tool_calls += int(tool_calls or 0)
        self.tool_errors += int(tool_errors or 0)

    @property
    def calls_per_correct(self) -> float | None:
        return self.tool_calls / self.correct if self.correct else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "trajectories": self.trajectories,
            "correct": self.correct,
            "tool_calls": self.tool_calls,
            "calls_per_trajectory": self.tool_calls / self.trajectories if self.trajectories else 0.0,
            "calls_per_correct": self.calls_per_correct,
            "failed_call_share": self.tool_errors / self.tool_calls if self.tool_calls else 0.0,
        }


def tool_use_by(rows: Iterable[tuple[str, bool, int, int]], name: str) -> list[dict[str, Any]]:
    """One row per group, sorted: `rows` are (group, correct, tool calls, tool errors) per trajectory."""
    groups: dict[str, ToolUse] = {}
    for group, correct, calls, errors in rows:
        groups.setdefault(str(group), ToolUse()).add(correct, calls, errors)
    return [{name: group, **groups[group].as_dict()} for group in sorted(groups)]
