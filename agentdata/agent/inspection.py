"""Work out what a path holds (problems, trajectories, a run dir) and load it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq

from agentdata.agent.rundir import trajectory_files
from agentdata.errors import InputFileError
from agentdata.problems import load_problems
from agentdata.records import Problem, Trajectory, read_records

Kind = Literal["problems", "trajectories"]


def holds_trajectories(path: Path) -> bool:
    if path.is_dir():
        return (path / "trajectories").is_dir()
    if path.suffix == ".parquet":
        return "messages" in pq.read_schema(path).names and "problem_id" in pq.read_schema(path).names
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:
            first = handle.readline()
        return '"problem_id"' in first and '"messages"' in first
    return False


def load_for_inspection(
    path: Path, question_field: str | None = None, answer_field: str | None = None
) -> tuple[Kind, list[Problem] | list[Trajectory]]:
    if not path.exists():
        raise InputFileError(path, "no such file or directory")
    if holds_trajectories(path):
        trajectories = [t for file in trajectory_files(path) for t in read_records(file, Trajectory)]
        return "trajectories", trajectories
    return "problems", load_problems(path, question_field, answer_field, require_answer=False)
