"""A run dir's index kept beside its shards (`RUN/.agentdata-view/index.parquet`), so the next open reads one file;
and its search index (`search.sqlite`, view/search_index.py), so a search reads no message.

Building the index reads a few columns of every shard, drops the rows a later one replaced and computes each
problem's pass rate; reading it back costs a fraction of that. The file records what it was built from: each
shard's name, size, modification time and inode (a shard rewritten in place, a shard added by a resumed run whose
redone rows replace earlier ones, or a shard removed all change that) and the index's own format; any difference
builds it again. With it are the numbers the home page shows (facet counts, the run's stats), built from the same
index.

It is written to a temporary file and renamed into place, in a folder of its own: nothing is written among the
shards, nothing the run dir holds is replaced, and no command reads that folder (its name starts with a dot, as
hidden files do, so `datasets` and a folder of artifacts pass it by). A run dir that cannot be written (read-only,
full disk) is indexed in memory, as before; a damaged or foreign index file is built again. Deleting the folder
is always safe.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from agentdata.errors import InputFileError, UserError
from agentdata.inputs import open_regular_file
from agentdata.records import atomic_write
from agentdata.view import search_index
from agentdata.view.search_index import SEARCH_FILE, SearchIndex

CACHE_DIR = ".agentdata-view"
CACHE_FILE = "index.parquet"
FORMAT = 1  # raise it whenever what the index holds changes: a file of an older format is then built again
METADATA_KEY = "agentdata.view.index"
STALE_TEMP_S = 3600  # a temporary file this old was left by a viewer killed mid-write (a write takes minutes at most)

log = logging.getLogger("agentdata.view")


class IndexCache:
    """The index file of the run dir `run`, for the shards `files` as they are on disk now."""

    def __init__(self, run: Path, files: Sequence[Path]):
        self.folder = run / CACHE_DIR
        self.path = self.folder / CACHE_FILE
        self.search_path = self.folder / SEARCH_FILE
        self.files = list(files)
        self.key = shards_key(run, self.files)

    def load(self) -> tuple[pl.DataFrame, dict[str, Any]] | None:
        """The index and its summary, if the file was built from these very shards; else None."""
        if self.folder.is_symlink():
            return None
        try:
            # One open file (a viewer replacing it meanwhile changes nothing here), opened without waiting: a FIFO
            # put in its place is refused, and built again, not waited on for ever.
            with open_regular_file(self.path) as handle:
                recorded = json.loads((pq.read_metadata(handle).metadata or {}).get(METADATA_KEY.encode(), b"null"))
                if not isinstance(recorded, dict) or recorded.get("key") != self.key:
                    return None
                handle.seek(0)
                return pl.read_parquet(handle), recorded["summary"]
        except InputFileError as error:
            log.debug("the index kept in %s is not read: %s", self.path, error)
            return None
        except Exception:  # noqa: BLE001 - a damaged or foreign file (pyarrow and polars raise many types): rebuilt
            log.debug("the index kept in %s cannot be read; building it again", self.path, exc_info=True)
            return None

    def store(self, index: pl.DataFrame, summary: dict[str, Any]) -> bool:
        """Keep the index for the next open; False (and nothing changed) where the run dir cannot take it."""
        if self.folder.is_symlink():  # it would write into another folder, under a name that may be taken there
            return False
        recorded = json.dumps({"key": self.key, "format": FORMAT, "summary": summary})
        try:
            self.folder.mkdir(exist_ok=True)
            self._drop_stale_temp_files()
            atomic_write(
                self.path,
                lambda tmp: index.write_parquet(
                    tmp, compression="lz4", statistics=False, metadata={METADATA_KEY: recorded}
                ),
            )
        except (OSError, UserError, pl.exceptions.PolarsError) as error:  # read-only, full disk, not a folder
            log.debug("the index of %s is not kept beside it: %s", self.folder.parent, error)
            return False
        return True

    def load_search(self) -> SearchIndex | None:
        """The search index kept beside the run, if it was built from these very shards; else None."""
        if self.folder.is_symlink() or not self.search_path.is_file():
            return None
        return SearchIndex.load(self.search_path, self.key)

    def store_search(self, stop: threading.Event) -> SearchIndex | None:
        """Build the search index beside the run (seconds to minutes: after the URL, in the background) and open it;
        None (and nothing changed) where the run dir cannot take it. `stop` set: abandoned, its temporary file gone."""
        if self.folder.is_symlink():
            return None
        try:
            self.folder.mkdir(exist_ok=True)
            self._drop_stale_temp_files()
            search_index.build(self.search_path, self.files, self.key, stop)
        except (OSError, UserError, sqlite3.Error) as error:  # read-only, full disk, not a folder
            log.debug("the search index of %s is not kept beside it: %s", self.folder.parent, error)
            return None
        return SearchIndex.load(self.search_path, self.key)

    def _drop_stale_temp_files(self) -> None:
        now = time.time()
        for name in (CACHE_FILE, SEARCH_FILE):
            for stale in self.folder.glob(f".{name}.*.tmp"):
                if stale.is_file() and now - stale.stat().st_mtime > STALE_TEMP_S:
                    stale.unlink(missing_ok=True)


def shards_key(run: Path, files: Sequence[Path]) -> str:
    """What the index depends on: each shard's place, size, modification time and inode, and the index's format."""
    entries = []
    for path in files:
        status = os.stat(path)
        entries.append([path.relative_to(run).as_posix(), status.st_size, status.st_mtime_ns, status.st_ino])
    return hashlib.sha256(json.dumps([FORMAT, entries]).encode()).hexdigest()
