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

import polars as pl

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


def plan_resume(problems: list[Problem], samples: int, done: pl.DataFrame, retry_errors: bool) -> ResumePlan:
    """What to (re)do for `samples` trajectories of each problem, given the rows on disk (RunDir.done_table):
    the work in problem order, then sample order."""
    expected = pl.DataFrame(
        {
            "position": range(len(problems)),
            "problem": [problem.id for problem in problems],
            "digest": [problem_hash(problem) for problem in problems],
            "question_now": [problem.question for problem in problems],
            "answer_now": [problem.answer for problem in problems],
        },
        schema_overrides={"position": pl.Int64},
    ).join(pl.DataFrame({"index": range(samples)}, schema={"index": pl.Int64}), how="cross")
    expected = expected.sort("position", "index").with_columns(
        pl.concat_str("problem", pl.lit("-"), pl.col("index").cast(pl.String)).alias("id")
    )
    rows = expected.join(done.with_columns(pl.lit(True).alias("on_disk")), on="id", how="left", maintain_order="left")
    same_problem = (
        pl.when(pl.col("problem_hash").is_not_null())
        .then(pl.col("problem_hash") == pl.col("digest"))
        .otherwise((pl.col("question") == pl.col("question_now")) & (pl.col("answer") == pl.col("answer_now")))
    )  # rows made before the hash was kept are compared on question and answer
    on_disk = pl.col("on_disk").fill_null(False)
    stale = on_disk & ~same_problem.fill_null(False)
    retried = on_disk & ~stale & (pl.col("finish_reason") == "error") & retry_errors
    rows = rows.select("id", "position", "index", stale.alias("stale"), retried.alias("retried"), on_disk.alias("on"))
    work = rows.filter(~pl.col("on") | pl.col("stale") | pl.col("retried"))
    return ResumePlan(
        work=[(problems[position], index) for position, index in work.select("position", "index").iter_rows()],
        reused=rows.height - work.height,
        stale=set(rows.filter(pl.col("stale"))["id"].to_list()),
        retried=set(rows.filter(pl.col("retried"))["id"].to_list()),
    )
