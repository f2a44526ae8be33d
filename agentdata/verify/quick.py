"""Cheap verdicts that settle most checks without sympy.

`quick_verdict(answer, gold)` returns True/False when the answer can be judged by plain
string or number rules that agree with math-verify, and None when math-verify must decide.
It is the common case in RL (integer answers, letters), so it keeps thousands of checks
per second possible.
"""

from __future__ import annotations

import re
from fractions import Fraction

# Spacing and sizing commands that never change a value.
_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|\\quad|\\qquad|\$|\s")
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textrm|mbox)\{([^{}]*)\}")
_INTEGER = re.compile(r"[+-]?\d+")
_GROUPED_INTEGER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+)")
_SLASH_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_LATEX_FRACTION = re.compile(r"([+-]?)\\[dt]?frac\{([+-]?\d+)\}\{([+-]?\d+)\}")
_CHOICE = re.compile(r"\(?([A-J])\)?\.?")
_CHOICE_WITH_TEXT = re.compile(r"\(?([A-J])[).:]\s*.*", re.DOTALL)

# math-verify rounds to 6 decimals when one side is a decimal; we settle only the
# clear cases and leave near-ties to it.
_SURELY_EQUAL = 1e-12
_SURELY_DIFFERENT = 1e-5


def normalise(text: str) -> str:
    text = _WRAPPERS.sub(r"\1", text)
    text = _NOISE.sub("", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return text.rstrip(".")


def choice_letter(text: str, allow_trailing_text: bool = False) -> str | None:
    """'C', '(C)', '\\text{C}', 'C.' -> 'C'; with allow_trailing_text also 'C) 42'."""
    stripped = _WRAPPERS.sub(r"\1", text.strip()).replace("$", "").strip()
    match = _CHOICE.fullmatch(stripped)
    if match is None and allow_trailing_text:
        match = _CHOICE_WITH_TEXT.fullmatch(stripped)
    return match.group(1) if match else None


def parse_number(text: str) -> tuple[Fraction, bool] | None:
    """(value, is_decimal) for plain integers, decimals and integer fractions; None otherwise."""
    if _INTEGER.fullmatch(text):
        return Fraction(int(text)), False
    if _GROUPED_INTEGER.fullmatch(text):
        return Fraction(int(text.replace(",", ""))), False
    if _DECIMAL.fullmatch(text):
        return Fraction(text), True
    for pattern in (_SLASH_FRACTION, _LATEX_FRACTION):
        match = pattern.fullmatch(text)
        if match:
            sign, numerator, denominator = match.groups()
            if int(denominator) == 0:
                return None
            value = Fraction(int(numerator), int(denominator))
            return (-value if sign == "-" else value), False
    return None


def quick_verdict(answer: str, gold: str) -> bool | None:
    """True/False when cheap rules decide; None to defer to math-verify."""
    gold_letter = choice_letter(gold)
    if gold_letter is not None:
        return choice_letter(answer, allow_trailing_text=True) == gold_letter
    answer_text, gold_text = normalise(answer), normalise(gold)
    if not answer_text:
        return False
    if answer_text == gold_text:
        return True
    return _numeric_verdict(answer_text, gold_text)


def _numeric_verdict(answer_text: str, gold_text: str) -> bool | None:
    answer_number, gold_number = parse_number(answer_text), parse_number(gold_text)
    if answer_number is None or gold_number is None:
        return None
    (answer_value, answer_decimal), (gold_value, gold_decimal) = answer_number, gold_number
    if not (answer_decimal or gold_decimal):
        return answer_value == gold_value
    gap = abs(answer_value - gold_value)
    if gap <= _SURELY_EQUAL:
        return True
    if gap > _SURELY_DIFFERENT * max(1, abs(gold_value)):
        return False
    return None
