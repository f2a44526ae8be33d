"""Secrets in the kept trajectories (publish/secrets.py finds them): counted, then redacted or dropped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.agent.rundir import ROW_ID, scan_shards
from agentdata.curate.messages import trajectory_batches
from agentdata.publish.secrets import SecretCounts, SecretScanner, message_text, redact_messages
from agentdata.records import atomic_write

SCAN_BATCH_ROWS = 1024


def find_secrets(paths: Sequence[Path], rows: pl.Series, scanner: SecretScanner) -> dict[int, Counter]:
    """The rows (global row numbers of `rows`) whose messages hold a secret, with the secrets by kind."""
    wanted = pl.DataFrame({ROW_ID: rows}).lazy()
    frame = scan_shards(paths).join(wanted, on=ROW_ID, how="semi").filter(scanner.candidates(message_text()))
    candidates = frame.select(ROW_ID).collect(engine="streaming")[ROW_ID]
    flagged: dict[int, Counter] = {}
    for records in trajectory_batches(paths, candidates, ("messages",), SCAN_BATCH_ROWS):
        for record in records:
            counts: Counter = Counter()
            redact_messages(record["messages"], scanner, counts)
            if counts:
                flagged[record[ROW_ID]] = counts
    return flagged


def secret_counts(flagged: dict[int, Counter]) -> SecretCounts:
    return SecretCounts(len(flagged), sum(flagged.values(), Counter()))


def redact_file(path: Path, positions: set[int], scanner: SecretScanner) -> Path:
    """Rewrite the canonical Parquet file at `path` with the messages of the rows at `positions` (0-based)
    redacted; other batches pass through as Arrow, never as Python objects."""
    file = pq.ParquetFile(path)
    schema = file.schema_arrow
    column = schema.get_field_index("messages")

    def batches():
        start = 0
        for batch in file.iter_batches(batch_size=SCAN_BATCH_ROWS):
            hit = [position - start for position in positions if start <= position < start + batch.num_rows]
            if hit:
                messages = batch.column(column).to_pylist()
                for index in hit:
                    messages[index] = redact_messages(messages[index], scanner, Counter())
                batch = batch.set_column(
                    column, schema.field(column), pa.array(messages, type=schema.field(column).type)
                )
            start += batch.num_rows
            yield pa.Table.from_batches([batch], schema=schema)

    redacted = path.with_name(path.name + ".redacted")
    atomic_write(redacted, lambda tmp: _write(tmp, schema, batches()))
    redacted.replace(path)
    return path


def _write(tmp: str, schema: pa.Schema, tables) -> None:
    with pq.ParquetWriter(tmp, schema) as writer:
        for table in tables:
            writer.write_table(table)
