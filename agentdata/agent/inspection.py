"""Work out what a path holds (problems, trajectories, a run dir) and load it.

Trajectory files are read through the one input reader (agentdata.inputs) and every row is
checked field by field, so a damaged or foreign file gives one line naming file, row and
field instead of a traceback somewhere in the views.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentdata.agent.rundir import RunDir, trajectory_files
from agentdata.agent.shard_status import ShardedRun, read_sharded
from agentdata.errors import InputFileError
from agentdata.inputs import check_input, first_row, read_rows
from agentdata.problems import load_problems
from agentdata.records import Problem, Trajectory, from_row, message_tool_calls, validate_messages

Kind = Literal["problems", "trajectories", "sft set"]
TRAJECTORY_SUFFIXES = (".parquet", ".jsonl", ".json")
_CHECKS = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict}


def holds_trajectories(path: Path) -> bool:
    if path.is_dir():
        return (path / "trajectories").is_dir()
    if path.suffix.lower() not in TRAJECTORY_SUFFIXES:
        return False
    row = first_row(path)
    return row is not None and "messages" in row and "problem_id" in row


@dataclass
class Inspection:
    """What a path holds (`agentdata inspect`): its problems or trajectories, and their numbers."""

    path: Path
    kind: Kind
    records: list[Problem] | list[Trajectory]
    only_in_journal: int = 0  # trajectories a stopped run left in its journal, in no shard yet (among `records`)
    sharded: ShardedRun | None = None  # the state of each part of a run dir made with --shard I/N
    provenance: dict[str, Any] | None = None  # how a set or pool was made (publish/provenance.py)
    rows: int | None = None  # an SFT set's rows (its records are not read)

    def as_dict(self) -> dict[str, Any]:
        if self.kind == "sft set":
            return {"path": str(self.path), "kind": self.kind, "rows": self.rows, "provenance": self.provenance}
        if self.kind == "trajectories":
            return {
                "path": str(self.path),
                "kind": self.kind,
                **trajectory_stats(self.records),
                "only_in_journal": self.only_in_journal,
                **({"sharded": self.sharded.as_dict()} if self.sharded else {}),
            }
        return {
            "path": str(self.path),
            "kind": self.kind,
            "problems": len(self.records),
            "sources": dict(Counter(p.source for p in self.records).most_common()),
            **({"provenance": self.provenance} if self.provenance else {}),
        }


def inspect_path(path: Path, question_field: str | None = None, answer_field: str | None = None) -> Inspection:
    check_input(path)  # what the path is, if it is no file or folder (a broken link, a FIFO, a device)
    if holds_trajectories(path):
        sharded = read_sharded(path) if path.is_dir() else None
        return Inspection(path, "trajectories", read_trajectories(path), len(journal_only(path)), sharded)
    return Inspection(path, "problems", load_problems(path, question_field, answer_field, require_answer=False))


def trajectory_stats(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    """The numbers `inspect` shows for trajectories."""
    trajectories = list(trajectories)
    count = len(trajectories) or 1
    calls = sum(t.num_tool_calls for t in trajectories)
    return {
        "trajectories": len(trajectories),
        "accuracy": sum(t.correct for t in trajectories) / count,
        "mean_tool_calls": calls / count,
        "tool_error_rate": sum(t.num_tool_errors for t in trajectories) / max(calls, 1),
        "mean_completion_tokens": sum(t.completion_tokens for t in trajectories) / count,
        "finish_reasons": dict(sorted(Counter(t.finish_reason for t in trajectories).items())),
    }


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every trajectory of a run dir or a trajectory file, each row checked (InputFileError names the field),
    once: the last written row of an id (a redone rollout, or a row two merged parts' files both hold). A run
    dir's include those a stopped (killed) run left only in its journal."""
    shards = [
        trajectory_from_row(file, number, row)
        for file in trajectory_files(path)
        for number, row in enumerate(read_rows(file), start=1)
    ]
    return list({trajectory.id: trajectory for trajectory in shards}.values()) + journal_only(path)


def journal_only(path: str | Path) -> list[Trajectory]:
    """The trajectories of a run dir that are in its journal and in no shard yet ([] for a file)."""
    return RunDir(path).journaled() if Path(path).is_dir() else []


def trajectory_from_row(path: Path, number: int, row: dict[str, Any]) -> Trajectory:
    values = dict(row)
    for field in dataclasses.fields(Trajectory):
        if field.name not in values or (values[field.name] is None and _has_default(field)):
            if not _has_default(field):
                raise InputFileError(path, f"not a trajectory: no field {field.name!r}", row=number)
            values.pop(field.name, None)
            continue
        _check_type(path, number, field, values)
    try:
        trajectory = from_row(Trajectory, values)
        validate_messages(trajectory.messages)
        for message in trajectory.messages:
            message_tool_calls(message)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise InputFileError(path, f"not a trajectory: {error}", row=number) from None
    return trajectory


def _has_default(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _check_type(path: Path, number: int, field: dataclasses.Field, values: dict[str, Any]) -> None:
    """The stored value matches the field's type; JSON-string fields (metadata, tools, ...) are decoded."""
    value = values[field.name]
    annotation = str(field.type)
    expected = _CHECKS[annotation.split("[")[0].split("|")[0].strip()]
    if expected in (dict, list) and isinstance(value, str) and field.name != "messages":
        try:
            value = values[field.name] = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise InputFileError(path, f"field {field.name!r} is not valid JSON", row=number) from None
    if value is None and "None" in annotation:
        return
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise InputFileError(
            path, f"field {field.name!r} should be {expected.__name__}, got {type(value).__name__}", row=number
        )
    if field.name == "messages" and not all(isinstance(message, dict) for message in value):
        raise InputFileError(path, "field 'messages' should be a list of message objects", row=number)
