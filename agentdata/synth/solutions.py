"""Short worked text solutions for generated problems, for the stitched SFT data.

A short text solution per template: the calculation written as LaTeX steps with their
results stated, the form `agentdata synth stitch` cuts into code cells that really run.
They exist because no strong teacher is available offline: stitching them gives a
tool-use SFT set whose code and outputs are real (docs/synth-problems.md says more).
Templates whose calculation has no short closed form return None.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import sympy

from agentdata.records import Problem


def _signed(value: int) -> str:
    return f"({value})" if value < 0 else str(value)


def _sol_two_numbers(p: dict, answer: str) -> str:
    return f"We compute ${p['a']} {p['op']} {p['b']} = {answer}$."


def _sol_fractions(p: dict, answer: str) -> str:
    return (
        f"We combine the fractions: $\\frac{{{p['a']}}}{{{p['b']}}} {p['op']} "
        f"\\frac{{{p['c']}}}{{{p['d']}}} = {answer}$."
    )


def _sol_big_powers(p: dict, answer: str) -> str:
    return f"The numbers are large, so we compute exactly: ${p['a']}^{{{p['m']}}} - {p['b']}^{{{p['n']}}} = {answer}$."


def _sol_linear(p: dict, answer: str) -> str:
    move = f"Subtract {p['b']}" if p["b"] >= 0 else f"Add {-p['b']}"
    return (
        f"{move} on both sides and divide by {p['a']}: "
        f"$x = \\frac{{{p['c']} - {_signed(p['b'])}}}{{{p['a']}}} = {answer}$."
    )


def _sol_quadratic_root(p: dict, answer: str) -> str:
    b, c = _signed(p["p"]), _signed(p["q"])
    return (
        f"By the quadratic formula the larger root is "
        f"$x = \\frac{{-{b} + \\sqrt{{{b}^2 - 4 \\cdot {c}}}}}{{2}} = {answer}$."
    )


def _sol_polynomial_sum(p: dict, answer: str) -> str:
    k = sympy.Symbol("k")
    term = sympy.latex(p["a"] * k**3 + p["b"] * k + p["c"])
    return f"We add the terms: $\\sum_{{k=1}}^{{{p['n']}}} \\left({term}\\right) = {answer}$."


def _sol_power_mod(p: dict, answer: str) -> str:
    return f"We reduce the power modulo {p['m']}: ${p['b']}^{{{p['e']}}} \\mod {p['m']} = {answer}$."


def _sol_choose(p: dict, answer: str) -> str:
    n, k = p["n"], p["k"]
    return f"A committee is a subset, so we count $\\frac{{{n}!}}{{{k}! \\cdot {n - k}!}} = {answer}$."


def _sol_ordered_roles(p: dict, answer: str) -> str:
    n, k = p["n"], p["k"]
    return f"The roles are distinct, so order matters: $\\frac{{{n}!}}{{{n - k}!}} = {answer}$."


def _sol_word_arrangements(p: dict, answer: str) -> str:
    word = p["word"]
    repeats = [f"{word.count(letter)}!" for letter in sorted(set(word)) if word.count(letter) > 1]
    if not repeats:
        return f"All {len(word)} letters are different: ${len(word)}! = {answer}$."
    denominator = " \\cdot ".join(repeats)
    return (
        f"There are {len(word)} letters; we divide by the orderings of repeated letters: "
        f"$\\frac{{{len(word)}!}}{{{denominator}}} = {answer}$."
    )


def _sol_single_draw(p: dict, answer: str) -> str:
    total = p["red"] + p["blue"]
    return (
        f"There are ${p['red']} + {p['blue']} = {total}$ marbles, {p['red']} of them red, "
        f"so the probability is $\\frac{{{p['red']}}}{{{total}}} = {answer}$."
    )


def _sol_two_draws_same_colour(p: dict, answer: str) -> str:
    red, blue = p["red"], p["blue"]
    return (
        f"Both red or both blue, out of all pairs: "
        f"$\\frac{{\\binom{{{red}}}{{2}} + \\binom{{{blue}}}{{2}}}}{{\\binom{{{red + blue}}}{{2}}}} = {answer}$."
    )


# The `compute` ladder (synth/ladder.py): the stitched twin of what a teacher running code does on it,
# for `agentdata experiment`'s real-versus-stitched recipe. The text states the result, then the
# cell recomputes it (the stitched kind). A count of numbers containing a digit has no closed form.
def _sol_big_product(p: dict, answer: str) -> str:
    return f"We compute ${p['a']} \\times {p['b']} = {answer}$."


def _sol_big_sum(p: dict, answer: str) -> str:
    return f"We add the numbers: ${' + '.join(map(str, p['numbers']))} = {answer}$."


def _sol_power(p: dict, answer: str) -> str:
    return f"We compute ${p['base']}^{{{p['exponent']}}} = {answer}$."


def _sol_digit_sum_of_power(p: dict, answer: str) -> str:
    power = p["base"] ** p["exponent"]
    return f"We compute ${p['base']}^{{{p['exponent']}}} = {power}$, and the sum of its digits is {answer}."


def _sol_remainder(p: dict, answer: str) -> str:
    return f"We reduce: ${p['a']} \\mod {p['m']} = {answer}$."


def _sol_sum_of_squares(p: dict, answer: str) -> str:
    return f"We add the squares: $\\sum_{{k=1}}^{{{p['n']}}} k^2 = {answer}$."


def _sol_count_multiples(p: dict, answer: str) -> str:
    n, a, b = p["n"], p["a"], p["b"]
    both = a * b // math.gcd(a, b)
    floors = " + ".join(f"\\lfloor \\frac{{{n}}}{{{d}}} \\rfloor" for d in (a, b))
    return f"By inclusion and exclusion: ${floors} - \\lfloor \\frac{{{n}}}{{{both}}} \\rfloor = {answer}$."


SOLUTIONS: dict[str, Callable[[dict, str], str]] = {
    "arith_two_numbers": _sol_two_numbers,
    "arith_fractions": _sol_fractions,
    "arith_big_powers": _sol_big_powers,
    "alg_linear": _sol_linear,
    "alg_quadratic_root": _sol_quadratic_root,
    "alg_polynomial_sum": _sol_polynomial_sum,
    "nt_power_mod": _sol_power_mod,
    "comb_choose": _sol_choose,
    "comb_ordered_roles": _sol_ordered_roles,
    "comb_word_arrangements": _sol_word_arrangements,
    "prob_single_draw": _sol_single_draw,
    "prob_two_draws_same_colour": _sol_two_draws_same_colour,
    "big_product": _sol_big_product,
    "big_sum": _sol_big_sum,
    "power": _sol_power,
    "digit_sum_of_power": _sol_digit_sum_of_power,
    "remainder": _sol_remainder,
    "sum_of_squares": _sol_sum_of_squares,
    "count_multiples": _sol_count_multiples,
}


def worked_solution(problem: Problem) -> str | None:
    """A short worked solution ending in \\boxed{answer}, or None for templates without one."""
    make = SOLUTIONS.get(problem.metadata.get("template", ""))
    if make is None:
        return None
    # Two lines: stitch makes the first (the calculation) a step with a code cell, and the
    # boxed answer comes after the tool output.
    return f"{make(problem.metadata['params'], problem.answer)}\nSo the answer is $\\boxed{{{problem.answer}}}$."
