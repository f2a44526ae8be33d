"""Each command's --help fits one screen: at most 25 flags (issue 42). The settings beyond a command's everyday
flags are keys of its --config file and KEY=VALUE overrides (docs/settings.md), not more flags."""

from __future__ import annotations

import pytest
import typer

from agentdata.cli.app import app

GOAL = 25


def commands(command=None, path=()):
    command = command or typer.main.get_command(app)
    if hasattr(command, "commands"):
        yield " ".join(path) or "agentdata", command  # a group's own --help lists its options too
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def listed_flags(command) -> list[str]:
    """The options --help lists (hidden ones, the removed spellings, are not)."""
    return [p.opts[0] for p in command.params if p.param_type_name == "option" and not p.hidden]


@pytest.mark.parametrize("name, command", list(commands()), ids=[name for name, _ in commands()])
def test_help_lists_at_most_25_flags(name, command):
    assert len(listed_flags(command)) <= GOAL, f"{name}: {listed_flags(command)}"
