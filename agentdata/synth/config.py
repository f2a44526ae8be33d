"""`synth problems` settings: how many problems, of which kinds and levels."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.settings import check_fields

KINDS = ("arithmetic", "algebra", "number_theory", "combinatorics", "probability")
# `code` (the built-in code tasks of synth.code_builtin, levels 1-2) is asked for by name, not in the default mix.
# compute: synth.ladder, the rung smollm2-tir solves; chain: synth.chain, a value computed, then used
ALL_KINDS = (*KINDS, "code", "compute", "chain")
LEVELS = (1, 2, 3)
# About a millisecond each: a million take a quarter of an hour; more is a typo, refused (docs/synth-problems.md).
MAX_PROBLEMS = 1_000_000


@dataclass
class ProblemsConfig:
    n: int = field(default=100, metadata={"help": "How many problems to write.", "range": f"[1, {MAX_PROBLEMS}]"})
    seed: int = field(default=0, metadata={"help": "Base random seed.", "range": "[0, 4294967295]"})
    kinds: list[str] = field(
        default_factory=lambda: list(KINDS),
        metadata={
            "help": "Problem kinds, repeated or comma-separated: arithmetic, algebra, number_theory, combinatorics, "
            "probability (the default: all of these); code (built-in stdin and functional tasks with tests, "
            "levels 1-2), compute (one line of Python away) and chain (a value computed, then used).",
            "choices": ALL_KINDS,
        },
    )
    levels: list[int] = field(
        default_factory=lambda: list(LEVELS),
        metadata={"help": "Difficulty levels, repeated or comma-separated.", "choices": LEVELS, "range": "[1, 3]"},
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.kinds or not self.levels:
            raise ValueError("give at least one kind and one level")
