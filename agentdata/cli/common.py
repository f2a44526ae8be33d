"""What every command shares: option aliases defined once, the console, and error mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional, Sequence

import typer
from rich.console import Console

from agentdata.outputs import check_output_dir, check_output_file

console = Console()
err_console = Console(stderr=True)

# Where this command writes: an unexpected error's traceback is logged there (cli/crash.py).
_output_place: list[Path] = []


def output_file(path: Path, flag: str, suffixes: Sequence[str], what: str = "the output") -> Path:
    """Check an output file before any work (one line naming `flag` if unusable); its folder takes the crash log."""
    check_output_file(path, flag, suffixes, what)
    _output_place[:] = [path.parent]
    return path


def output_dir(path: Path, flag: str) -> Path:
    """Check an output folder before any work (one line naming `flag` if unusable); it takes the crash log."""
    check_output_dir(path, flag)
    _output_place[:] = [path]
    return path


def output_place() -> Path | None:
    return _output_place[0] if _output_place else None


def forget_output_place() -> None:
    _output_place.clear()

QuestionField = Annotated[
    Optional[str], typer.Option("--question-field", help="Column holding the question (default: recognised names).")
]
AnswerField = Annotated[
    Optional[str], typer.Option("--answer-field", help="Column holding the gold answer (default: recognised names).")
]
Seed = Annotated[int, typer.Option("--seed", help="Base random seed.")]

# The agent-loop settings that collect, filter and eval share: one definition each.
ModelName = Annotated[Optional[str], typer.Option("--model", help="Model name for openai: engines.")]
EngineOption = Annotated[
    Optional[list[str]], typer.Option("--engine-option", help="KEY=VALUE passed to the engine (repeatable).")
]
Limit = Annotated[Optional[int], typer.Option("--limit", help="Use only the first N problems.")]
ProtocolName = Annotated[str, typer.Option("--protocol", help="Tool-call protocol: hermes, codeblock, qwen3coder or native.")]
MaxTurns = Annotated[int, typer.Option("--max-turns", help="Model turns per trajectory.")]
MaxNewTokens = Annotated[int, typer.Option("--max-new-tokens", help="Model tokens per trajectory, all turns together.")]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature (0 = greedy).")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus sampling threshold.")]
ToolOutputChars = Annotated[
    int, typer.Option("--tool-output-chars", help="Tool output shown to the model, head and tail.")
]
Concurrency = Annotated[int, typer.Option("--concurrency", help="Trajectories in flight at once.")]
SandboxSpec = Annotated[str, typer.Option(
    "--sandbox", help="'local', or URLs (comma separated) of `agentdata sandbox serve` or SandboxFusion.")]
ToolSpecs = Annotated[
    Optional[list[str]],
    typer.Option("--tool", help="A tool beside the code interpreter: a typed Python function as module:function or "
                                "path/to/file.py:function, or a registered tool name (repeatable)."),
]
ExtraSteps = Annotated[
    Optional[list[str]],
    typer.Option("--step", help="A filter step after the built-in ones: a registered name or a plug-in "
                                "module:Step / path/to/file.py:Step (repeatable)."),
]


def loop_tools(extra: list[str] | None) -> list[str]:
    """The code interpreter plus the tools named with --tool."""
    from agentdata.tools import DEFAULT_TOOLS

    return [*DEFAULT_TOOLS, *(name for name in extra or [] if name not in DEFAULT_TOOLS)]


def engine_options(pairs: list[str] | None, model: str | None) -> dict[str, object]:
    """The engine's options from repeated --engine-option flags and --model."""
    options = parse_options(pairs or [])
    if model:
        options["model"] = model
    return options


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
