"""Reading an SFT set once, into canonical rows: what SFT tokenizes and what `set_prompt` counts.

A Parquet set that records the canonical form (formats.forms.FORM_KEY: what `curate` writes by default) is
read as it is, only the columns SFT uses; any other (an export written with `curate --for`, an older
agentdata set, a set from elsewhere, JSONL or a dataset folder) is read whole and each row converted by
formats.forms.canonical_messages, as before. `agentdata train` reads the set here once and hands the rows
to both the plan (the prompt it teaches) and the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.formats.forms import file_form
from agentdata.inputs import read_nonempty_rows
from agentdata.sft.data import canonical_row, tokenized_rows

CANONICAL_COLUMNS = ("messages", "tools", "format")  # what SFT reads of a canonical row


@dataclass
class SFTSet:
    path: Path
    form: str | None  # what the file records (forms.FORMS); None: it records none, read as an export
    rows: list[dict[str, Any]]  # canonical: `messages`, `tools` (a list), `format`; the first `limit` when given


def read_sft_set(path: str | Path, protocol: str | None = None, limit: int | None = None) -> SFTSet:
    """The set's rows (its first `limit`), canonical; an empty set or one without `messages` is refused."""
    path = Path(path)
    form = file_form(_data_file(path))
    raw = _canonical_rows(path, limit) if form == "canonical" else read_nonempty_rows(path)[:limit]
    if not raw:
        raise InputFileError(path, "the SFT set is empty")
    if "messages" not in raw[0]:
        raise InputFileError(path, f"no `messages` column (columns: {sorted(raw[0])})")
    rows = [canonical_row(row, form, protocol, path, number) for number, row in enumerate(raw, start=1)]
    return SFTSet(path, form, rows)


def tokenize_sft_set(
    path: str | Path, tokenizer: Any, protocol: str | None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The SFT set at `path`, read and tokenized (what the trainer's rows are compared with)."""
    sft_set = read_sft_set(path, protocol, limit)
    return tokenized_rows(sft_set.rows, tokenizer, sft_set.path)


def _canonical_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` rows (default all) of a canonical Parquet set, only the columns SFT reads."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(_data_file(path))
    columns = [name for name in CANONICAL_COLUMNS if name in file.schema_arrow.names]
    rows: list[dict[str, Any]] = []
    for batch in file.iter_batches(columns=columns):
        rows += batch.to_pylist()
        if limit and len(rows) >= limit:
            return rows[:limit]
    return rows


def _data_file(path: Path) -> Path:
    """The Parquet file of a set given as a dataset folder (publish.layout), or `path` itself."""
    from agentdata.publish.layout import data_file

    return data_file(path)
