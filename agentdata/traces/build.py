"""A `Session` read from a trace file made into a `Trajectory` like one `collect` writes, graded with the same
`grade()` wherever its problem's answer is known.

The problem is the one `--problems` holds (matched by the file's problem id, else by the question), else
the file's own gold (an Inspect sample's target, the gold agentdata wrote into its own exports); with
neither, the trajectory is kept ungraded (`correct` false, `metadata.imported.graded` false: curate keeps
it only with `--keep-incorrect`). Each row says where it came from in `metadata.imported`: the format,
the file, the row, the tool that made it and the id it had there.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdata.agent.resume import HASH_KEY, problem_hash
from agentdata.formats import PROTOCOLS, protocol_of
from agentdata.formats.health import HEALTH_KEY, measure_health
from agentdata.records import CODE_TOOL, TOOL_NAME, Problem, Trajectory, normalise_question, stable_id
from agentdata.traces.session import Session
from agentdata.verify.extract import extract_answer
from agentdata.verify.grade import grade, graded_text

IMPORTED_KEY = "imported"  # metadata key of a row's provenance
DEFAULT_FORMAT = "native"  # calls a harness recorded as structured tool calls: the API's own tool calling


class Problems:
    """The problems to grade against: by id, else by the normalised question."""

    def __init__(self, problems: list[Problem] | None):
        self.by_id = {problem.id: problem for problem in problems or []}
        self.by_question = {normalise_question(problem.question): problem for problem in problems or []}

    def find(self, problem_id: str | None, question: str) -> Problem | None:
        found = self.by_id.get(problem_id) if problem_id else None
        return found or self.by_question.get(normalise_question(question))


@dataclass
class Draft:
    """A trajectory not yet graded, with the problem (and every gold answer) it is graded against."""

    trajectory: Trajectory
    problem: Problem | None  # None: no answer known, kept ungraded
    golds: list[str]
    matched: bool  # the problem came from --problems


def draft(session: Session, kind: str, file: Path, problems: Problems, sample_index: int) -> Draft:
    """The trajectory of `session` (read from `file`, an absolute path), before grading."""
    question = next(m["content"] for m in session.messages if m["role"] == "user")
    matched = problems.find(session.problem_id, question)
    golds = [matched.answer] if matched else session.gold
    problem = matched or (
        Problem(
            question,
            golds[0],
            id=session.problem_id or "",
            source=session.source or session.made_by or kind,
            domain=session.domain or "math",
        )
        if golds
        else None
    )
    problem_id = problem.id if problem else session.problem_id or stable_id(question)
    calls = [call for m in session.messages if m["role"] == "assistant" for call in m.get("tool_calls") or []]
    provenance = {
        "format": kind,
        "file": str(file),
        "row": session.row,
        "made_by": session.made_by,
        "original_id": session.own_id,
        "graded": problem is not None,
        "extra": session.extra,
    }
    trajectory = Trajectory(
        id=session.own_id or f"{problem_id}-{_digest(file, session.row)}",
        problem_id=problem_id,
        question=question,
        answer=problem.answer if problem else "",
        messages=session.messages,
        source=problem.source if problem else session.source or session.made_by or kind,
        domain=problem.domain if problem else session.domain or "math",
        tools=session.tools if session.tools is not None else _tools_of(calls),
        num_tool_calls=len(calls),
        num_tool_errors=session.num_tool_errors,
        num_turns=sum(m["role"] == "assistant" for m in session.messages),
        finish_reason=session.finish_reason or ("error" if session.error else "answer"),
        prompt_tokens=session.prompt_tokens,
        completion_tokens=session.completion_tokens,
        teacher=session.teacher,
        format=session.format if session.format in PROTOCOLS else DEFAULT_FORMAT,
        sampling={"sample_index": sample_index},
        error=session.error,
        metadata={IMPORTED_KEY: provenance},
    )
    if matched is not None:  # made for this problem as it is: filter (--profile-dir) and eval reuse it
        trajectory.metadata[HASH_KEY] = problem_hash(matched)
    return Draft(trajectory, problem, golds, matched is not None)


def graded(item: Draft, sandbox: Any) -> Trajectory:
    """The draft with its verdict (against any of its golds) and its health measures."""
    trajectory = item.trajectory
    health = measure_health(trajectory.messages, trajectory.format, trajectory.domain).as_dict()
    metadata = {**trajectory.metadata, HEALTH_KEY: health}
    text = graded_text(trajectory.messages, trajectory.domain, protocol_of(trajectory.format))
    if item.problem is None or trajectory.finish_reason == "error":
        return dataclasses.replace(trajectory, final_answer=extract_answer(text), metadata=metadata)
    verdicts = [grade(dataclasses.replace(item.problem, answer=gold), text, sandbox) for gold in item.golds]
    verdict = next((v for v in verdicts if v.correct), verdicts[0])
    if verdict.details:
        metadata["tests"] = verdict.details
    return dataclasses.replace(
        trajectory, correct=verdict.correct, final_answer=verdict.final_answer, metadata=metadata
    )


def _tools_of(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a file that names none offered: the code tool when every call is one, else none known."""
    return [CODE_TOOL] if calls and all(call["function"]["name"] == TOOL_NAME for call in calls) else []


def _digest(file: Path, row: int) -> str:
    """A stable id for a row of a file that gives none: where it is (so an import run again skips it), not
    when it was read; two files of one name in two folders are two rows."""
    return hashlib.sha1(f"{file}#{row}".encode()).hexdigest()[:12]
