"""Reading solution files, stitching them (progress as "stitch" events), and writing the SFT set."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError, UserError
from agentdata.events import task
from agentdata.records import Problem, Trajectory, records_to_table
from agentdata.synth.stitch.build import StitchConfig, solution_answer, stitch_solution
from agentdata.synth.stitch.calculations import GSM8K_ANSWER, STITCHED_TEACHER

SOLUTION_FIELDS = ("solution", "worked_solution", "rationale", "reasoning", "response")


@dataclass
class SolutionRow:
    problem: Problem
    solution: str


def load_solutions(
    path: str | os.PathLike,
    question_field: str | None = None,
    solution_field: str | None = None,
    answer_field: str | None = None,
) -> tuple[list[SolutionRow], int]:
    """Rows with a question, a worked solution and an answer; returns them and how many had no answer.

    The answer comes from `answer_field`, else a recognised answer column other than the
    solution's, else the solution itself (its last \\boxed{} or GSM8K's `#### x`). An answer
    column that holds a whole solution (GSM8K's `answer`) gives its final answer the same way.
    """
    from agentdata.problems import (
        ANSWER_FIELDS,
        columns_of,
        get_field,
        pick_column,
        problems_from_rows,
        read_nonempty_rows,
    )

    path = Path(path)
    rows = read_nonempty_rows(path)
    present = columns_of(rows)
    solution_key = pick_column(path, present, solution_field, SOLUTION_FIELDS, "solution", "--solution-field")
    if answer_field:
        pick_column(path, present, answer_field, ANSWER_FIELDS, "answer", "--answer-field")
    answer_key = answer_field or next(
        (name for name in ANSWER_FIELDS if name != solution_key and name in present), None
    )
    for number, row in enumerate(rows, start=1):
        solution = get_field(row, solution_key)
        if not isinstance(solution, str) or not solution.strip():
            raise InputFileError(path, f"empty or missing solution in column {solution_key!r}", row=number)
    # The loader reads questions, ids and sources; answers may be missing here, so they are read below.
    problems = problems_from_rows(path, rows, question_field, answer_field=solution_key)
    loaded, no_answer = [], 0
    for row, problem in zip(rows, problems):
        solution = get_field(row, solution_key)
        raw_answer = get_field(row, answer_key) if answer_key else None
        answer = _final_answer("" if raw_answer is None else str(raw_answer), solution)
        if answer is None:
            no_answer += 1
            continue
        problem.answer = answer
        loaded.append(SolutionRow(problem, solution))
    return loaded, no_answer


def _final_answer(raw: str, solution: str) -> str | None:
    raw = raw.strip()
    if raw and (raw == solution.strip() or "\\boxed" in raw or GSM8K_ANSWER.search(raw)):
        return solution_answer(raw)
    return raw or solution_answer(solution)


def write_sft(trajectories: list[Trajectory], out: str | os.PathLike, target: str = "canonical") -> Path:
    """The SFT set in curate's form (`messages` + `tools` as chat templates read them, and the same
    provenance columns), written by the writer curate uses (formats.sft_set) so the two sets load together,
    or exported for `target` as curate's `--for` does; every secret in it redacted, as in curate's (a solution
    can paste a key as well as a trajectory)."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentdata.formats.sft_set.writer import write_sft_form
    from agentdata.publish.secrets import redact_tree
    from agentdata.records import SFT_COLUMNS

    table = records_to_table(trajectories, Trajectory).select(list(SFT_COLUMNS))
    table = pa.Table.from_pylist([redact_tree(row) for row in table.to_pylist()], schema=table.schema)
    with tempfile.TemporaryDirectory() as staging:
        canonical = Path(staging) / "canonical.parquet"
        pq.write_table(table, canonical)
        return write_sft_form(canonical, Path(out), target)


@dataclass
class StitchSummary:
    rows: int
    written: int
    dropped: dict[str, int]
    tool_calls: int
    tool_errors: int
    calculations: int
    calculations_matching_text: int
    correct: int
    output: Path
    trajectories_dir: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            output=str(self.output), trajectories_dir=str(self.trajectories_dir) if self.trajectories_dir else None
        )
        return data


def stitch_file(
    path: str | os.PathLike,
    out: str | os.PathLike,
    config: StitchConfig | None = None,
    *,
    question_field: str | None = None,
    solution_field: str | None = None,
    answer_field: str | None = None,
    trajectories_dir: str | os.PathLike | None = None,
    sandbox: Any = None,
) -> StitchSummary:
    """Stitch every solution in `path` into an SFT set at `out` (and a trajectory run dir if asked)."""
    config = config or StitchConfig()
    if trajectories_dir is not None and any(Path(trajectories_dir).glob("trajectories/*.parquet")):
        raise UserError(f"{trajectories_dir} already holds trajectories; give --trajectories a new folder")
    rows, no_answer = load_solutions(path, question_field, solution_field, answer_field)
    owns_sandbox = sandbox is None
    if owns_sandbox:
        from agentdata.sandbox import open_sandbox

        sandbox = open_sandbox(config.sandbox, max_rps=config.sandbox_max_rps)
    try:
        trajectories, no_calculation = _stitch_rows(rows, sandbox, config)
    finally:
        if owns_sandbox:
            sandbox.close()
    if not trajectories:
        raise UserError(
            f"{path}: no solution had a calculation to cut into code ({no_calculation} without one, "
            f"{no_answer} without an answer)"
        )
    write_sft(trajectories, out, config.target)
    if trajectories_dir is not None:
        from agentdata.agent.rundir import RunDir

        run = RunDir(trajectories_dir)
        run.prepare({"teacher": STITCHED_TEACHER, "protocol": config.protocol, "source_file": str(path)}, {})
        run.write_shard(trajectories)
    return StitchSummary(
        rows=len(rows) + no_answer,
        written=len(trajectories),
        dropped={"no_answer": no_answer, "no_calculation": no_calculation},
        tool_calls=sum(t.num_tool_calls for t in trajectories),
        tool_errors=sum(t.num_tool_errors for t in trajectories),
        calculations=sum(t.metadata["calculations"] for t in trajectories),
        calculations_matching_text=sum(t.metadata["calculations_matching_text"] for t in trajectories),
        correct=sum(t.correct for t in trajectories),
        output=Path(out),
        trajectories_dir=Path(trajectories_dir) if trajectories_dir is not None else None,
    )


def _stitch_rows(rows: list[SolutionRow], sandbox: Any, config: StitchConfig) -> tuple[list[Trajectory], int]:
    trajectories, no_calculation = [], 0
    with task("stitch", len(rows)) as advance:
        for done, row in enumerate(rows, start=1):
            trajectory = stitch_solution(row.problem, row.solution, sandbox, config)
            if trajectory is None:
                no_calculation += 1
            else:
                trajectories.append(trajectory)
            advance(done)
    return trajectories, no_calculation
