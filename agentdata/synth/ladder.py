"""The `compute` kind: problems a tiny model can solve when, and only when, it runs code.

Each answer is one Python expression away (a product of two 5-digit numbers, a digit sum
of a big power, a count by enumeration) but far out of reach of a 135M model's mental
arithmetic. That makes them the easy rung of the built-in ladder: the embedded default
(`smollm2-tir`) solves a fair share of them by writing one `print(...)`, and gets them
wrong when it does not run code, so tool use and reward really vary.

Level 1 is a single operation on big numbers, level 2 one builtin over a big number
(digit sums, remainders, powers), level 3 a count or sum by enumeration over a range.
Templates return (question, answer, params); `generators` turns them into problems.
"""

from __future__ import annotations

import random

Drafted = tuple[str, int, dict]


def digit_sum(value: int) -> int:
    return sum(int(digit) for digit in str(value))


def count_divisible(n: int, a: int, b: int) -> int:
    """How many of 1..n are divisible by a or by b, by enumeration (as code would)."""
    return sum(1 for k in range(1, n + 1) if k % a == 0 or k % b == 0)


def _big_product(rng: random.Random) -> Drafted:
    a, b = rng.randint(10_000, 99_999), rng.randint(1_000, 99_999)
    return f"What is {a} * {b}?", a * b, {"a": a, "b": b}


def _big_sum(rng: random.Random) -> Drafted:
    numbers = [rng.randint(100_000, 999_999) for _ in range(3)]
    return f"What is {' + '.join(map(str, numbers))}?", sum(numbers), {"numbers": numbers}


def _power(rng: random.Random) -> Drafted:
    base, exponent = rng.randint(3, 19), rng.randint(8, 15)
    return f"What is {base}^{exponent}?", base**exponent, {"base": base, "exponent": exponent}


def _digit_sum_of_power(rng: random.Random) -> Drafted:
    base, exponent = rng.randint(2, 9), rng.randint(20, 60)
    question = f"What is the sum of the digits of {base}^{exponent}?"
    return question, digit_sum(base**exponent), {"base": base, "exponent": exponent}


def _remainder(rng: random.Random) -> Drafted:
    a, m = rng.randint(10**8, 10**9), rng.randint(11, 997)
    return f"What is the remainder when {a} is divided by {m}?", a % m, {"a": a, "m": m}


def _count_multiples(rng: random.Random) -> Drafted:
    n = rng.randint(1_000, 9_999)
    a, b = rng.sample([3, 4, 5, 6, 7, 9, 11, 13], 2)
    question = f"How many integers from 1 to {n} are divisible by {a} or by {b}?"
    return question, count_divisible(n, a, b), {"n": n, "a": a, "b": b}


def _sum_of_squares(rng: random.Random) -> Drafted:
    n = rng.randint(50, 500)
    return (
        f"What is the sum of the squares of the integers from 1 to {n}?",
        sum(k * k for k in range(1, n + 1)),
        {"n": n},
    )


def _count_digit(rng: random.Random) -> Drafted:
    n, digit = rng.randint(200, 5_000), rng.randint(1, 9)
    question = f"How many of the integers from 1 to {n} contain the digit {digit}?"
    return question, sum(1 for k in range(1, n + 1) if str(digit) in str(k)), {"n": n, "digit": digit}


LADDER_TEMPLATES = {
    1: (_big_product, _big_sum, _power),
    2: (_digit_sum_of_power, _remainder, _sum_of_squares),
    3: (_count_multiples, _count_digit),
}
