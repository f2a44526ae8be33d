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


def parse_options(pairs: list[str]) -> dict[str, object]:
    """Turn repeated KEY=VALUE flags into a dict; numbers and booleans are converted."""
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}")
        options[key.strip().replace("-", "_")] = _convert(raw.strip())
    return options


def _convert(raw: str) -> object:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw
