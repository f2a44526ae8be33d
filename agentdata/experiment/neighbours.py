"""Other experiments running on this machine, named in a warning when one more starts.

Two recipes at once can run a small machine out of memory (on the embedded model a recipe on vLLM peaks near
10 GiB: its GRPO process and vLLM's server), and the arms' worker count (`--jobs`, workers.default_jobs) is
chosen from the memory free when each experiment starts, not from what a later one will take. So each running
experiment leaves a record in the system's temp folder, `agentdata-experiments/PID.json`, removed when it ends;
a record whose process is gone (a killed run) is removed by the next one that looks.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
        mine.write_text(json.dumps({"pid": os.getpid(), "out": str(Path(out).resolve())}), encoding="utf-8")
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
            out = json.loads(record.read_text(encoding="utf-8"))["out"]
        except (ValueError, OSError, KeyError, TypeError):  # not one of ours, or half-written: not evidence
            continue
        if pid == os.getpid():
            continue
        if alive(pid):
            yield f"{out} (pid {pid})"
        else:
            record.unlink(missing_ok=True)  # its experiment was killed before it could remove it


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: checks the process exists, sends nothing
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
