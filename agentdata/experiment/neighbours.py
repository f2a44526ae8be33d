"""Other experiments running on this machine, named in a warning when one more starts.

Two recipes at once can run a small machine out of memory (on the embedded model a recipe on vLLM peaks near
10 GiB: its GRPO process and vLLM's server), and the arms' worker count (`--jobs`, workers.default_jobs) is
chosen from the memory free when each experiment starts, not from what a later one will take. So each running
experiment leaves a record in the system's temp folder, `agentdata-experiments/PID.json`, removed when it ends;
a record whose process is gone (a killed run) is removed by the next one that looks.

The folder is shared by every user of the machine, so nothing in it is trusted: a record is read only if it
is a regular file (opened without following a link or waiting: a FIFO there would hang every later
experiment), and this experiment's own record is written to a fresh file and renamed into place, never
written through whatever already has its name.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RECORD_BYTES = 4096  # a record is a pid and a path: anything longer is not one of ours


def registry() -> Path:
    return Path(tempfile.gettempdir()) / "agentdata-experiments"


@contextmanager
def registered(out: Path) -> Iterator[list[str]]:
    """Record this experiment as running for the block; yields the others running now ("OUT (pid N)")."""
    folder = registry()
    mine = folder / f"{os.getpid()}.json"
    try:
        folder.mkdir(exist_ok=True)
        others = list(running(folder))
        _write_new(mine, json.dumps({"pid": os.getpid(), "out": str(Path(out).resolve())}))
    except OSError:  # a temp folder this user cannot write: the warning is a courtesy, the experiment runs without it
        yield []
        return
    try:
        yield others
    finally:
        mine.unlink(missing_ok=True)


def running(folder: Path) -> Iterator[str]:
    for record in sorted(folder.glob("*.json")):
        try:
            pid = int(record.stem)
            out = json.loads(_read_regular(record))["out"]
        except (ValueError, OSError, KeyError, TypeError):  # not one of ours, or half-written: not evidence
            continue
        if pid == os.getpid():
            continue
        if alive(pid):
            yield f"{out} (pid {pid})"
        else:
            record.unlink(missing_ok=True)  # its experiment was killed before it could remove it


def _read_regular(record: Path) -> str:
    """The record's text if it is a regular file of at most a page; else a ValueError (not one of ours)."""
    descriptor = os.open(record, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError(f"{record} is not a regular file")
        return handle.read(RECORD_BYTES).decode("utf-8")


def _write_new(record: Path, text: str) -> None:
    """`text` in a new file of the folder, renamed to `record`: whatever had that name (a link, a FIFO) is
    replaced, never opened."""
    descriptor, temporary = tempfile.mkstemp(dir=record.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, record)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: checks the process exists, sends nothing
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
