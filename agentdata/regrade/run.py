"""Grade stored trajectories again: new gold answers, a newer math-verify, fixed code tests; nothing is generated.

    regrade("runs/teacher", "runs/teacher-regraded", problems=load_problems("fixed.jsonl"))

Each trajectory is graded on the text the agent loop graded (`verify.graded_text`) against its
problem's gold: the one in `problems` (matched by id, else by the normalised question), or the
one it stored. The new run dir holds the same trajectories, shard for shard with the same
settings, with `answer`, `correct`, `final_answer` (and a code problem's test results) as they
are now, `metadata.regrade` saying what they were, and the problem digest of the gold they were
graded against: collect, filter (`--profile-dir`) and eval see them as done for the new problems.
A trajectory that ended in an error has no answer to grade and is copied as it is.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from agentdata.agent.journal import read_journal
from agentdata.agent.resume import HASH_KEY, problem_hash
from agentdata.agent.rundir import RunDir, shard_paths, trajectory_files
from agentdata.agent.runner import summarise
from agentdata.agent.shard_copies import superseded
from agentdata.agent.shard_status import incomplete_note
from agentdata.events import task
from agentdata.formats import protocol_of
from agentdata.records import Problem, Trajectory, normalise_question, read_records, write_json
from agentdata.regrade.config import RegradeConfig
from agentdata.regrade.output import staged_output
from agentdata.verify.grade import grade, graded_text
from agentdata.versions import stamped

REPORT_FILE = "regrade.json"
MAX_LISTED_FLIPS = 1000  # the report lists at most this many flipped verdicts (all are counted)


@dataclass
class Flip:
    id: str
    problem_id: str
    source: str
    was_correct: bool
    now_correct: bool
    final_answer: str | None
    old_gold: str
    new_gold: str


@dataclass
class RegradeResult:
    run_dir: Path
    source: Path
    trajectories: int = 0
    regraded: int = 0
    copied_errors: int = 0  # ended in an error: nothing to grade, copied as they were
    gold_changed: int = 0
    not_in_problems: int = 0  # a problems file was given but holds no such problem: graded on the stored gold
    to_correct: int = 0
    to_wrong: int = 0
    flips: list[Flip] = field(default_factory=list)
    per_source: list[dict[str, Any]] = field(default_factory=list)
    accuracy_before: float = 0.0
    accuracy_after: float = 0.0
    report: Path | None = None
    from_journal: int = 0  # finished trajectories a killed run left only in its journal: regraded with the rest
    warnings: list[str] = field(default_factory=list)  # a sharded run with parts missing or unfinished

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "source": str(self.source),
            "trajectories": self.trajectories,
            "regraded": self.regraded,
            "copied_errors": self.copied_errors,
            "gold_changed": self.gold_changed,
            "not_in_problems": self.not_in_problems,
            "flipped_to_correct": self.to_correct,
            "flipped_to_wrong": self.to_wrong,
            "accuracy_before": self.accuracy_before,
            "accuracy_after": self.accuracy_after,
            "from_journal": self.from_journal,
            "warnings": self.warnings,
            "per_source": self.per_source,
            "flips": [vars(flip) for flip in self.flips[:MAX_LISTED_FLIPS]],
            "report": str(self.report) if self.report else None,
        }


class _Golds:
    """The problems to grade against: by id, else by the normalised question."""

    def __init__(self, problems: list[Problem] | None):
        self.given = problems is not None
        self.by_id = {problem.id: problem for problem in problems or []}
        self.by_question = {normalise_question(problem.question): problem for problem in problems or []}

    def problem_of(self, trajectory: Trajectory) -> Problem | None:
        found = self.by_id.get(trajectory.problem_id)
        return found or self.by_question.get(normalise_question(trajectory.question))


def regrade(
    run: str | os.PathLike,
    out: str | os.PathLike,
    problems: list[Problem] | None = None,
    config: RegradeConfig | None = None,
    sandbox: Any = None,
) -> RegradeResult:
    """Write `out`: the trajectories of `run` graded again (see the module doc); returns what flipped.

    The run is written beside `out` and renamed into place when whole (regrade/output.py), so a killed
    regrade leaves no half run behind; `out` must not hold anything yet, and no other regrade may be
    writing it.
    """
    config = config or RegradeConfig()
    run, out = Path(run), Path(out)
    shards, journaled = _inputs(run)
    source = RunDir(run) if run.is_dir() else None
    golds, result = _Golds(problems), RegradeResult(run_dir=out, source=run, from_journal=len(journaled))
    result.warnings = [line for line in [incomplete_note(run)] if line]  # a part missing: only what is there
    with staged_output(out) as staging:
        target = RunDir(staging)
        started = time.perf_counter()
        settings = _regrade_batches(shards, journaled, source, target, golds, config, sandbox, result)
        manifest = (source.manifest() if source else None) or {}
        target.write_manifest(
            stamped(
                {
                    **{key: value for key, value in manifest.items() if key != "settings"},
                    "settings": manifest.get("settings") or settings or {},
                    "regraded_from": str(run),
                    "regrade": {"problems_given": golds.given, "gold_changed": result.gold_changed},
                }
            )
        )
        target.write_stats(summarise(target, time.perf_counter() - started).as_dict())
        result.per_source = _per_source(result)
        result.report = out / REPORT_FILE
        write_json(staging / REPORT_FILE, stamped(result.as_dict()))
    return result


def _inputs(run: Path) -> tuple[list[Path], list[Trajectory]]:
    """The run's shards, and the finished trajectories only its journal holds (a killed run's: regraded too,
    as `inspect` counts them); a run dir whose trajectories are all in its journal has no shard to read."""
    journaled = RunDir(run).journaled() if run.is_dir() else []
    if journaled and not trajectory_files(run):
        return [], journaled
    return shard_paths([run]), journaled


def _regrade_batches(
    shards: list[Path],
    journaled: list[Trajectory],
    source: RunDir | None,
    target: RunDir,
    golds: _Golds,
    config: RegradeConfig,
    sandbox: Any,
    result: RegradeResult,
) -> dict[str, Any] | None:
    """Grade shard by shard, then the journal's trajectories, each written as one shard of `target` with its
    settings; returns the last settings."""
    owns_sandbox, settings = sandbox is None, None
    before = after = 0
    replaced = superseded(shards)
    total = sum(pq.read_metadata(shard).num_rows - len(replaced[shard]) for shard in shards) + len(journaled)
    with task("regrade", total) as advance, ThreadPoolExecutor(config.concurrency) as pool:
        try:
            for trajectories, shard_settings in _batches(shards, replaced, journaled, source):
                if sandbox is None and any(t.domain == "code" for t in trajectories):
                    from agentdata.sandbox import open_sandbox

                    sandbox = open_sandbox(config.sandbox, max_rps=config.sandbox_max_rps)
                outcomes = list(pool.map(_regrade_one, trajectories, repeat(golds), repeat(sandbox)))
                for outcome in outcomes:
                    _count(result, outcome, golds.given)
                before += sum(outcome.was_correct for outcome in outcomes)
                after += sum(outcome.trajectory.correct for outcome in outcomes)
                settings = shard_settings
                target.shard_dir.mkdir(parents=True, exist_ok=True)
                target.write_shard([outcome.trajectory for outcome in outcomes], settings)
                advance(result.trajectories, flipped=result.to_correct + result.to_wrong)
        finally:
            if owns_sandbox and sandbox is not None:
                sandbox.close()
    result.accuracy_before = before / max(result.trajectories, 1)
    result.accuracy_after = after / max(result.trajectories, 1)
    return settings


def _batches(
    shards: list[Path], replaced: dict[Path, set[int]], journaled: list[Trajectory], source: RunDir | None
) -> Iterator[tuple[list, Any]]:
    """Each shard's trajectories and settings, read one at a time, less its `replaced` rows (a later row writes
    their id again: each trajectory is graded once); then the journal's."""
    for shard in shards:
        rows = [t for number, t in enumerate(read_records(shard, Trajectory)) if number not in replaced[shard]]
        yield rows, source.shard_settings(shard) if source else None
    if journaled:
        yield journaled, _journal_settings(source)


