"""Full-text search of a run dir without reading its messages: an SQLite FTS5 trigram index kept beside it.

The search the list offers is a case-insensitive substring match over the question, every message's text and
every tool call's arguments (the code), each text on its own (`table.contains`). Scanning every message of 1M
trajectories takes seconds, so once the run dir's list index is built (after the URL is printed, in the
background) this index is built too, in `RUN/.agentdata-view/search.sqlite`:

- `texts`: an FTS5 table (contentless, trigram tokenizer: every three characters a token, case folded) of the
  distinct texts of each shard: the system prompt every trajectory shares and the question its k samples share
  are stored once a shard;
- `postings`: for each shard, which rows each of its texts came from: how many rows each text has, then the
  rows, text after text (the texts are numbered in shard order, so text d's rows start where d - 1's end);
- `meta`: the shards it was built from (index_cache.shards_key) and its format.

A trigram phrase query finds exactly the texts holding the needle (a substring, not words), so a search reads
the index, never the shards. A needle under three characters has no trigram: it is searched by scanning, as is
every needle while the index is being built, or where the run dir cannot take it. Like the list index it is
written under a temporary name and renamed into place, so a viewer killed mid-build leaves no file a later
open would trust; and it records the shards it was built from, so a changed, added or removed shard builds it
again. A kept file is checked page by page before a search trusts it (`intact`); a damaged one is built again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from agentdata.agent.shard_files import ROW_ID
from agentdata.records import atomic_write
from agentdata.view.table import needle_forms

SEARCH_FILE = "search.sqlite"
FORMAT = 2  # raise it whenever what the file holds changes: an older one is then built again
MIN_CHARS = 3  # the trigram tokenizer's token: a shorter needle is searched by scanning


class Cancelled(Exception):
    """The viewer is stopping: the half-built file is removed, nothing is kept."""


def searchable_texts(frame: pl.DataFrame) -> pl.DataFrame:
    """(ROW, text) for the question, every message's content and every tool call's arguments of each row."""
    messages = frame.select(ROW_ID, message=pl.col("messages")).explode("message")
    calls = messages.select(ROW_ID, call=pl.col("message").struct.field("tool_calls")).explode("call")
    texts = pl.concat(
        [
            frame.select(ROW_ID, text=pl.col("question")),
            messages.select(ROW_ID, text=pl.col("message").struct.field("content")),
            calls.select(ROW_ID, text=pl.col("call").struct.field("function").struct.field("arguments")),
        ]
    )
    return texts.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))


def build(path: Path, files: Sequence[Path], key: str, stop: threading.Event | None = None) -> int:
    """Write the search index of `files` (a run dir's shards, in order) to `path`; returns how many texts."""

    def write(tmp: str) -> None:
        nonlocal count
        with sqlite3.connect(tmp) as con:
            count = _fill(con, files, stop or threading.Event())
            con.execute("INSERT INTO texts(texts) VALUES ('optimize')")  # one b-tree: the fastest to query
            con.execute("INSERT INTO meta VALUES (?)", (json.dumps({"key": key, "format": FORMAT, "texts": count}),))
        con.close()

    count = 0
    atomic_write(path, write)
    return count


def _fill(con: sqlite3.Connection, files: Sequence[Path], stop: threading.Event) -> int:
    con.execute("PRAGMA journal_mode=OFF")  # a crash leaves only the temporary file, removed or never trusted
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-262144")  # 256 MiB of pages: the merges stay in memory
    con.execute("CREATE VIRTUAL TABLE texts USING fts5(text, content='', columnsize=0, tokenize='trigram')")
    for option, value in (("pgsz", 4000), ("automerge", 0), ("crisismerge", 2000)):  # merged once, at the end
        con.execute("INSERT INTO texts(texts, rank) VALUES (?, ?)", (option, value))
    con.execute("CREATE TABLE postings(shard INTEGER PRIMARY KEY, lengths BLOB NOT NULL, rows BLOB NOT NULL)")
    con.execute("CREATE TABLE meta(value TEXT NOT NULL)")
    start = count = 0
    for number, shard in enumerate(files):
        if stop.is_set():
            raise Cancelled
        frame = pl.read_parquet(shard, columns=["question", "messages"]).with_row_index(ROW_ID, offset=start)
        start += frame.height
        distinct = searchable_texts(frame).group_by("text").agg(pl.col(ROW_ID))  # a row twice: found once
        docs = np.arange(count, count + distinct.height, dtype=np.int64)
        con.executemany("INSERT INTO texts(rowid, text) VALUES (?, ?)", zip(docs.tolist(), distinct["text"]))
        rows = distinct[ROW_ID]
        lengths = rows.list.len().to_numpy().astype(np.uint32)  # the shard's texts are docs count, count + 1, ...
        flat = rows.explode().to_numpy().astype(np.uint32)
        con.execute("INSERT INTO postings VALUES (?, ?, ?)", (number, lengths.tobytes(), flat.tobytes()))
        count += distinct.height
    return count


class SearchIndex:
    """A kept search index, opened once (the file may be replaced meanwhile: this connection keeps reading its own)."""

    def __init__(self, con: sqlite3.Connection):
        self._con = con
        self._lock = threading.Lock()  # one connection shared by the server's threads
        self._postings: tuple[np.ndarray, np.ndarray] | None = None  # text d's rows: rows[offsets[d]:offsets[d+1]]

    @classmethod
    def load(cls, path: Path, key: str) -> SearchIndex | None:
        """The index at `path` if it was built from the shards `key` names, else None."""
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error:
            return None
        try:
            (value,) = con.execute("SELECT value FROM meta").fetchone()
            recorded = json.loads(value)
            if recorded.get("key") == key and recorded.get("format") == FORMAT:
                return cls(con)
        except (sqlite3.Error, TypeError, ValueError, AttributeError):  # not ours, damaged, or an older format
            pass
        con.close()
        return None

    def rows(self, needle: str) -> pl.Series | None:
        """The row numbers whose question, message or call holds `needle` (case folded); None when it is too short
        for the index or holds a NUL (the caller scans)."""
        if len(needle) < MIN_CHARS or "\x00" in needle:  # FTS5's query parser ends a string at a NUL byte
            return None
        query = " OR ".join('"' + form.replace('"', '""') + '"' for form in sorted(needle_forms(needle)))
        with self._lock:
            offsets, rows = self._load_postings()
            docs = np.fromiter((doc for (doc,) in self._con.execute(SEARCH, (query,))), dtype=np.int64)
        starts, lengths = offsets[docs], offsets[docs + 1] - offsets[docs]
        # each matched text's rows, gathered without a loop: its start, then 0, 1, ... its length - 1
        within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        found = np.zeros(int(rows.max()) + 1 if rows.size else 0, dtype=bool)  # each row once, in order (no sort)
        found[rows[np.repeat(starts, lengths) + within]] = True
        return pl.Series(ROW_ID, np.flatnonzero(found), dtype=pl.UInt32)

    def intact(self) -> bool:
        """Whether every page of the file reads as SQLite wrote it (a quick_check: one read of the file, in the
        background after the URL). A file damaged on disk (pages zeroed, cut, overwritten) is otherwise trusted by
        its recorded key and finds nothing, or fails every search."""
        try:
            with self._lock:
                return self._con.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        except sqlite3.Error:
            return False

    def close(self) -> None:
        with self._lock:
            self._con.close()

    @property
    def warm(self) -> bool:
        return self._postings is not None

    def warm_up(self) -> None:
        """Read the postings now (a few tenths of a second at 1M rows), so that the first search does not."""
        with self._lock:
            self._load_postings()

    def _load_postings(self) -> tuple[np.ndarray, np.ndarray]:
        if self._postings is None:
            lengths, rows = [np.zeros(0, np.uint32)], [np.zeros(0, np.uint32)]
            for length_bytes, row_bytes in self._con.execute("SELECT lengths, rows FROM postings ORDER BY shard"):
                lengths.append(np.frombuffer(length_bytes, dtype=np.uint32))
                rows.append(np.frombuffer(row_bytes, dtype=np.uint32))
            offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths), dtype=np.int64)])
            self._postings = (offsets, np.concatenate(rows))
        return self._postings


SEARCH = "SELECT rowid FROM texts WHERE texts MATCH ?"
