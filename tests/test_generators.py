"""Built-in problem generators: determinism, uniqueness, and every answer re-derived by brute force."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from agentdata.cli.app import app
from agentdata.errors import UserError
from agentdata.problems import load_problems
from agentdata.synth.builtin import builtin_problems
from agentdata.synth.generators import KINDS, TEMPLATES, generate_problems, make_problem
from agentdata.verify import is_correct

# --------------------------------------------------------------------------- independent answers


def _digit_sum_count(digits: int, target: int) -> int:
    counts = {0: 1}  # sum -> how many digit prefixes reach it
    for position in range(digits):
        low = 1 if position == 0 else 0
        step: Counter = Counter()
        for total, ways in counts.items():
            for digit in range(low, 10):
                step[total + digit] += ways
        counts = step
    return counts.get(target, 0)


def _power_mod(base: int, exponent: int, modulus: int) -> int:
    result, base = 1, base % modulus
    while exponent:
        if exponent & 1:
            result = result * base % modulus
        base = base * base % modulus
        exponent >>= 1
    return result


def _primes_between(low: int, high: int) -> list[int]:
    sieve = bytearray([1]) * (high + 1)
    sieve[0:2] = b"\x00\x00"
    for number in range(2, int(high**0.5) + 1):
        if sieve[number]:
            sieve[number * number :: number] = bytearray(len(sieve[number * number :: number]))
    return [number for number in range(low, high + 1) if sieve[number]]


def _dice_at_least(dice: int, threshold: int) -> Fraction:
    sums = Counter({0: 1})
    for _ in range(dice):
        step: Counter = Counter()
        for total, ways in sums.items():
            for face in range(1, 7):
                step[total + face] += ways
        sums = step
    return Fraction(sum(w for s, w in sums.items() if s >= threshold), 6**dice)


def _same_colour(red: int, blue: int) -> Fraction:
    marbles = ["r"] * red + ["b"] * blue
    pairs = list(itertools.combinations(range(len(marbles)), 2))
    return Fraction(sum(marbles[i] == marbles[j] for i, j in pairs), len(pairs))


BRUTE_FORCE = {
    "arith_two_numbers": lambda p: {"+": p["a"] + p["b"], "-": p["a"] - p["b"], "\\times": p["a"] * p["b"]}[p["op"]],
    "arith_fractions": lambda p: Fraction(p["a"], p["b"]) + (1 if p["op"] == "+" else -1) * Fraction(p["c"], p["d"]),
    "arith_big_powers": lambda p: p["a"] ** p["m"] - p["b"] ** p["n"],
    "alg_linear": lambda p: Fraction(p["c"] - p["b"], p["a"]),
    "alg_quadratic_root": lambda p: max(x for x in range(-30, 31) if x * x + p["p"] * x + p["q"] == 0),
    "alg_polynomial_sum": lambda p: sum(p["a"] * k**3 + p["b"] * k + p["c"] for k in range(1, p["n"] + 1)),
    "nt_gcd_lcm": lambda p: (math.gcd if p["f"] == "gcd" else math.lcm)(p["a"], p["b"]),
    "nt_divisors": lambda p: (len if p["f"] == "count" else sum)([d for d in range(1, p["n"] + 1) if p["n"] % d == 0]),
    "nt_power_mod": lambda p: _power_mod(p["b"], p["e"], p["m"]),
    "nt_big_power_mod": lambda p: _power_mod(p["b"], p["e"], p["m"]),
    "nt_prime_sum": lambda p: sum(_primes_between(p["low"], p["high"])),
    "nt_coprime_count": lambda p: sum(1 for n in range(1, p["limit"] + 1) if math.gcd(n, p["m"]) == 1),
    "comb_choose": lambda p: (
        sum(1 for _ in itertools.combinations(range(p["n"]), p["k"])) if p["n"] <= 22 else math.comb(p["n"], p["k"])
    ),
    "comb_ordered_roles": lambda p: math.prod(range(p["n"] - p["k"] + 1, p["n"] + 1)),
    "comb_word_arrangements": lambda p: (
        math.factorial(len(p["word"])) // math.prod(math.factorial(c) for c in Counter(p["word"]).values())
    ),
    "comb_digit_sum": lambda p: _digit_sum_count(p["digits"], p["target"]),
    "comb_inclusion_exclusion": lambda p: sum(
        1 for n in range(1, p["limit"] + 1) if (n % p["a"] == 0 or n % p["b"] == 0) and n % p["c"]
    ),
    "comb_subset_sums": lambda p: sum(
        1 for s in itertools.combinations(range(1, p["n"] + 1), p["k"]) if sum(s) % p["m"] == 0
    ),
    "prob_single_draw": lambda p: Fraction(p["red"], p["red"] + p["blue"]),
    "prob_two_dice": lambda p: Fraction(
        sum(1 for a in range(1, p["sides"] + 1) for b in range(1, p["sides"] + 1) if a + b == p["target"]),
        p["sides"] ** 2,
    ),
    "prob_two_draws_same_colour": lambda p: _same_colour(p["red"], p["blue"]),
    "prob_dice_sum_at_least": lambda p: _dice_at_least(p["dice"], p["threshold"]),
    "prob_coins_at_least": lambda p: Fraction(
        sum(math.comb(p["flips"], h) for h in range(p["heads"], p["flips"] + 1)), 2 ** p["flips"]
    ),
}


def _expand_answer(p: dict) -> str:
    """(ax+b)(cx+d) expanded by hand, written differently from the gold (plain, with * signs)."""
    a, b, c, d = p["a"], p["b"], p["c"], p["d"]
    return f"{a * c}*x^2 + ({a * d + b * c})*x + ({b * d})"


def _as_response(value: int | Fraction) -> str:
    if isinstance(value, Fraction) and value.denominator != 1:
        return f"\\boxed{{{value.numerator}/{value.denominator}}}"
    return f"\\boxed{{{int(value)}}}"


@pytest.fixture(scope="module")
def generated():
    return generate_problems(150, seed=11)


def test_every_template_is_exercised(generated):
    used = {problem.metadata["template"] for problem in generated}
    every = {
        template.__name__.lstrip("_") for kind in KINDS for group in TEMPLATES[kind].values() for template in group
    }
    assert used == every
    assert every - {"alg_expand", "alg_recurrence"} <= set(BRUTE_FORCE)


def test_every_answer_matches_an_independent_computation(generated):
    for problem in generated:
        template, params = problem.metadata["template"], problem.metadata["params"]
        if template == "alg_expand":
            response = f"\\boxed{{{_expand_answer(params)}}}"
        elif template == "alg_recurrence":
            a, b = params["a0"], params["a1"]
            for _ in range(params["n"] - 1):
                a, b = b, params["p"] * b + params["q"] * a
            response = _as_response(b % params["m"])
        else:
            response = _as_response(BRUTE_FORCE[template](params))
        assert is_correct(response, problem.answer), (problem.question, problem.answer, response)


def test_wrong_answers_are_rejected(generated):
    numeric = [p for p in generated if p.metadata["template"] in BRUTE_FORCE][:40]
    for problem in numeric:
        value = BRUTE_FORCE[problem.metadata["template"]](problem.metadata["params"])
        assert not is_correct(_as_response(value + 1), problem.answer), problem.question


def test_generation_is_deterministic_and_seed_dependent():
    first = generate_problems(40, seed=5)
    assert first == generate_problems(40, seed=5)
    assert [p.id for p in first] != [p.id for p in generate_problems(40, seed=6)]


def test_questions_are_unique(generated):
    assert len({p.id for p in generated}) == len(generated)
    assert len({p.question for p in generated}) == len(generated)


def test_problem_is_regenerated_from_its_metadata(generated):
    for problem in generated[:30]:
        meta = problem.metadata
        assert make_problem(meta["kind"], meta["level"], meta["seed"]) == problem


def test_records_carry_source_kind_and_level(generated):
    for problem in generated:
        assert problem.source == f"synth/{problem.metadata['kind']}"
        assert problem.metadata["level"] in (1, 2, 3)
        assert "\\boxed{}" in problem.question
    counts = Counter((p.metadata["kind"], p.metadata["level"]) for p in generated)
    assert set(counts.values()) == {10}  # 150 problems spread evenly over 5 kinds x 3 levels


def test_kinds_and_levels_filter():
    problems = generate_problems(12, seed=1, kinds=["probability"], levels=[3])
    assert {(p.metadata["kind"], p.metadata["level"]) for p in problems} == {("probability", 3)}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kinds": ["geometry"]}, "unknown problem kind"),
        ({"levels": [4]}, "unknown level"),
        ({"n": 0}, "from 1 to"),
        ({"n": 10**8}, "from 1 to 1,000,000"),
    ],
)
def test_bad_choices_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=message):
        generate_problems(**{"n": 3, "seed": 0, **kwargs})


def test_too_many_problems_for_a_small_template_is_a_user_error():
    with pytest.raises(UserError, match="unique problems"):
        generate_problems(5000, seed=0, kinds=["combinatorics"], levels=[1])


# --------------------------------------------------------------------------- built-in problems

BUILTIN_CHECKS = [
    lambda: 17 * 23,
    lambda: 2**20,
    lambda: sum(range(1, 101)),
    lambda: Fraction(1, 2) + Fraction(1, 3),
    lambda: next(x for x in range(-100, 100) if 3 * x + 7 == 22),
    lambda: max(x for x in range(-100, 100) if x * x - 5 * x + 6 == 0),
    lambda: sum(k * k for k in range(1, 11)),
    lambda: _fibonacci(20),
    lambda: max(d for d in range(1, 85) if 84 % d == 0 and 126 % d == 0),
    lambda: 2**100 % 7,
    lambda: len(_primes_between(2, 49)),
    lambda: sum(map(int, str(2**15))),
    lambda: len(list(itertools.combinations(range(10), 3))),
    lambda: len(set(itertools.permutations("LEVEL"))),
    lambda: Fraction(sum(1 for a, b in itertools.product("HT", repeat=2) if a == b == "H"), 4),
    lambda: Fraction(sum(1 for a, b in itertools.product(range(1, 7), repeat=2) if a + b == 7), 36),
]


def _fibonacci(n: int) -> int:
    a, b = 1, 1
    for _ in range(n - 2):
        a, b = b, a + b
    return b


def test_builtin_problems_are_sixteen_mixed_and_unique():
    problems = builtin_problems()
    assert len(problems) == 16 == len(BUILTIN_CHECKS)
    assert len({p.id for p in problems}) == 16
    assert {p.metadata["kind"] for p in problems} == set(KINDS)
    assert builtin_problems() == problems


@pytest.mark.parametrize("index", range(16))
def test_builtin_answers_match_an_independent_computation(index):
    problem = builtin_problems()[index]
    assert is_correct(_as_response(BUILTIN_CHECKS[index]()), problem.answer), problem.question


# --------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_cli_writes_a_file_the_loader_reads_back(tmp_path, suffix):
    out = tmp_path / f"problems.{suffix}"
    result = CliRunner().invoke(
        app,
        [
            "synth",
            "problems",
            "--n",
            "12",
            "--seed",
            "4",
            "--out",
            str(out),
            "--kinds",
            "algebra,probability",
            "--levels",
            "1",
            "--levels",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    loaded = load_problems(out)
    expected = generate_problems(12, seed=4, kinds=["algebra", "probability"], levels=[1, 3])
    assert loaded == expected
    assert "12 problems" in result.output


# --------------------------------------------------------------------------- worked solutions


def test_worked_solutions_cover_their_templates_and_none_elsewhere(generated):
    from agentdata.synth.solutions import SOLUTIONS, worked_solution

    for problem in generated:
        solution = worked_solution(problem)
        assert (solution is None) == (problem.metadata["template"] not in SOLUTIONS)
        if solution is not None:
            assert solution.endswith(f"\\boxed{{{problem.answer}}}$.")
    assert worked_solution(builtin_problems()[0]) is None  # no template, no solution


def test_stitched_worked_solutions_run_and_their_output_is_the_answer():
    """Every solution template stitches into a tool call that really runs and prints the gold answer."""
    from agentdata.sandbox import Sandbox
    from agentdata.synth.solutions import SOLUTIONS, worked_solution
    from agentdata.synth.stitch import StitchConfig, stitch_solution

    one_per_template = {}
    for problem in [*generate_problems(400, seed=5), *generate_problems(40, seed=5, kinds=["compute"])]:
        one_per_template.setdefault(problem.metadata["template"], problem)
    assert set(SOLUTIONS) <= set(one_per_template)
    with Sandbox() as sandbox:
        for template in SOLUTIONS:
            problem = one_per_template[template]
            trajectory = stitch_solution(problem, worked_solution(problem), sandbox, StitchConfig())
            assert trajectory is not None, template
            assert trajectory.num_tool_calls >= 1 and trajectory.num_tool_errors == 0, template
            assert trajectory.metadata["calculations_matching_text"] == trajectory.metadata["calculations"], template
            assert trajectory.correct, template
            outputs = [m["content"] for m in trajectory.messages if m["role"] == "tool"]
            if template in ("prob_single_draw", "digit_sum_of_power"):  # the cell computes a part; the text the rest
                continue
            assert is_correct(f"\\boxed{{{outputs[-1].strip()}}}", problem.answer), (template, outputs)
