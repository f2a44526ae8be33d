"""Give every conversation of an SFT set the demo's compact system prompt (see evaluate.py)."""

from __future__ import annotations

import sys

import polars as pl
from evaluate import COMPACT_SYSTEM_PROMPT


def with_compact_prompt(messages: list[dict]) -> list[dict]:
    system = {**messages[0], "content": COMPACT_SYSTEM_PROMPT}
    return [system, *messages[1:]] if messages[0]["role"] == "system" else [system, *messages]


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    table = pl.read_parquet(source)
    messages = [with_compact_prompt(m) for m in table["messages"].to_list()]
    table.with_columns(pl.Series("messages", messages, dtype=table.schema["messages"])).write_parquet(target)
    print(f"{len(table)} conversations with the compact system prompt -> {target}")


if __name__ == "__main__":
    main()
