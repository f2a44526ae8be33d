"""Running the `agentdata` CLI in-process, as the console script does (error mapping included)."""

from __future__ import annotations

from agentdata.cli.app import main


def run_cli(args: list[str]) -> int:
    """The exit code `agentdata ARGS` ends with; output goes to the captured stdout/stderr."""
    try:
        main(args)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0
