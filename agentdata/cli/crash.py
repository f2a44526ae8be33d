"""Where an unexpected error's traceback goes: a log file, named on the one line the user sees.

The log lands in the command's output folder (the run dir, or the folder of the output
file) when the command got far enough to name it, else in a per-user temp folder.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import traceback
from pathlib import Path

FALLBACK_LOG_DIR = Path(tempfile.gettempdir()) / "agentdata-logs"


def write_crash_log(error: BaseException, place: Path | None) -> Path:
    """Write the traceback of `error` to a new log file and return its path. Its secrets (an engine URL's
    password in an error message) are redacted: a log is what gets pasted into a bug report."""
    from agentdata.publish.secrets import shared_scanner

    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    text = shared_scanner().redact(text)
    name = f"agentdata-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (place, FALLBACK_LOG_DIR):
        if folder is None:
            continue
        path = folder / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:  # an unwritable or full output folder: fall back to the temp folder
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)  # no empty log left behind on a full disk
    return Path(os.devnull)
