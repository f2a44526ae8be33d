"""The --harness COMMAND as argv: split when the settings are built, so a command that cannot be split is
refused before a run dir is made (agent/config.py), and split the same way where it runs (agent/harness.py)."""

from __future__ import annotations

import shlex

from agentdata.errors import UserError


def harness_argv(command: str) -> list[str]:
    """COMMAND split as a shell would split it (no shell runs it: `{question}` is one argument, never code)."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise UserError(f"--harness {command!r}: {error}") from None
    if not argv:
        raise UserError("--harness: give the command to run, e.g. --harness 'python my_agent.py'")
    return argv
