"""Errors that are the user's to fix: the CLI prints them as one line, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input or settings (bad file, missing field, bad flag value)."""


class InputFileError(UserError):
    """A problem with one input file, optionally at one row."""

    def __init__(self, path: object, message: str, row: int | None = None):
        self.path = str(path)
        self.row = row
        where = f"{self.path}, row {row}" if row is not None else self.path
        super().__init__(f"{where}: {message}")


class MissingDependencyError(UserError):
    """An optional part is not installed; the message says which `pip install` brings it."""

    def __init__(self, what: str, install: str):
        super().__init__(f"{what} is not installed: run `pip install {install}`")
