"""What every command shares: option aliases defined once, the problems argument, the output checks.

The settings of the stages (the agent loop, collect, curate, filter, eval, ...) are not
listed here: their options are generated from the dataclasses (cli/flags.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentdata.errors import UserError
from agentdata.outputs import check_output_dir, check_output_file
from agentdata.settings import Section
from agentdata.training.config import TrackingConfig

if TYPE_CHECKING:
    from agentdata.records import Problem

# Where this command writes: an unexpected error's traceback is logged there (cli/crash.py).
_output_place: list[Path] = []


Inputs = Iterable["str | PathLike | None"]


def output_file(path: Path, flag: str, suffixes: Sequence[str], what: str = "the output", inputs: Inputs = ()) -> Path:
    """Check an output file before any work (one line naming `flag` if unusable or one of the command's
    `inputs`); its folder takes the crash log."""
    check_output_file(path, flag, suffixes, what, inputs)
    _output_place[:] = [path.parent]
    return path


def output_dir(path: Path, flag: str, inputs: Inputs = (), writes: Sequence[str] | None = None) -> Path:
    """Check an output folder before any work (one line naming `flag` if unusable, inside one of the
    command's `inputs`, or holding one where it `writes`: None, the whole folder); it takes the crash log."""
    check_output_dir(path, flag, inputs, writes)
    _output_place[:] = [path]
    return path


def output_set(path: Path, flag: str, suffixes: Sequence[str], what: str, inputs: Inputs = ()) -> Path:
    """Check where an SFT set or pool goes before any work: a file of `suffixes`, or a dataset folder
    (publish/layout.py) that is new, empty or one agentdata wrote before (never a folder of other things,
    which its README.md and data/ would be written into)."""
    from agentdata.publish.layout import DATA_DIR, is_dataset_folder, is_folder_out

    if not is_folder_out(path):
        return output_file(path, flag, suffixes, what, inputs)
    output_dir(path, flag, inputs)
    if path.is_dir() and any(path.iterdir()) and not (is_dataset_folder(path) and (path / DATA_DIR).is_dir()):
        raise UserError(
            f"{flag} {path} is a folder holding other files: a dataset folder gets a README.md and data/ of its "
            f"own; give a new folder, or a file name such as {path / ('out' + suffixes[0])}"
        )
    return path


# The arguments this process was started with (`agentdata ARGS`): a set's card records them to rebuild it.
_invocation: list[list[str]] = []


def record_invocation(arguments: Sequence[str]) -> None:
    _invocation[:] = [list(arguments)]


def invocation() -> list[str] | None:
    return _invocation[0] if _invocation else None


def output_place() -> Path | None:
    return _output_place[0] if _output_place else None


def forget_output_place() -> None:
    _output_place.clear()


ProblemsFile = Annotated[
    Path | None,
    typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir). Default: the built-in compute ladder."),
]
QuestionField = Annotated[
    str | None, typer.Option("--question-field", help="Column holding the question (default: recognised names).")
]
AnswerField = Annotated[
    str | None, typer.Option("--answer-field", help="Column holding the gold answer (default: recognised names).")
]


def read_problems(
    problems_file: Path | None, question_field: str | None = None, answer_field: str | None = None
) -> list[Problem]:
    """The problems a command runs on: the file's (the built-in compute ladder without one), each once;
    two different problems under one id are refused, both rows named."""
    from agentdata.agent.resume import unique_problems
    from agentdata.problems import load_problems
    from agentdata.synth.builtin import default_problems

    if problems_file is None:
        return unique_problems(default_problems())
    return unique_problems(load_problems(problems_file, question_field, answer_field), problems_file)


def tracked(name: str, configs: dict[str, type]) -> Section:
    """A settings section of `configs` plus `tracking` (--report-to, run_name=: training/trackers.py), the
    trackers `collect`, `filter` and `eval` log their summary and sampled trajectories to."""
    return Section(name, {**configs, "tracking": TrackingConfig})
