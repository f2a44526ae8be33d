"""The parts of the system prompt that every protocol shares.

Short on purpose: small models have small contexts. The style is the deliberative one
that DemyAgent found best: plan first, call the tool only when it helps, and stop
calling it once the answer is known.
"""

from __future__ import annotations

INTRO = "You solve problems step by step and can run Python code."

DELIBERATIVE_STYLE = (
    "Think first and make a plan. Run code only when a computation or a check helps, "
    "one call at a time, and read its output before going on. Print what you need to see. "
    "Once you know the answer, stop calling the tool."
)

ANSWER_FORMAT = "Give the final answer as \\boxed{answer} at the end."


def assemble(*sections: str) -> str:
    return "\n\n".join(section for section in sections if section)
