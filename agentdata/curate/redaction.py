"""Secrets in the kept trajectories (publish/secrets.py finds them): counted, then redacted or dropped.

Every text the SFT set holds is read: the messages (contents, reasoning, call arguments) and the text columns
written beside them (`TEXT_COLUMNS`: a source named by a URL with its password, a teacher's engine spec)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.agent.shard_files import ROW_ID
from agentdata.curate.messages import trajectory_batches
from agentdata.curate.shards import Shards
from agentdata.publish.secrets import SecretCounts, SecretScanner, message_text, redact_messages
from agentdata.records import atomic_write

SCAN_BATCH_ROWS = 1024
# The SFT set's string columns besides `messages` (records.SFT_COLUMNS), scanned and redacted as they are.
TEXT_COLUMNS = ("tools", "problem_id", "source", "teacher", "format")


def find_secrets(shards: Shards, rows: pl.Series, scanner: SecretScanner) -> dict[int, Counter]:
    """The rows (global row numbers of `rows`) whose messages or text columns hold a secret, by kind: a cheap
    pass over all of them, then the rows it flags read whole."""
    wanted = pl.DataFrame({ROW_ID: rows}).lazy()
    scan = shards.scan("secrets")
    texts = [column for column in TEXT_COLUMNS if column in scan.collect_schema()]
    may_hold = pl.any_horizontal(scanner.candidates(message_text()), *(scanner.candidates(pl.col(c)) for c in texts))
    frame = scan.join(wanted, on=ROW_ID, how="semi").filter(may_hold)
    candidates = frame.select(ROW_ID).collect(engine="streaming")[ROW_ID]
    flagged: dict[int, Counter] = {}
    for records in trajectory_batches(shards, candidates, ("messages", *texts), SCAN_BATCH_ROWS, "secret candidates"):
        for record in records:
            counts: Counter = Counter()
            redact_messages(record["messages"], scanner, counts)
            for column in texts:
                if isinstance(record[column], str):
                    scanner.redact(record[column], counts)
            if counts:
                flagged[record[ROW_ID]] = counts
    return flagged


def secret_counts(flagged: dict[int, Counter]) -> SecretCounts:
    return SecretCounts(len(flagged), sum(flagged.values(), Counter()))


def redact_file(path: Path, positions: set[int], scanner: SecretScanner) -> Path:
    """Rewrite the canonical Parquet file at `path` with the messages and text columns of the rows at
    `positions` (0-based) redacted; other batches pass through as Arrow, never as Python objects."""
    file = pq.ParquetFile(path)
    kept = {key: value for key, value in (file.metadata.metadata or {}).items() if key != b"ARROW:schema"}
    schema = file.schema_arrow.with_metadata(kept)  # the provenance and the form stay with the rows
    texts = [name for name in TEXT_COLUMNS if name in schema.names]

    def batches():
        start = 0
        for batch in file.iter_batches(batch_size=SCAN_BATCH_ROWS):
            hit = [position - start for position in positions if start <= position < start + batch.num_rows]
            if hit:
                batch = _redacted_column(
                    batch, schema, "messages", hit, lambda value: redact_messages(value, scanner, Counter())
                )
                for name in texts:
                    batch = _redacted_column(batch, schema, name, hit, lambda value: value and scanner.redact(value))
            start += batch.num_rows
            yield pa.Table.from_batches([batch], schema=schema)

    redacted = path.with_name(path.name + ".redacted")
    atomic_write(redacted, lambda tmp: _write(tmp, schema, batches()))
    redacted.replace(path)
    return path


def _redacted_column(batch: pa.RecordBatch, schema: pa.Schema, name: str, rows: list[int], redact) -> pa.RecordBatch:
    """`batch` with `redact` applied to column `name`'s values at `rows`."""
    column = schema.get_field_index(name)
    values = batch.column(column).to_pylist()
    for index in rows:
        values[index] = redact(values[index])
    return batch.set_column(column, schema.field(column), pa.array(values, type=schema.field(column).type))


def _write(tmp: str, schema: pa.Schema, tables) -> None:
    with pq.ParquetWriter(tmp, schema) as writer:
        for table in tables:
            writer.write_table(table)
