"""Whether a final answer equals the gold answer (math, numbers, multiple-choice letters).

This is the answer half of `verify.grade.grade`, the one definition of "correct": `grade` sends
every problem that is not code here, and runs code problems' tests instead. Call `is_correct`
directly only where there is no problem, just a response and a gold answer (a reward given
completions from outside the agent loop, a stitched solution's check).
"""

from __future__ import annotations

from functools import lru_cache

from agentdata.verify.extract import extract_answer, last_boxed
from agentdata.verify.quick import quick_verdict
from agentdata.verify.workers import shared_pool

DEFAULT_TIMEOUT_S = 5.0


def is_correct(response: str | None, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether the final answer in `response` equals `gold` (the reference).

    The answer is found by `extract_answer`; no answer is wrong. Never raises for odd
    input, safe from any thread or process, and returns False when the comparison takes
    longer than timeout_s.
    """
    answer = extract_answer(response)
    if answer is None:
        return False
    return answers_match(answer, gold, timeout_s)


def answers_match(answer: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Compare an already extracted answer with the gold answer."""
    gold = gold_answer(gold)
    verdict = _settled(answer, gold)
    if verdict is not None:
        return verdict
    return _math_verify(answer.strip(), gold, timeout_s)


def settled_match(answer: str, gold: str) -> bool | None:
    """`answers_match` where plain rules settle it (no answer, integers, letters, ...); None where only
    math-verify can tell. Cheap and in-process: the agent loop grades these without a thread."""
    return _settled(answer, gold_answer(gold))


def _settled(answer: str, gold: str) -> bool | None:
    """`settled_match` on a gold answer already reduced by `gold_answer`."""
    if not gold or not answer.strip():
        return False
    return quick_verdict(answer, gold)


def gold_answer(gold: object) -> str:
    """Gold answers sometimes come as a full solution: keep only its boxed part."""
    text = "" if gold is None else str(gold).strip()
    boxed = last_boxed(text)
    return boxed if boxed else text


@lru_cache(maxsize=65536)
def _math_verify(answer: str, gold: str, timeout_s: float) -> bool:
    # Cached: in GRPO the same group answer is checked against the same gold many times.
    return shared_pool().check(gold, answer, timeout_s)
