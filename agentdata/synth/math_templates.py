"""The math problem templates of the five kinds, each a function of a seeded RNG, with answers by sympy.

Each template draws its parameters from the RNG it is given and returns a `Draft`: the question,
the exact answer and the parameters (so a test can re-derive the answer by brute force).
`TEMPLATES[kind][level]` lists them; `generators.py` turns drafts into problems.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import sympy


@dataclass(frozen=True)
class Draft:
    question: str
    answer: sympy.Basic | int
    params: dict


Template = Callable[[random.Random], Draft]


def canonical_answer(value: sympy.Basic | int) -> str:
    """Integers as digits, fractions as \\frac{p}{q}, anything else as sympy's LaTeX."""
    value = sympy.nsimplify(value) if isinstance(value, float) else sympy.sympify(value)
    if value.is_Integer:
        return str(int(value))
    if value.is_Rational:
        sign = "-" if value < 0 else ""
        return f"{sign}\\frac{{{abs(value.p)}}}{{{value.q}}}"
    return sympy.latex(value)


# --------------------------------------------------------------------------- arithmetic


def _arith_two_numbers(rng: random.Random) -> Draft:
    a, b = rng.randint(12, 99), rng.randint(12, 99)
    op = rng.choice(["+", "-", "\\times"])
    value = {"+": a + b, "-": a - b, "\\times": a * b}[op]
    return Draft(f"Compute ${a} {op} {b}$.", sympy.Integer(value), {"a": a, "b": b, "op": op})


def _arith_fractions(rng: random.Random) -> Draft:
    a, b = rng.randint(1, 9), rng.randint(2, 12)
    c, d = rng.randint(1, 9), rng.randint(2, 12)
    op = rng.choice(["+", "-"])
    value = sympy.Rational(a, b) + (1 if op == "+" else -1) * sympy.Rational(c, d)
    question = (
        f"Compute $\\frac{{{a}}}{{{b}}} {op} \\frac{{{c}}}{{{d}}}$. Give the answer as a fraction in lowest terms."
    )
    return Draft(question, value, {"a": a, "b": b, "c": c, "d": d, "op": op})


def _arith_big_powers(rng: random.Random) -> Draft:
    a, m = rng.randint(3, 9), rng.randint(15, 30)
    b, n = rng.randint(3, 9), rng.randint(10, 25)
    value = sympy.Integer(a) ** m - sympy.Integer(b) ** n
    return Draft(f"Compute ${a}^{{{m}}} - {b}^{{{n}}}$ exactly.", value, {"a": a, "m": m, "b": b, "n": n})


# --------------------------------------------------------------------------- algebra


def _alg_linear(rng: random.Random) -> Draft:
    x = rng.randint(-20, 20)
    a = rng.choice([n for n in range(-9, 10) if n not in (0, 1)])
    b = rng.randint(-30, 30)
    symbol = sympy.Symbol("x")
    solution = sympy.solve(sympy.Eq(a * symbol + b, a * x + b), symbol)[0]
    left = f"{a}x {'+' if b >= 0 else '-'} {abs(b)}"
    return Draft(f"Solve for $x$: ${left} = {a * x + b}$.", solution, {"a": a, "b": b, "c": a * x + b})


def _alg_expand(rng: random.Random) -> Draft:
    a, b = rng.randint(1, 6), rng.choice([n for n in range(-9, 10) if n])
    c, d = rng.randint(1, 6), rng.choice([n for n in range(-9, 10) if n])
    x = sympy.Symbol("x")
    expanded = sympy.expand((a * x + b) * (c * x + d))
    factor = lambda p, q: f"({'' if p == 1 else p}x {'+' if q > 0 else '-'} {abs(q)})"  # noqa: E731
    return Draft(f"Expand ${factor(a, b)}{factor(c, d)}$.", expanded, {"a": a, "b": b, "c": c, "d": d})


