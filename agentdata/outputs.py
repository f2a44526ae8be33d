"""The one check every command makes on where it will write, before any work starts.

An output file must name a file (not a folder) with a suffix of a form the command writes:
a name such as `x.csv` for a Parquet set is refused rather than silently written as Parquet
under the wrong name. An output folder must not be a file. Either must be creatable: the
nearest existing folder above it must be a folder this user may write in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from agentdata.errors import UserError


def check_output_file(path: str | os.PathLike, flag: str, suffixes: Sequence[str], what: str = "the output") -> Path:
    """`path` can be written as a file of one of `suffixes`; else a UserError naming `flag`."""
    path = Path(path)
    with _os_errors_named(flag, path):
        _check_file(path, flag, suffixes, what)
    return path


def _check_file(path: Path, flag: str, suffixes: Sequence[str], what: str) -> None:
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name such as {path / ('out' + suffixes[0])}")
    if path.suffix.lower() not in suffixes:
        forms = " or ".join(suffixes)
        raise UserError(
            f"{flag} {path}: expected a file name ending in {forms} ({what}); nothing is written under another suffix"
        )
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} exists and is not a regular file")
    _check_creatable(path.parent, flag, path)


def check_output_dir(path: str | os.PathLike, flag: str) -> Path:
    """`path` is, or can be made, a folder this user can write in; else a UserError naming `flag`."""
    path = Path(path)
    with _os_errors_named(flag, path):
        if path.exists() and not path.is_dir():
            raise UserError(f"{flag} {path} is a file; it names a folder to write into: give a folder")
        _check_creatable(path, flag, path)
    return path


@contextmanager
def _os_errors_named(flag: str, path: Path) -> Iterator[None]:
    """A path the system refuses to even look at (a name too long, a loop of links) is the user's to fix."""
    try:
        yield
    except OSError as error:
        raise UserError(f"{flag} {str(path)[:200]}: {error.strerror or error}") from None


def _check_creatable(folder: Path, flag: str, target: Path) -> None:
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {target}: {existing} is a file, so no folder can be made under it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {target}: no permission to write in {existing}")
