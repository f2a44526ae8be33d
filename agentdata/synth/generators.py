"""Verifiable math problems made from templates, with answers computed by sympy.

Five kinds (arithmetic, algebra, number_theory, combinatorics, probability) at three
levels. Level 1 is mental arithmetic; level 3 problems are ones where running code
genuinely helps: sums over long ranges, counting with constraints, modular arithmetic
with big numbers, enumerating many outcomes.

Every problem carries `metadata = {kind, level, template, seed, params}`; the same
(kind, level, seed) always gives the same problem, so a problem can be regenerated and
its answer re-derived from `params` (the tests do that by brute force).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy

from agentdata.errors import UserError
from agentdata.events import task
from agentdata.records import Problem, write_records
from agentdata.synth.chain import CHAIN_TEMPLATES
from agentdata.synth.code_builtin import builtin_code_problems
from agentdata.synth.config import ALL_KINDS, KINDS, LEVELS, MAX_PROBLEMS, ProblemsConfig
from agentdata.synth.ladder import LADDER_TEMPLATES
from agentdata.synth.math_templates import TEMPLATES, Draft, Template, canonical_answer


def _from_ladder(template: Callable[[random.Random], tuple[str, int, dict]]) -> Template:
    @functools.wraps(template)
    def draft(rng: random.Random) -> Draft:
        question, answer, params = template(rng)
        return Draft(question, sympy.Integer(answer), params)

    return draft


TEMPLATES["compute"] = {level: tuple(map(_from_ladder, templates)) for level, templates in LADDER_TEMPLATES.items()}
TEMPLATES["chain"] = {level: tuple(map(_from_ladder, templates)) for level, templates in CHAIN_TEMPLATES.items()}

RETRIES = 50  # repeats in a row before a (kind, level) pair counts as used up
INSTRUCTION = "Put the final answer in \\boxed{}."


def make_problem(kind: str, level: int, seed: int) -> Problem:
    """The problem for (kind, level, seed): always the same one."""
    rng = random.Random(f"{kind}/{level}/{seed}")
    template = rng.choice(TEMPLATES[kind][level])
    draft = template(rng)
    return Problem(
        question=f"{draft.question} {INSTRUCTION}",
        answer=canonical_answer(draft.answer),
        source=f"synth/{kind}",
        domain="math",
        metadata={
            "kind": kind,
            "level": level,
            "seed": seed,
            "template": template.__name__.lstrip("_"),
            "params": draft.params,
        },
    )


def check_choices(kinds: Sequence[str] | None, levels: Sequence[int] | None) -> tuple[list[str], list[int]]:
    kinds = list(kinds or KINDS)
    levels = list(levels or LEVELS)
    unknown_kinds = [kind for kind in kinds if kind not in ALL_KINDS]
    if unknown_kinds:
        raise UserError(f"unknown problem kind(s) {unknown_kinds}; choose from {', '.join(ALL_KINDS)}")
    unknown_levels = [level for level in levels if level not in LEVELS]
    if unknown_levels:
        raise UserError(f"unknown level(s) {unknown_levels}; choose from {', '.join(map(str, LEVELS))}")
    return kinds, levels


def iter_problems(
    seed: int, kinds: Sequence[str] | None = None, levels: Sequence[int] | None = None
) -> Iterator[Problem]:
    """Unique problems, one per (kind, level) pair in turn; deterministic for a seed.

    A pair that gives only repeats for RETRIES draws in a row is used up, so small
    templates do not stall the rest; the iterator ends when every pair is used up.
    """
    kinds, levels = check_choices(kinds, levels)
    pairs = [(kind, level) for kind in kinds for level in levels]
    fixed = {pair: iter(builtin_code_problems([pair[1]], seed)) for pair in pairs if pair[0] == "code"}
    seen: set[str] = set()
    used_up: set[tuple[str, int]] = set()
    attempt = 0
    while len(used_up) < len(pairs):
        for pair in pairs:
            if pair in used_up:
                continue
            if pair in fixed:  # a fixed list, not a template: each task once
                problem = next(fixed[pair], None)
                if problem is None:
                    used_up.add(pair)
                else:
                    yield problem
                continue
            for _ in range(RETRIES):
                problem = make_problem(*pair, seed=seed * 1_000_003 + attempt)
                attempt += 1
                if problem.id not in seen:
                    seen.add(problem.id)
                    yield problem
                    break
            else:
                used_up.add(pair)


def generate_problems(
    n: int,
    seed: int = 0,
    kinds: Sequence[str] | None = None,
    levels: Sequence[int] | None = None,
    progress: Callable[[Iterable[Problem]], Iterable[Problem]] = iter,
) -> list[Problem]:
    """n unique problems; UserError when n is out of range or the kinds and levels cannot give that many."""
    if not 1 <= n <= MAX_PROBLEMS:
        raise UserError(f"--n must be from 1 to {MAX_PROBLEMS:,}, got {n:,}")
    problems: list[Problem] = []
    for problem in progress(iter_problems(seed, kinds, levels)):
        problems.append(problem)
        if len(problems) == n:
            return problems
    raise UserError(f"only {len(problems)} unique problems could be made for these kinds and levels; ask for fewer")


@dataclass
class WrittenProblems:
    """What `synth problems` wrote: the file, and how many problems of each kind and level."""

    output: Path
    problems: list[Problem]
    kinds: list[str]
    levels: list[int]

    def counts(self) -> dict[str, list[int]]:
        """Per kind, the number of problems at each of `levels`, in order."""
        return {
            kind: [
                sum(1 for p in self.problems if p.metadata["kind"] == kind and p.metadata["level"] == level)
                for level in self.levels
            ]
            for kind in self.kinds
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "problems": len(self.problems),
            "counts": {kind: dict(zip(map(str, self.levels), row)) for kind, row in self.counts().items()},
        }


def write_problems(config: ProblemsConfig, out: str | Path) -> WrittenProblems:
    """Generate `config.n` problems and write them to `out` (.jsonl, .json or .parquet); progress as events."""
    with task("generating", total=config.n) as advance:

        def counted(problems: Iterable[Problem]) -> Iterator[Problem]:
            for number, problem in enumerate(problems, start=1):
                advance(number)
                yield problem

        made = generate_problems(config.n, config.seed, config.kinds, config.levels, progress=counted)
    write_records(made, out, Problem)
    return WrittenProblems(Path(out), made, list(config.kinds), list(config.levels))