def _alg_quadratic_root(rng: random.Random) -> Draft:
    r, s = rng.sample(range(-12, 13), 2)
    x = sympy.Symbol("x")
    polynomial = sympy.expand((x - r) * (x - s))
    largest = max(sympy.solve(polynomial, x))
    return Draft(f"Find the larger root of ${sympy.latex(polynomial)} = 0$.", largest, {"p": -(r + s), "q": r * s})


def _alg_polynomial_sum(rng: random.Random) -> Draft:
    a, b, c = rng.randint(1, 5), rng.randint(-9, 9), rng.randint(-20, 20)
    n = rng.randint(100, 2000)
    k = sympy.Symbol("k")
    triangular = sympy.Rational(n * (n + 1), 2)
    total = a * triangular**2 + b * triangular + c * n  # sum k^3 = T_n^2, sum k = T_n
    term = sympy.latex(a * k**3 + b * k + c)
    return Draft(f"Compute $\\sum_{{k=1}}^{{{n}}} \\left({term}\\right)$.", total, {"a": a, "b": b, "c": c, "n": n})


def _alg_recurrence(rng: random.Random) -> Draft:
    a0, a1 = rng.randint(1, 5), rng.randint(1, 5)
    p, q = rng.randint(1, 3), rng.randint(1, 3)
    n = rng.randint(25, 60)
    modulus = rng.choice([1000, 10007, 99991])
    values = [sympy.Integer(a0), sympy.Integer(a1)]
    for _ in range(2, n + 1):
        values.append(p * values[-1] + q * values[-2])
    question = (
        f"A sequence has $a_0 = {a0}$, $a_1 = {a1}$ and $a_n = {p} a_{{n-1}} + {q} a_{{n-2}}$ for $n \\ge 2$. "
        f"What is the remainder when $a_{{{n}}}$ is divided by ${modulus}$?"
    )
    return Draft(question, sympy.Mod(values[n], modulus), {"a0": a0, "a1": a1, "p": p, "q": q, "n": n, "m": modulus})


# --------------------------------------------------------------------------- number theory


def _nt_gcd_lcm(rng: random.Random) -> Draft:
    common = rng.randint(2, 15)
    a, b = common * rng.randint(2, 30), common * rng.randint(2, 30)
    if rng.random() < 0.5:
        return Draft(
            f"What is the greatest common divisor of ${a}$ and ${b}$?", sympy.gcd(a, b), {"a": a, "b": b, "f": "gcd"}
        )
    return Draft(
        f"What is the least common multiple of ${a}$ and ${b}$?", sympy.lcm(a, b), {"a": a, "b": b, "f": "lcm"}
    )


def _nt_divisors(rng: random.Random) -> Draft:
    n = rng.randint(100, 5000)
    if rng.random() < 0.5:
        return Draft(f"How many positive divisors does ${n}$ have?", sympy.divisor_count(n), {"n": n, "f": "count"})
    return Draft(f"What is the sum of all positive divisors of ${n}$?", sympy.divisor_sigma(n), {"n": n, "f": "sum"})


def _nt_power_mod(rng: random.Random) -> Draft:
    base, exponent = rng.randint(2, 50), rng.randint(10, 60)
    modulus = rng.randint(7, 200)
    value = sympy.Mod(sympy.Integer(base) ** exponent, modulus)
    return Draft(
        f"What is the remainder when ${base}^{{{exponent}}}$ is divided by ${modulus}$?",
        value,
        {"b": base, "e": exponent, "m": modulus},
    )


def _nt_big_power_mod(rng: random.Random) -> Draft:
    base, exponent = rng.randint(2, 999), rng.randint(10**4, 10**6)
    modulus = sympy.prevprime(rng.randint(10**5, 10**7))
    value = sympy.Integer(pow(base, exponent, int(modulus)))
    return Draft(
        f"What is the remainder when ${base}^{{{exponent}}}$ is divided by ${modulus}$?",
        value,
        {"b": base, "e": exponent, "m": int(modulus)},
    )


def _nt_prime_sum(rng: random.Random) -> Draft:
    low, high = sorted(rng.sample(range(100, 20000), 2))
    value = sum(sympy.primerange(low, high + 1))
    return Draft(
        f"What is the sum of all primes $p$ with ${low} \\le p \\le {high}$?",
        sympy.Integer(value),
        {"low": low, "high": high},
    )


