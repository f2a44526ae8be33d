"""Where a regrade writes: `OUT` appears whole or not at all, and one regrade at a time writes it.

The run is written to `.OUT.regrading` beside `OUT` and renamed into place when whole, so a killed
regrade leaves no half run (the next one clears what it left). A lock beside it (`.OUT.regrade.lock`,
flock: released when the process ends, however it ends) keeps a second regrade into the same `OUT`
out of the first one's staging folder, where both would write their shards (every row twice, then a
rename that fails): the second is refused in one line instead.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentdata.errors import UserError


@contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """The staging folder to write the regraded run in; renamed to `out` when the block ends without error."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.regrade.lock", "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"{out}: another regrade is writing it now; wait for it to end or give another --out"
            ) from None
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UserError(f"{out} is not empty: give a new folder for the regraded run")
        staging = out.parent / f".{out.name}.regrading"
        shutil.rmtree(staging, ignore_errors=True)  # what a killed regrade left
        yield staging
        try:
            staging.rename(out)  # onto nothing or an empty folder: atomic
        except OSError as error:
            raise UserError(
                f"{out} was filled while this regrade ran ({error.strerror}); the regraded run is in {staging}"
            ) from None
