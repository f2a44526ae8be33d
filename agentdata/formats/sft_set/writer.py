"""Write an SFT set's rows (canonical, as collect stores them) in the form a consumer reads (forms.py).

curate writes its kept rows through it and `synth stitch` its stitched ones, so the two sets load together.

The `hf` form (Parquet) is written column by column (`hf_form.py`); the `openai` form (JSONL, one
object per line) row by row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.formats.forms import consumer_tools, openai_messages, target_form
from agentdata.formats.sft_set.hf_form import write_hf
from agentdata.records import atomic_write

BATCH_ROWS = 256


def _without_nulls(value: Any) -> Any:
    """Arrow gives every struct field; a canonical message leaves out the keys it does not have."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def canonical_batches(source: Path) -> Iterator[list[dict[str, Any]]]:
    """The rows of a canonical SFT file, `tools` decoded from its JSON string, in batches."""
    for batch in pq.ParquetFile(source).iter_batches(batch_size=BATCH_ROWS):
        rows = []
        for row in batch.to_pylist():
            row["messages"] = _without_nulls(row["messages"])
            if isinstance(row.get("tools"), str):
                row["tools"] = json.loads(row["tools"])
            rows.append(row)
        yield rows


def write_openai(source: Path, target: Path) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            for rows in canonical_batches(source):
                for row in rows:
                    line = {"messages": openai_messages(row["messages"], row.get("format"))}
                    tools = consumer_tools(row.get("tools"), row.get("format"))
                    if tools:
                        line["tools"] = tools
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    return atomic_write(target, write)


class EmptySFTSetError(UserError):
    """Nothing to write: `datasets` (so TRL) and verl cannot open a Parquet file with no rows."""


def write_sft_form(source: Path, target: Path, target_name: str = "hf", metadata: dict[str, str] | None = None) -> Path:
    """Write the canonical rows of `source` to `target` in the form `target_name` reads (`metadata`: the
    Parquet file's key-value metadata; the JSONL form has none)."""
    form = target_form(target_name)
    if pq.ParquetFile(source).metadata.num_rows == 0:
        raise EmptySFTSetError(
            f"{target}: the SFT set is empty, so nothing was written "
            "(a file with no rows cannot be loaded by datasets, TRL or verl)"
        )
    return write_openai(source, target) if form == "openai" else write_hf(source, target, metadata)