def _nt_coprime_count(rng: random.Random) -> Draft:
    modulus = rng.choice([30, 36, 42, 60, 84, 90, 105, 120, 210, 360])
    limit = rng.randint(1000, 100000)
    # each full block of `modulus` numbers holds totient(modulus) coprimes; count the tail directly
    full_blocks, tail = divmod(limit, modulus)
    value = full_blocks * sympy.totient(modulus) + sum(1 for n in range(1, tail + 1) if sympy.igcd(n, modulus) == 1)
    return Draft(
        f"How many integers $n$ with $1 \\le n \\le {limit}$ are coprime to ${modulus}$?",
        sympy.Integer(value),
        {"limit": limit, "m": modulus},
    )


# --------------------------------------------------------------------------- combinatorics


def _comb_choose(rng: random.Random) -> Draft:
    n = rng.randint(5, 40)
    k = rng.randint(2, min(8, n - 1))
    return Draft(
        f"In how many ways can a committee of {k} people be chosen from {n} people?",
        sympy.binomial(n, k),
        {"n": n, "k": k},
    )


_POSITIONS = ("a president", "a vice-president", "a treasurer", "a secretary", "a captain")


def _comb_ordered_roles(rng: random.Random) -> Draft:
    n, k = rng.randint(5, 30), rng.randint(2, 4)
    roles = ", ".join(_POSITIONS[: k - 1]) + f" and {_POSITIONS[k - 1]}"
    return Draft(
        f"In how many ways can {roles} be chosen from {n} people, if nobody holds two roles?",
        sympy.ff(n, k),
        {"n": n, "k": k},
    )


_WORD_LETTERS = "AABBCDEEGILMNNOPRSST"


def _comb_word_arrangements(rng: random.Random) -> Draft:
    length = rng.randint(5, 9)
    word = "".join(rng.choice(_WORD_LETTERS) for _ in range(length))
    counts = [word.count(letter) for letter in sorted(set(word))]
    value = sympy.factorial(length) / sympy.prod(sympy.factorial(c) for c in counts)
    return Draft(
        f"How many distinct arrangements of the letters of the string {word} are there?", value, {"word": word}
    )


def _comb_digit_sum(rng: random.Random) -> Draft:
    digits = rng.randint(4, 6)
    target = rng.randint(5, 9 * digits - 5)
    x = sympy.Symbol("x")
    # generating function: first digit 1..9, others 0..9
    first = sympy.Poly(sum(x**d for d in range(1, 10)), x)
    rest = sympy.Poly(sum(x**d for d in range(10)), x) ** (digits - 1)
    value = (first * rest).coeff_monomial(x**target)
    return Draft(
        f"How many {digits}-digit positive integers have digits that sum to {target}?",
        sympy.Integer(value),
        {"digits": digits, "target": target},
    )


def _comb_inclusion_exclusion(rng: random.Random) -> Draft:
    a, b = rng.sample([3, 4, 5, 6, 7, 11, 13], 2)
    c = rng.choice([d for d in (2, 9, 10, 15, 17) if d not in (a, b)])
    limit = rng.randint(1000, 50000)
    multiples = lambda *ds: limit // sympy.ilcm(1, *ds)  # noqa: E731  (how many of 1..limit all ds divide)
    either = multiples(a) + multiples(b) - multiples(a, b)
    either_and_c = multiples(a, c) + multiples(b, c) - multiples(a, b, c)
    question = f"How many integers from 1 to {limit} are divisible by {a} or {b} but not by {c}?"
    return Draft(question, sympy.Integer(either - either_and_c), {"a": a, "b": b, "c": c, "limit": limit})


