"""How a set was made, as one JSON record: in the Parquet file's key-value metadata and on its card.

One record per set: the stage and its settings (and their digest), the command that rebuilds it and the
folder it ran in, the versions of the code, the source runs (teacher, protocol, settings digest, versions,
model fingerprint), the rows per source and domain, what was dropped and why, and what the stage adds
(filter: the band and the profile). `read_provenance` reads it back from a file or a dataset folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from pathlib import Path
from typing import Any

from agentdata.publish.layout import data_file
from agentdata.publish.secrets import redact_tree
from agentdata.versions import package_versions

PROVENANCE_KEY = "agentdata.provenance"


def digest(settings: dict[str, Any]) -> str:
    """A short name for a stage's settings (JSON, keys sorted)."""
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def command_line(arguments: list[str] | None) -> str | None:
    """The shell line that ran the command (`agentdata ARGS`), None when the stage was called from Python."""
    return shlex.join(["agentdata", *arguments]) if arguments is not None else None


def provenance_record(stage: str, settings: dict[str, Any], command: list[str] | None, **parts: Any) -> dict[str, Any]:
    """The record of one set; `parts` are the stage's own (sources, counts, dropped, band, profile, ...). Every
    secret in it is redacted (a password in an engine spec, a token on the command line): the record leaves
    with the set, in its metadata and on its card."""
    return redact_tree(
        {
            "stage": stage,
            "command": command_line(command),
            "cwd": os.getcwd(),
            "versions": package_versions(),
            "settings": json.loads(json.dumps(settings, default=str)),
            "settings_digest": digest(settings),
            **parts,
        }
    )


def as_metadata(record: dict[str, Any]) -> dict[str, str]:
    """The record as Parquet key-value metadata (records.write_parquet_tables writes it)."""
    return {PROVENANCE_KEY: json.dumps(record, sort_keys=True, default=str)}


def read_provenance(path: str | Path) -> dict[str, Any] | None:
    """The record a set's Parquet file holds (the file, or a folder's data file); None when it holds none."""
    import pyarrow.parquet as pq

    target = data_file(path)
    if target.suffix != ".parquet" or not target.is_file():
        return None
    try:
        metadata = pq.read_metadata(target).metadata or {}  # the file's, whichever writer (polars, pyarrow) wrote it
        return json.loads(metadata[PROVENANCE_KEY.encode()]) if PROVENANCE_KEY.encode() in metadata else None
    except (OSError, ValueError):  # an unreadable file says so where it is read for its rows
        return None
