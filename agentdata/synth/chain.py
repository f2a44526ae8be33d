"""The `chain` kind: a value computed, then used: problems where a second tool call can help.

Each question names an intermediate value (`Let n be ...`) and asks for something computed from
it, both out of reach of a 135M model's mental arithmetic. One `print(...)` of a nested expression
solves it; so do two calls (the value, then the rest with the value read off the output), and a
model that guesses the first step gets the second wrong. That makes the number of calls a choice
that matters, which `agentdata experiment tool-calls` trains on: rewarding calls and rewarding few
calls must pull a model apart here, where on the one-step `compute` ladder a second call never helps.

Level 1 is two operations on big numbers, level 2 a builtin over a big number then arithmetic on the
result, level 3 a count by enumeration then a builtin over it. Templates return (question, answer,
params); `generators` turns them into problems like the `compute` ladder's.
"""

from __future__ import annotations

import random

from agentdata.synth.ladder import Drafted, count_divisible, digit_sum


def _product_then_remainder(rng: random.Random) -> Drafted:
    a, b, m = rng.randint(10_000, 99_999), rng.randint(1_000, 9_999), rng.randint(101, 997)
    question = f"Let n = {a} * {b}. What is the remainder when n is divided by {m}?"
    return question, (a * b) % m, {"a": a, "b": b, "m": m}


def _sum_then_square(rng: random.Random) -> Drafted:
    a, b = rng.randint(100_000, 999_999), rng.randint(100_000, 999_999)
    question = f"Let n = {a} + {b}. What is n squared?"
    return question, (a + b) ** 2, {"a": a, "b": b}


def _digit_sum_then_power(rng: random.Random) -> Drafted:
    base, exponent, power = rng.randint(2, 9), rng.randint(20, 60), rng.randint(3, 5)
    question = f"Let s be the sum of the digits of {base}^{exponent}. What is s^{power}?"
    return question, digit_sum(base**exponent) ** power, {"base": base, "exponent": exponent, "power": power}


def _remainder_then_product(rng: random.Random) -> Drafted:
    a, m, c = rng.randint(10**8, 10**9), rng.randint(11, 997), rng.randint(1_000, 9_999)
    question = f"Let r be the remainder when {a} is divided by {m}. What is r * {c}?"
    return question, (a % m) * c, {"a": a, "m": m, "c": c}


def _count_then_digit_sum(rng: random.Random) -> Drafted:
    n = rng.randint(1_000, 9_999)
    a, b = rng.sample([3, 4, 5, 6, 7, 9, 11, 13], 2)
    c = rng.randint(1_000, 9_999)
    count = count_divisible(n, a, b)
    question = (
        f"Let c be the number of integers from 1 to {n} divisible by {a} or by {b}. "
        f"What is the sum of the digits of c * {c}?"
    )
    return question, digit_sum(count * c), {"n": n, "a": a, "b": b, "c": c}


def _sum_of_squares_then_remainder(rng: random.Random) -> Drafted:
    n, m = rng.randint(50, 500), rng.randint(11, 97)
    question = (
        f"Let t be the sum of the squares of the integers from 1 to {n}. "
        f"What is the remainder when t is divided by {m}?"
    )
    return question, sum(k * k for k in range(1, n + 1)) % m, {"n": n, "m": m}


CHAIN_TEMPLATES = {
    1: (_product_then_remainder, _sum_then_square),
    2: (_digit_sum_then_power, _remainder_then_product),
    3: (_count_then_digit_sum, _sum_of_squares_then_remainder),
}
