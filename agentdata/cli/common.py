"""What every command shares: option aliases defined once, the console, and error mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

QuestionField = Annotated[
    Optional[str], typer.Option("--question-field", help="Column holding the question (default: recognised names).")
]
AnswerField = Annotated[
    Optional[str], typer.Option("--answer-field", help="Column holding the gold answer (default: recognised names).")
]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output directory.")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed.")]


class NotBuiltYet(Exception):
    """A command that exists in the CLI but whose implementation has not landed."""


def not_built(command: str) -> None:
    raise NotBuiltYet(f"`agentdata {command}` is not built yet in this version.")
