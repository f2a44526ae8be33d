"""Built-in problems: what `collect` and `filter` use when no problem file is given.

`default_problems()`: what `collect`, `filter` and GRPO run when given no problems — 16
problems of the `compute` ladder (synth.ladder), levels 1-3: one line of Python away, so the
embedded `smollm2-tir` solves a fair share of them when it runs code and few when it does not.

The ladder's seeds are split, and nothing is tuned on the held-out one:
- `DEV_SEED` (7): where `smollm2-tir`'s worked examples were tried out;
- `DEFAULT_SEED` (0): the default problems (collect, filter, GRPO; the default mix was sized on it);
- `HELD_OUT_SEED` (1): evaluation only (the quickstart's eval, bench/, the slow tests).

`builtin_problems()`: sixteen fixed mixed problems (arithmetic to probability), mostly
easy; each answer is written in the form `is_correct` accepts; the tests re-derive every one.
"""

from __future__ import annotations

from agentdata.records import Problem
from agentdata.synth.generators import INSTRUCTION, generate_problems

DEV_SEED = 7  # smollm2-tir's worked examples were tried on this seed
DEFAULT_SEED = 0  # the default problems of collect, filter and GRPO
HELD_OUT_SEED = 1  # evaluation only: never used to choose a default

# (kind, level, question, answer)
_BUILTIN: tuple[tuple[str, int, str, str], ...] = (
    ("arithmetic", 1, "What is $17 \\times 23$?", "391"),
    ("arithmetic", 1, "Compute $2^{20}$.", "1048576"),
    ("arithmetic", 1, "What is the sum of the integers from 1 to 100?", "5050"),
    ("arithmetic", 1, "Compute $\\frac{1}{2} + \\frac{1}{3}$ as a fraction in lowest terms.", "\\frac{5}{6}"),
    ("algebra", 1, "Solve for $x$: $3x + 7 = 22$.", "5"),
    ("algebra", 1, "Find the larger root of $x^2 - 5x + 6 = 0$.", "3"),
    ("algebra", 2, "Compute $1^2 + 2^2 + \\cdots + 10^2$.", "385"),
    (
        "algebra",
        2,
        "The Fibonacci numbers start $F_1 = F_2 = 1$ and $F_n = F_{n-1} + F_{n-2}$. What is $F_{20}$?",
        "6765",
    ),
    ("number_theory", 1, "What is the greatest common divisor of 84 and 126?", "42"),
    ("number_theory", 1, "What is the remainder when $2^{100}$ is divided by 7?", "2"),
    ("number_theory", 1, "How many prime numbers are less than 50?", "15"),
    ("number_theory", 2, "What is the sum of the digits of $2^{15}$?", "26"),
    ("combinatorics", 1, "In how many ways can 3 people be chosen from a group of 10?", "120"),
    ("combinatorics", 1, "How many distinct arrangements of the letters of the word LEVEL are there?", "30"),
    ("probability", 1, "Two fair coins are flipped. What is the probability that both show heads?", "\\frac{1}{4}"),
    (
        "probability",
        1,
        "Two fair six-sided dice are rolled. What is the probability that the sum is 7?",
        "\\frac{1}{6}",
    ),
)


def builtin_problems() -> list[Problem]:
    """The 16 built-in problems, in a fixed order with stable ids."""
    return [
        Problem(
            question=f"{question} {INSTRUCTION}",
            answer=answer,
            source=f"builtin/{kind}",
            domain="math",
            metadata={"kind": kind, "level": level, "builtin": True},
        )
        for kind, level, question, answer in _BUILTIN
    ]


def default_problems(n: int = 16, seed: int = DEFAULT_SEED) -> list[Problem]:
    """The problems `collect` and `filter` run when given none: the `compute` ladder, levels 1-3."""
    return generate_problems(n, seed=seed, kinds=["compute"])
