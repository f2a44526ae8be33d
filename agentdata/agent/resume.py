"""What a run started again on a run dir must (re)do, keyed on what each trajectory depends on.

A trajectory on disk is reused only when it was made from the same problem content (question,
answer, domain and metadata such as tests, hashed into `metadata["problem_hash"]`) with the
same settings (checked by the run dir). It is redone when the problem changed under the same
id ("stale") and, unless asked not to, when it ended in an error ("retried"); the new row
replaces the old one, so the run dir keeps one row per id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from agentdata.agent.rundir import DoneRow
from agentdata.errors import UserError
from agentdata.records import Problem

HASH_KEY = "problem_hash"


def problem_hash(problem: Problem) -> str:
    """A digest of everything about a problem that can change its trajectories and their grading."""
    content = [problem.question, problem.answer, problem.domain, problem.metadata]
    return hashlib.sha1(json.dumps(content, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


def unique_problems(problems: list[Problem], where: object | None = None) -> list[Problem]:
    """Drop exact repeats; two different problems under one id are refused, both named (as rows of `where`)."""
    first: dict[str, tuple[int, Problem, str]] = {}
    unique = []
    for number, problem in enumerate(problems, start=1):
        digest = problem_hash(problem)
        if problem.id not in first:
            first[problem.id] = (number, problem, digest)
            unique.append(problem)
        elif first[problem.id][2] != digest:
            earlier_number, earlier, _ = first[problem.id]
            both = (
                f"{where}, rows {earlier_number} and {number}" if where else f"problems {earlier_number} and {number}"
            )
            raise UserError(
                f"{both} share the id {problem.id!r} but differ "
                f"({_differing_field(earlier, problem)}: {_short(earlier)} vs {_short(problem)}); "
                "give them distinct ids"
            )
    return unique


def _differing_field(a: Problem, b: Problem) -> str:
    return next(name for name in ("question", "answer", "domain", "metadata") if getattr(a, name) != getattr(b, name))


def _short(problem: Problem) -> str:
    text = " ".join(problem.question.split())
    return repr(text if len(text) <= 40 else text[:37] + "...")


@dataclass
class ResumePlan:
    work: list[tuple[Problem, int]] = field(default_factory=list)
    reused: int = 0
    stale: set[str] = field(default_factory=set)  # ids whose problem changed since they were made
    retried: set[str] = field(default_factory=set)  # ids that ended in an error last time

    @property
    def replaced(self) -> set[str]:
        return self.stale | self.retried


def plan_resume(problems: list[Problem], samples: int, done: dict[str, DoneRow], retry_errors: bool) -> ResumePlan:
    plan = ResumePlan()
    for problem in problems:
        digest = problem_hash(problem)
        for index in range(samples):
            row = done.get(f"{problem.id}-{index}")
            if row is not None and not _same_problem(row, problem, digest):
                plan.stale.add(f"{problem.id}-{index}")
            elif row is not None and retry_errors and row.finish_reason == "error":
                plan.retried.add(f"{problem.id}-{index}")
            elif row is not None:
                plan.reused += 1
                continue
            plan.work.append((problem, index))
    return plan


def _same_problem(row: DoneRow, problem: Problem, digest: str) -> bool:
    if row.problem_hash is not None:
        return row.problem_hash == digest
    return (row.question, row.answer) == (problem.question, problem.answer)  # rows made before the hash was kept
