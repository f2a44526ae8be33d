"""Built-in code problems: small stdin and functional tasks with tests, no download needed.

`agentdata synth problems --kinds code` writes them, so the quickstart and the tests exercise
code grading on the CPU default. Each task has a reference solution here; the expected
outputs are computed from it when the problem is made, so they are right by construction
(and the tests check that the reference passes its own tests in the sandbox). The first two
tests of a task are public (shown as examples in the question), the rest private.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentdata.code_problems import code_problem_id, with_answer_format
from agentdata.code_tests import CodeTests
from agentdata.records import Problem

PUBLIC_TESTS = 2


@dataclass(frozen=True)
class StdinTask:
    name: str
    level: int
    statement: str
    solve: Callable[[str], str]
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class FunctionTask:
    name: str
    level: int
    statement: str
    signature: str  # e.g. "def two_sum(self, nums: list[int], target: int) -> list[int]:"
    solve: Callable[..., Any]
    arguments: tuple[tuple[Any, ...], ...]


def _ints(text: str) -> list[int]:
    return [int(token) for token in text.split()]


def _collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def _primes_below(n: int) -> int:
    return sum(1 for k in range(2, n) if all(k % d for d in range(2, int(k**0.5) + 1)))


STDIN_TASKS: tuple[StdinTask, ...] = (
    StdinTask(
        "sum_two",
        1,
        "Read two integers a and b on one line and print a + b.",
        lambda t: str(sum(_ints(t))),
        ("1 2\n", "-5 7\n", "1000000000 1000000000\n", "0 0\n"),
    ),
    StdinTask(
        "max_of_list",
        1,
        "The first line holds n, the second n integers. Print the largest.",
        lambda t: str(max(_ints(t)[1:])),
        ("3\n1 9 4\n", "1\n-7\n", "5\n-1 -2 -3 -4 -5\n", "4\n8 8 8 2\n"),
    ),
    StdinTask(
        "reverse_string",
        1,
        "Read one line of text and print it reversed.",
        lambda t: t.strip("\n")[::-1],
        ("hello\n", "a\n", "racecar\n", "abc def\n"),
    ),
    StdinTask(
        "count_vowels",
        1,
        "Read a lowercase word and print how many vowels (a, e, i, o, u) it has.",
        lambda t: str(sum(c in "aeiou" for c in t.strip())),
        ("banana\n", "rhythm\n", "queueing\n", "a\n"),
    ),
    StdinTask(
        "factorial",
        1,
        "Read n (0 <= n <= 30) and print n!.",
        lambda t: str(__import__("math").factorial(int(t))),
        ("5\n", "0\n", "20\n", "30\n"),
    ),
    StdinTask(
        "even_odd",
        1,
        "Read an integer and print EVEN if it is even, else ODD.",
        lambda t: "EVEN" if int(t) % 2 == 0 else "ODD",
        ("4\n", "7\n", "0\n", "-3\n"),
    ),
    StdinTask(
        "sum_digits",
        1,
        "Read a non-negative integer and print the sum of its digits.",
        lambda t: str(sum(map(int, t.strip()))),
        ("123\n", "0\n", "99999\n", "1000001\n"),
    ),
    StdinTask(
        "fizzbuzz",
        1,
        "Read n and print the numbers 1..n one per line, but Fizz for multiples of 3, Buzz for "
        "multiples of 5 and FizzBuzz for multiples of both.",
        lambda t: "\n".join(
            "FizzBuzz" if k % 15 == 0 else "Fizz" if k % 3 == 0 else "Buzz" if k % 5 == 0 else str(k)
            for k in range(1, int(t) + 1)
        ),
        ("5\n", "15\n", "1\n", "20\n"),
    ),
    StdinTask(
        "sort_numbers",
        1,
        "The first line holds n, the second n integers. Print them sorted ascending, separated by spaces.",
        lambda t: " ".join(map(str, sorted(_ints(t)[1:]))),
        ("3\n3 1 2\n", "1\n5\n", "6\n5 -1 5 0 2 2\n", "4\n10 9 8 7\n"),
    ),
    StdinTask(
        "palindrome",
        1,
        "Read a word and print YES if it reads the same backwards, else NO.",
        lambda t: "YES" if t.strip() == t.strip()[::-1] else "NO",
        ("level\n", "hello\n", "a\n", "abba\n"),
    ),
    StdinTask(
        "gcd",
        1,
        "Read two positive integers and print their greatest common divisor.",
        lambda t: str(__import__("math").gcd(*_ints(t))),
        ("12 18\n", "7 13\n", "100 75\n", "81 27\n"),
    ),
    StdinTask(
        "word_count",
        1,
        "Read one line and print how many words (separated by spaces) it has.",
        lambda t: str(len(t.split())),
        ("the quick brown fox\n", "one\n", "a b  c\n", "x y z w v\n"),
    ),
    StdinTask(
        "collatz",
        2,
        "Read n >= 1 and print how many steps the Collatz map (n/2 if even, 3n+1 if odd) takes to reach 1.",
        lambda t: str(_collatz_steps(int(t))),
        ("6\n", "1\n", "27\n", "97\n"),
    ),
    StdinTask(
        "count_primes",
        2,
        "Read n and print how many primes are smaller than n.",
        lambda t: str(_primes_below(int(t))),
        ("10\n", "2\n", "100\n", "1000\n"),
    ),
    StdinTask(
        "fibonacci",
        2,
        "Read n (1 <= n <= 90) and print the n-th Fibonacci number (F1 = F2 = 1).",
        lambda t: str(_fib(int(t))),
        ("1\n", "10\n", "50\n", "90\n"),
    ),
    StdinTask(
        "matrix_trace",
        2,
        "The first line holds n, then n lines of n integers. Print the sum of the main diagonal.",
        lambda t: str(_trace(t)),
        ("2\n1 2\n3 4\n", "1\n5\n", "3\n1 0 0\n0 2 0\n0 0 3\n", "3\n-1 2 3\n4 -5 6\n7 8 -9\n"),
    ),
    StdinTask(
        "running_sum",
        2,
        "The first line holds n, the second n integers. Print the running sums, separated by spaces.",
        lambda t: " ".join(map(str, _running(_ints(t)[1:]))),
        ("3\n1 2 3\n", "1\n5\n", "4\n-1 1 -1 1\n", "5\n10 20 30 40 50\n"),
    ),
    StdinTask(
        "most_common_char",
        2,
        "Read a lowercase word and print the letter that occurs most often (the alphabetically first on a tie).",
        lambda t: _most_common(t.strip()),
        ("banana\n", "abc\n", "mississippi\n", "zzyy\n"),
    ),
    StdinTask(
        "binary",
        2,
        "Read a non-negative integer and print it in binary, without leading zeros.",
        lambda t: bin(int(t))[2:],
        ("5\n", "0\n", "255\n", "1024\n"),
    ),
    StdinTask(
        "pairs_sum",
        2,
        "The first line holds n and k, the second n integers. Print how many pairs i < j have a_i + a_j = k.",
        lambda t: str(_pairs(_ints(t))),
        ("4 5\n1 4 2 3\n", "2 2\n1 1\n", "5 0\n0 0 0 1 -1\n", "3 10\n1 2 3\n"),
    ),
)


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _trace(text: str) -> int:
    rows = text.strip().split("\n")[1:]
    return sum(int(row.split()[i]) for i, row in enumerate(rows))


def _running(values: list[int]) -> list[int]:
    total, sums = 0, []
    for value in values:
        total += value
        sums.append(total)
    return sums


def _most_common(word: str) -> str:
    return min(sorted(set(word)), key=lambda c: -word.count(c))


def _pairs(values: list[int]) -> int:
    n, k, items = values[0], values[1], values[2:]
    return sum(1 for i in range(n) for j in range(i + 1, n) if items[i] + items[j] == k)


FUNCTION_TASKS: tuple[FunctionTask, ...] = (
    FunctionTask(
        "add",
        1,
        "Return the sum of two integers.",
        "def add(self, a: int, b: int) -> int:",
        lambda a, b: a + b,
        ((1, 2), (-4, 4), (10**12, 1)),
    ),
    FunctionTask(
        "two_sum",
        2,
        "Return the indices [i, j] (i < j) of the two numbers in nums that add up to target; exactly one pair does.",
        "def two_sum(self, nums: list[int], target: int) -> list[int]:",
        lambda nums, t: next(
            [i, j] for i in range(len(nums)) for j in range(i + 1, len(nums)) if nums[i] + nums[j] == t
        ),
        (([2, 7, 11, 15], 9), ([3, 2, 4], 6), ([3, 3], 6)),
    ),
    FunctionTask(
        "is_anagram",
        1,
        "Return whether s and t are anagrams of each other.",
        "def is_anagram(self, s: str, t: str) -> bool:",
        lambda s, t: sorted(s) == sorted(t),
        (("anagram", "nagaram"), ("rat", "car"), ("", "")),
    ),
    FunctionTask(
        "max_subarray",
        2,
        "Return the largest sum of a non-empty contiguous subarray of nums.",
        "def max_subarray(self, nums: list[int]) -> int:",
        lambda nums: _kadane(nums),
        (([-2, 1, -3, 4, -1, 2, 1, -5, 4],), ([1],), ([-3, -1, -2],)),
    ),
    FunctionTask(
        "count_words",
        1,
        "Return a dict mapping each word of the sentence (split on spaces) to its count.",
        "def count_words(self, sentence: str) -> dict:",
        lambda s: {w: s.split().count(w) for w in s.split()},
        (("a b a",), ("x",), ("to be or not to be",)),
    ),
    FunctionTask(
        "valid_parentheses",
        2,
        "Return whether the brackets ()[]{} in s are balanced and properly nested.",
        "def valid_parentheses(self, s: str) -> bool:",
        lambda s: _balanced(s),
        (("()[]{}",), ("(]",), ("{[()]}",), ("((",)),
    ),
    FunctionTask(
        "merge_sorted",
        1,
        "Return the merge of two ascending lists as one ascending list.",
        "def merge_sorted(self, a: list[int], b: list[int]) -> list[int]:",
        lambda a, b: sorted(a + b),
        (([1, 3], [2, 4]), ([], [1]), ([5, 5], [5])),
    ),
    FunctionTask(
        "rotate_left",
        1,
        "Return nums rotated left by k positions.",
        "def rotate_left(self, nums: list[int], k: int) -> list[int]:",
        lambda nums, k: nums[k % len(nums) :] + nums[: k % len(nums)] if nums else [],
        (([1, 2, 3, 4, 5], 2), ([1], 3), ([1, 2], 2)),
    ),
    FunctionTask(
        "climb_stairs",
        2,
        "You climb 1 or 2 steps at a time. Return in how many ways you can climb n steps.",
        "def climb_stairs(self, n: int) -> int:",
        lambda n: _fib(n + 1),
        ((2,), (3,), (30,)),
    ),
    FunctionTask(
        "unique_sorted",
        1,
        "Return the distinct values of nums in ascending order.",
        "def unique_sorted(self, nums: list[int]) -> list[int]:",
        lambda nums: sorted(set(nums)),
        (([3, 1, 3, 2],), ([],), ([7, 7, 7],)),
    ),
    FunctionTask(
        "longest_common_prefix",
        2,
        "Return the longest common prefix of the strings (empty if none).",
        "def longest_common_prefix(self, words: list[str]) -> str:",
        lambda words: __import__("os").path.commonprefix(words),
        ((["flower", "flow", "flight"],), (["dog", "racecar"],), (["same", "same"],)),
    ),
    FunctionTask(
        "digit_root",
        1,
        "Repeatedly sum the digits of n until one digit is left; return it.",
        "def digit_root(self, n: int) -> int:",
        lambda n: 0 if n == 0 else 1 + (n - 1) % 9,
        ((38,), (0,), (999999999,)),
    ),
)


def _kadane(nums: list[int]) -> int:
    best = current = nums[0]
    for value in nums[1:]:
        current = max(value, current + value)
        best = max(best, current)
    return best


def _balanced(text: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
    return not stack


# --------------------------------------------------------------------------- problems


def _stdin_problem(task: StdinTask) -> Problem:
    tests = [
        {"input": given, "output": task.solve(given) + "\n", "testtype": "stdin", "public": i < PUBLIC_TESTS}
        for i, given in enumerate(task.inputs)
    ]
    examples = "\n\n".join(f"Example input:\n{t['input']}Example output:\n{t['output']}" for t in tests[:PUBLIC_TESTS])
    return _problem(task.name, task.level, f"{task.statement}\n\n{examples}", "", CodeTests(tests))


def _function_problem(task: FunctionTask) -> Problem:
    tests = [
        {
            "input": "\n".join(json.dumps(a) for a in arguments),
            "output": json.dumps(task.solve(*arguments)),
            "testtype": "functional",
            "public": i < PUBLIC_TESTS,
        }
        for i, arguments in enumerate(task.arguments)
    ]
    examples = "\n".join(
        f"Example: {task.name}({', '.join(map(repr, arguments))}) == {task.solve(*arguments)!r}"
        for arguments in task.arguments[:PUBLIC_TESTS]
    )
    starter = f"class Solution:\n    {task.signature}\n        "
    return _problem(task.name, task.level, f"{task.statement}\n\n{examples}", starter, CodeTests(tests, task.name))


def _problem(name: str, level: int, statement: str, starter: str, tests: CodeTests) -> Problem:
    question = with_answer_format(statement, starter.strip(), tests.func_name)
    return Problem(
        question=question,
        answer=tests.to_answer(),
        id=code_problem_id(question, tests),
        source="builtin/code",
        domain="code",
        metadata={"kind": "code", "level": level, "task": name, "builtin": True},
    )


def builtin_code_problems(levels: tuple[int, ...] | list[int] | None = None, seed: int | None = None) -> list[Problem]:
    """Every built-in code problem (optionally only some levels), shuffled by `seed` when one is given."""
    problems = [_stdin_problem(task) for task in STDIN_TASKS] + [_function_problem(task) for task in FUNCTION_TASKS]
    problems = [p for p in problems if levels is None or p.metadata["level"] in levels]
    if seed is not None:
        random.Random(seed).shuffle(problems)
    return problems