def _comb_subset_sums(rng: random.Random) -> Draft:
    n, k = rng.randint(10, 16), rng.randint(3, 5)
    modulus = rng.randint(3, 11)
    # ways[j][r]: j-element subsets of the numbers seen so far whose sum is r mod modulus
    ways = [[0] * modulus for _ in range(k + 1)]
    ways[0][0] = 1
    for number in range(1, n + 1):
        for size in range(k, 0, -1):
            for residue in range(modulus):
                ways[size][(residue + number) % modulus] += ways[size - 1][residue]
    question = f"How many {k}-element subsets of $\\{{1, 2, \\ldots, {n}\\}}$ have a sum divisible by {modulus}?"
    return Draft(question, sympy.Integer(ways[k][0]), {"n": n, "k": k, "m": modulus})


# --------------------------------------------------------------------------- probability


def _prob_single_draw(rng: random.Random) -> Draft:
    red, blue = rng.randint(1, 20), rng.randint(1, 20)
    return Draft(
        f"A bag holds {red} red and {blue} blue marbles. One marble is drawn at random. "
        "What is the probability that it is red?",
        sympy.Rational(red, red + blue),
        {"red": red, "blue": blue},
    )


def _prob_two_dice(rng: random.Random) -> Draft:
    sides = rng.choice([4, 6, 8, 10, 12, 20])
    target = rng.randint(2, 2 * sides)
    favourable = min(target - 1, 2 * sides + 1 - target)  # pairs (a, target - a) with both faces valid
    return Draft(
        f"Two fair {sides}-sided dice (faces 1 to {sides}) are rolled. "
        f"What is the probability that the sum is {target}?",
        sympy.Rational(favourable, sides**2),
        {"sides": sides, "target": target},
    )


def _prob_two_draws_same_colour(rng: random.Random) -> Draft:
    red, blue = rng.randint(2, 15), rng.randint(2, 15)
    total = red + blue
    value = (sympy.binomial(red, 2) + sympy.binomial(blue, 2)) / sympy.binomial(total, 2)
    return Draft(
        f"A bag holds {red} red and {blue} blue marbles. Two marbles are drawn without replacement. "
        "What is the probability that they have the same colour?",
        value,
        {"red": red, "blue": blue},
    )


def _prob_dice_sum_at_least(rng: random.Random) -> Draft:
    dice = rng.randint(3, 6)
    threshold = rng.randint(dice * 3, dice * 5)
    x = sympy.Symbol("x")
    polynomial = sympy.Poly(sum(x**face for face in range(1, 7)) ** dice, x)
    favourable = sum(polynomial.coeff_monomial(x**s) for s in range(threshold, 6 * dice + 1))
    return Draft(
        f"{dice} fair six-sided dice are rolled. What is the probability that the sum is at least {threshold}?",
        sympy.Rational(favourable, 6**dice),
        {"dice": dice, "threshold": threshold},
    )


def _prob_coins_at_least(rng: random.Random) -> Draft:
    flips = rng.randint(10, 40)
    heads = rng.randint(flips // 2, flips - 2)
    favourable = sum(sympy.binomial(flips, h) for h in range(heads, flips + 1))
    return Draft(
        f"A fair coin is flipped {flips} times. What is the probability of getting at least {heads} heads?",
        sympy.Rational(favourable, 2**flips),
        {"flips": flips, "heads": heads},
    )


TEMPLATES: dict[str, dict[int, tuple[Template, ...]]] = {
    "arithmetic": {1: (_arith_two_numbers,), 2: (_arith_fractions,), 3: (_arith_big_powers,)},
    "algebra": {1: (_alg_linear,), 2: (_alg_expand, _alg_quadratic_root), 3: (_alg_polynomial_sum, _alg_recurrence)},
    "number_theory": {
        1: (_nt_gcd_lcm,),
        2: (_nt_divisors, _nt_power_mod),
        3: (_nt_big_power_mod, _nt_prime_sum, _nt_coprime_count),
    },
    "combinatorics": {
        1: (_comb_choose, _comb_ordered_roles),
        2: (_comb_word_arrangements,),
        3: (_comb_digit_sum, _comb_inclusion_exclusion, _comb_subset_sums),
    },
    "probability": {
        1: (_prob_single_draw, _prob_two_dice),
        2: (_prob_two_draws_same_colour,),
        3: (_prob_dice_sum_at_least, _prob_coins_at_least),
    },
}
