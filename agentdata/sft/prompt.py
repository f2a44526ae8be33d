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
from typing import Any


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
    from agentdata.sft.sft_set import read_sft_set

    return prompt_of(read_sft_set(path, protocol, limit).rows)


def prompt_of(rows: list[dict[str, Any]]) -> SetPrompt:
    """What canonical rows (sft_set.read_sft_set) teach: their protocols and system prompts."""
    from agentdata.formats import get_protocol

    protocols: Counter[str] = Counter()
    prompts: Counter[str | None] = Counter()
    defaults: dict[tuple[str, str], str] = {}
    texts: dict[int, str] = {}  # rows of a canonical set share their tools list: each is written out once
    for row in rows:
        format, messages, tools = row["format"], row["messages"], row["tools"]
        protocols[format] += 1
        if messages[0]["role"] != "system":
            prompts[None] += 1
            continue
        if id(tools) not in texts:
            texts[id(tools)] = json.dumps(tools, sort_keys=True)
        key = (format, texts[id(tools)])
        if key not in defaults:
            defaults[key] = get_protocol(format).system_prompt(tools)
        own = messages[0]["content"]
        prompts[None if own == defaults[key] else own] += 1
    return SetPrompt(dict(protocols), dict(prompts))
