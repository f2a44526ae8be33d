"""Write an SFT set's rows (canonical, as collect stores them) in the form a reader takes (forms.py).

curate writes its kept rows through it and `synth stitch` its stitched ones, so the two sets load together.

The `canonical` form (Parquet) is the rows as they are, batch by batch; the `hf` export (Parquet) is
converted column by column (`hf_form.py`); the `openai` export (JSONL, one object per line) row by row.
Every Parquet file records its form in its metadata (forms.FORM_KEY).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.formats.forms import consumer_tools, form_metadata, openai_messages, target_form
from agentdata.formats.sft_set.hf_form import write_hf
from agentdata.records import atomic_write, strip_none

BATCH_ROWS = 256


def write_openai(source: Path, target: Path) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            for batch in pq.ParquetFile(source).iter_batches(batch_size=BATCH_ROWS):
                for row in batch.to_pylist():
                    format = row.get("format")
                    line = {"messages": openai_messages(strip_none(row["messages"]), format)}
                    tools = consumer_tools(json.loads(row["tools"]) if row.get("tools") else None, format)
                    if tools:
                        line["tools"] = tools
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    return atomic_write(target, write)


def write_canonical(source: Path, target: Path, metadata: dict[str, str]) -> Path:
    """The rows as they are, with `metadata`, written by polars as curate writes its canonical sets (so both
    have one schema, 64-bit offsets included, and load together), streamed."""
    import polars as pl

    rows = pl.scan_parquet(source)
    return atomic_write(target, lambda tmp: rows.sink_parquet(tmp, engine="streaming", metadata=metadata))


class EmptySFTSetError(UserError):
    """Nothing to write: `datasets` (so TRL) and verl cannot open a Parquet file with no rows."""


def write_sft_form(
    source: Path, target: Path, target_name: str = "canonical", metadata: dict[str, str] | None = None
) -> Path:
    """Write the canonical rows of `source` to `target` in the form `target_name` reads (`metadata`: the
    Parquet file's key-value metadata, with the form added; the JSONL form has none)."""
    form = target_form(target_name)
    if pq.ParquetFile(source).metadata.num_rows == 0:
        raise EmptySFTSetError(
            f"{target}: the SFT set is empty, so nothing was written "
            "(a file with no rows cannot be loaded by datasets, TRL or verl)"
        )
    if form == "openai":
        return write_openai(source, target)
    metadata = {**(metadata or {}), **form_metadata(form)}
    return write_hf(source, target, metadata) if form == "hf" else write_canonical(source, target, metadata)
