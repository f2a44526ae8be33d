"""The journal of scores: every PRM score and judge verdict is on disk as soon as it is made.

    $AGENTDATA_CACHE/scores/<scorer digest>.jsonl     one {"key": ..., "value": {...}} per line

A scorer (a PRM with its options, a judge with its engine, options and rubric) has one file,
named by a digest of what it is; a line's key is a digest of the trajectory content it scored.
A rerun, or a run started again after a kill, reads the file and asks the model only about
trajectories it has no line for. Each line is flushed to the OS at once (a `kill -9` keeps it)
and the file fsync'ed at most once a second; a line cut short by a kill is the last one and
is ignored. Failures are never written: they are tried again on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from agentdata.errors import UserError

FSYNC_EVERY_S = 1.0


def digest(*parts: Any) -> str:
    """A stable name for JSON-able parts (key order does not matter)."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def default_cache_dir() -> Path:
    return Path(os.environ.get("AGENTDATA_CACHE") or "~/.cache/agentdata").expanduser() / "scores"


def refuse_non_folder(folder: str | os.PathLike) -> None:
    """The journal's folder (score_cache=) is a folder or nothing yet: a file there is one line, not a traceback
    when the first score is written (or a wait on a FIFO)."""
    path = Path(folder).expanduser()
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        raise UserError(f"score_cache={path}: not a folder; give a folder for the score journal (made if missing)")


class ScoreJournal:
    """What one scorer has scored, by trajectory key; `put` appends a line at once."""

    def __init__(self, folder: str | os.PathLike | None, scorer: dict[str, Any]):
        folder = Path(folder).expanduser() if folder else default_cache_dir()
        refuse_non_folder(folder)
        self.path = folder / f"{digest(scorer)}.jsonl"
        self.scorer = scorer
        self.values: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._handle = None
        self._last_sync = 0.0
        self._read()

    def _read(self) -> None:
        if self.path.is_dir():
            raise UserError(f"{self.path}: the score journal is a folder; move it aside")
        if not self.path.exists():
            return
        try:
            lines = self.path.read_bytes().decode("utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"{self.path}: the score journal is not readable ({error}); move it aside") from None
        for line in lines[:-1]:  # what follows the last newline was cut short by a kill
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a damaged line costs one score, asked again
            if isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("value"), dict):
                self.values[entry["key"]] = entry["value"]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.values.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            self.values[key] = value
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                new = not self.path.exists()
                self._handle = open(self.path, "a", encoding="utf-8")
                if new:  # what this file scored, for a person who finds it
                    self._handle.write(json.dumps({"scorer": self.scorer}, sort_keys=True, default=str) + "\n")
            self._handle.write(line)
            self._handle.flush()
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_EVERY_S:
                os.fsync(self._handle.fileno())
                self._last_sync = now

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
