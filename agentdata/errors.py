"""Errors that are the user's to fix: the CLI prints them as one line, without a traceback."""

from __future__ import annotations

import errno
import os
import re


class UserError(Exception):
    """A mistake in the user's input or settings (bad file, missing field, bad flag value)."""


class InputFileError(UserError):
    """A problem with one input file, optionally at one row."""

    def __init__(self, path: object, message: str, row: int | None = None):
        self.path = str(path)
        self.row = row
        self.reason = message  # what is wrong, without the file and row
        where = f"{self.path}, row {row}" if row is not None else self.path
        super().__init__(f"{where}: {message}")


class MissingDependencyError(UserError):
    """An optional part is not installed; the message says which `pip install` brings it."""

    def __init__(self, what: str, install: str):
        super().__init__(f"{what} is not installed: run `pip install {install}`")


# The system refused to write: the disk (or the user's quota, or the largest file allowed) is full, the
# place is read-only, or the user may not write there. Each is the user's to fix, not a bug.
WRITE_REFUSALS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}
# Libraries that wrap an OS error in their own type still quote its number: pyarrow "[errno 28]",
# polars "(os error 28)", Python "[Errno 28]".
_QUOTED_ERRNO = re.compile(r"(?:os error|errno) ?(\d+)", re.IGNORECASE)


def write_refusal(error: BaseException) -> int | None:
    """The errno of a write the system refused (disk full, quota, read-only, ...), wherever it is wrapped."""
    number = getattr(error, "errno", None)
    if not isinstance(number, int):
        match = _QUOTED_ERRNO.search(str(error))
        number = int(match.group(1)) if match else None
    return number if number in WRITE_REFUSALS else None


class OutputWriteError(UserError):
    """The system refused to write an output file; `kept` says what is still on disk."""

    def __init__(self, path: object, number: int, kept: str):
        self.path, self.errno = str(path), number
        if number in (errno.ENOSPC, errno.EDQUOT):
            fix = "free some space or write elsewhere"
        elif number == errno.EFBIG:
            fix = "the file would pass the largest size allowed here (see `ulimit -f`)"
        else:
            fix = "check the folder's permissions or write elsewhere"
        super().__init__(f"{self.path}: cannot write it ({os.strerror(number)}): {fix}; {kept}")
