"""Each command's --help fits one screen: at most 25 flags (issue 42). The settings beyond a command's everyday
flags are keys of its --config file and KEY=VALUE overrides (docs/settings.md), not more flags."""

from __future__ import annotations

import pytest
import typer

from agentdata.cli.app import app

GOAL = 25
# Commands not yet down to the goal: their count today, a ceiling that only comes down (0.5 took train from 159
# to 66 and collect, curate and eval to 25, then --harness made collect 26 and filter 42; the rest of filter's,
# train's and collect's everyday choice is the next step).
NOT_YET = {"collect": 26, "filter": 42, "train": 66}


def commands(command=None, path=()):
    command = command or typer.main.get_command(app)
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def listed_flags(command) -> list[str]:
    """The options --help lists (hidden ones, the removed spellings, are not)."""
    return [p.opts[0] for p in command.params if p.param_type_name == "option" and not p.hidden]


@pytest.mark.parametrize("name, command", list(commands()), ids=[name for name, _ in commands()])
def test_help_lists_at_most_its_ceiling_of_flags(name, command):
    assert len(listed_flags(command)) <= NOT_YET.get(name, GOAL), f"{name}: {listed_flags(command)}"


def test_a_ceiling_above_the_goal_is_one_a_command_still_needs():
    counts = {name: len(listed_flags(command)) for name, command in commands()}
    assert {name: counts[name] for name in NOT_YET} == NOT_YET  # lower a ceiling when its command loses flags
