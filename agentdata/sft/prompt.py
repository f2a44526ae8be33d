"""The protocol and system prompt an SFT set teaches: what the rest of the run must speak to the model in.

A row is trained in its `format` (else the stage's protocol) and under its own system message
(else the protocol's, listing the row's tools). `set_prompt` counts both over the set, so
`agentdata train` can roll GRPO out the way SFT taught, and the trained model's dir can record it
(`engines/trained.py`). A system message equal to the protocol's own for the row's tools counts
as the protocol's (None): a later run with more tools then gets a prompt that lists them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agentdata.errors import InputFileError
from agentdata.inputs import read_nonempty_rows
from agentdata.sft.data import cleaned_messages, row_format, row_tools


@dataclass(frozen=True)
class SetPrompt:
    protocols: dict[str, int]  # rows trained in each protocol
    system_prompts: dict[str | None, int]  # rows under each system prompt (None: the protocol's own)

    @property
    def protocol(self) -> str:
        """The protocol most rows are trained in."""
        return Counter(self.protocols).most_common(1)[0][0]

    @property
    def system_prompt(self) -> str | None:
        """The system prompt most rows of that protocol carry (None: the protocol's own)."""
        return Counter(self.system_prompts).most_common(1)[0][0]

    @property
    def rows(self) -> int:
        return sum(self.protocols.values())

    def mixed(self) -> list[str]:
        """One line per way the set does not teach one protocol and one prompt (empty when it does)."""
        lines = []
        if len(self.protocols) > 1:
            counts = ", ".join(f"{name} ({rows} rows)" for name, rows in Counter(self.protocols).most_common())
            lines.append(f"its rows are in {counts}")
        if len(self.system_prompts) > 1:
            lines.append(
                f"its rows carry {len(self.system_prompts)} different system prompts (the most common in "
                f"{Counter(self.system_prompts).most_common(1)[0][1]} of {self.rows} rows)"
            )
        return lines


def uniform_prompt(protocol: str, system_prompt: str | None = None, rows: int = 1) -> SetPrompt:
    """What a set all of one protocol and prompt teaches (the demonstration's stitched set)."""
    return SetPrompt({protocol: rows}, {system_prompt: rows})


def set_prompt(path: str | Path, protocol: str | None = None, limit: int | None = None) -> SetPrompt:
    """What the SFT set at `path` teaches; a `protocol` its rows' `format` contradicts is refused (one line)."""
    from agentdata.formats import get_protocol

    path = Path(path)
    rows = read_nonempty_rows(path)
    if not rows:
        raise InputFileError(path, "the SFT set is empty")
    protocols: Counter[str] = Counter()
    prompts: Counter[str | None] = Counter()
    defaults: dict[tuple[str, str], str] = {}
    for number, row in enumerate(rows[:limit] if limit else rows, start=1):
        format = row_format(row, protocol, path, number)
        messages = cleaned_messages(row.get("messages"), path, number)
        protocols[format] += 1
        if messages[0]["role"] != "system":
            prompts[None] += 1
            continue
        tools = row_tools(row.get("tools"), path, number)
        key = (format, json.dumps(tools, sort_keys=True))
        if key not in defaults:
            defaults[key] = get_protocol(format).system_prompt(tools)
        own = messages[0]["content"]
        prompts[None if own == defaults[key] else own] += 1
    return SetPrompt(dict(protocols), dict(prompts))