def _journal_settings(source: RunDir | None) -> dict[str, Any] | None:
    """The settings a killed run's journal was written with (its header), for the shard its trajectories make."""
    for path in source.journal_paths() if source else []:
        settings = read_journal(path).settings
        if settings is not None:
            return settings
    return None


@dataclass
class _Outcome:
    trajectory: Trajectory  # as graded now (or as it was, for an errored one)
    was_correct: bool
    graded: bool
    found: bool  # its problem is in the problems given
    gold_changed: bool


def _regrade_one(trajectory: Trajectory, golds: _Golds, sandbox: Any) -> _Outcome:
    was_correct = bool(trajectory.correct)
    problem = golds.problem_of(trajectory)
    if trajectory.finish_reason == "error":  # no answer to grade
        return _Outcome(trajectory, was_correct, False, problem is not None, False)
    current = problem or Problem(
        trajectory.question, trajectory.answer, trajectory.problem_id, trajectory.source, trajectory.domain
    )
    text = graded_text(trajectory.messages, current.domain, protocol_of(trajectory.format), trajectory.metadata)
    verdict = grade(current, text, sandbox)
    metadata = {
        **trajectory.metadata,
        "regrade": {
            "was_correct": was_correct,
            "old_answer": trajectory.answer,
            "old_final_answer": trajectory.final_answer,
        },
    }
    if problem is not None:  # made for this problem as it is now: a resumed collect, filter or eval keeps it
        metadata[HASH_KEY] = problem_hash(problem)
    if verdict.details:
        metadata["tests"] = verdict.details
    regraded = dataclasses.replace(
        trajectory,
        answer=current.answer,
        domain=current.domain,
        correct=verdict.correct,
        final_answer=verdict.final_answer,
        metadata=metadata,
    )
    return _Outcome(regraded, was_correct, True, problem is not None, current.answer != trajectory.answer)


def _count(result: RegradeResult, outcome: _Outcome, problems_given: bool) -> None:
    trajectory = outcome.trajectory
    result.trajectories += 1
    result.regraded += outcome.graded
    result.copied_errors += not outcome.graded
    result.not_in_problems += problems_given and not outcome.found
    result.gold_changed += outcome.gold_changed
    if outcome.graded and trajectory.correct != outcome.was_correct:
        result.to_correct += trajectory.correct
        result.to_wrong += not trajectory.correct
        old = trajectory.metadata["regrade"]["old_answer"]
        result.flips.append(
            Flip(
                trajectory.id,
                trajectory.problem_id,
                trajectory.source,
                outcome.was_correct,
                trajectory.correct,
                trajectory.final_answer,
                old,
                trajectory.answer,
            )
        )


def _per_source(result: RegradeResult) -> list[dict[str, Any]]:
    to_correct = Counter(flip.source for flip in result.flips if flip.now_correct)
    to_wrong = Counter(flip.source for flip in result.flips if not flip.now_correct)
    return [
        {"source": source, "flipped_to_correct": to_correct[source], "flipped_to_wrong": to_wrong[source]}
        for source in sorted(set(to_correct) | set(to_wrong))
    ]
