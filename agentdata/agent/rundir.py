"""A collect run dir on disk: crash-safe trajectory shards, a journal, a manifest and stats.

    run_dir/manifest.json                 settings, versions, counts
    run_dir/stats.json                    the summary of the last finished pass
    run_dir/journal.jsonl                 trajectories finished since the last shard (see journal.py)
    run_dir/trajectories/part-NNNNN.parquet

Shards are written whole to a temporary file and renamed into place, so a killed run
leaves only complete shards behind; each shard carries the settings that made it in its
Parquet metadata, so a run dir never mixes two settings even when manifest.json is lost.
A trajectory's id is `<problem_id>-<sample_index>`: a resumed run knows exactly which ones
are done and keeps one row per id.

A run split by `--shard I/N` (shards.py) keeps the same files per part, each name starting with
the part's tag (`shard-00001-of-00004.manifest.json`, `trajectories/shard-00001-of-00004.part-00000.parquet`):
`RunDir(path, shard)` is one part, resumed on its own; `RunDir(path)` reads every part as one run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from agentdata.agent.journal import JOURNAL_NAME, KEPT, read_journal
from agentdata.agent.shard_copies import without_copies
from agentdata.agent.shard_files import check_schema
from agentdata.agent.shards import Shard, tag_of, tags_in
from agentdata.errors import InputFileError, UserError
from agentdata.inputs import check_input, check_regular_file, read_text
from agentdata.records import Trajectory, atomic_write, read_records, rows_to_table, to_row, write_json

SHARD_PATTERN = re.compile(r"part-(\d{5,})\.parquet$")
SETTINGS_KEY = b"agentdata.settings"
# Settings that change what a trajectory is: a resumed run must not mix two of them.
IDENTITY_KEYS = (
    "teacher",
    "model",
    "protocol",
    "max_tool_calls",
    "max_turns",
    "max_new_tokens",
    "temperature",
    "top_p",
    "seed",
    "system_prompt",
    "tool_output_chars",
    "tool_timeout",
    "tools",
)
MOVE_ASIDE = "move it aside to resume (the trajectories it held are redone)"


# Settings that change what a trajectory is when set (a harness's trajectories are not the agent loop's):
# unset, they are no part of the identity, so the digests of runs made before they existed stay the same.
SET_IDENTITY_KEYS = ("harness",)


def identity(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a trajectory depends on, JSON-normalised so that values compare as values (1 == 1.0). A harness
    run's trajectories do not depend on the loop settings a harness cannot honour (its protocol, tools, turns):
    they are no part of its identity (a run dir of 0.5, which recorded its teacher's protocol, resumes)."""
    from agentdata.agent.config import HARNESS_UNHONOURED

    keys = IDENTITY_KEYS + tuple(key for key in SET_IDENTITY_KEYS if settings.get(key) is not None)
    if settings.get("harness") is not None:
        keys = tuple(key for key in keys if key not in HARNESS_UNHONOURED)
    return json.loads(json.dumps({key: settings.get(key) for key in keys}, default=str))


def settings_digest(settings: dict[str, Any]) -> str:
    """A short name for the identity settings: caches keyed on it never reuse work made with others."""
    return hashlib.sha1(json.dumps(identity(settings), sort_keys=True).encode()).hexdigest()[:8]


def settings_differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What differs; a key the old record lacks (written before the key existed) is not compared. An `openai:`
    teacher with its model named is the same teacher whatever servers serve it (a fleet's URLs, one per node)."""
    recorded = [key for key in IDENTITY_KEYS if key in old] + list(SET_IDENTITY_KEYS)
    old, new = identity(old), identity(new)
    if all(_served(settings) for settings in (old, new)):
        old["teacher"] = new["teacher"] = "openai:"
    return {key: (old.get(key), new.get(key)) for key in recorded if not _same_value(old.get(key), new.get(key))}


def _served(settings: dict[str, Any]) -> bool:
    from agentdata.engines.spec import ModelSpec

    return ModelSpec.parse(str(settings.get("teacher"))).served and bool(settings.get("model"))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True  # a run dir written before NaN was refused can still be resumed
    return a == b


def check_finite(settings: dict[str, Any]) -> None:
    """NaN or infinity can never equal a resumed run's setting (and mean nothing as sampling values)."""
    for key, value in settings.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"--{key.replace('_', '-')} must be a finite number, got {value}")


# What a resume reads of the trajectories already on disk (RunDir.done_table).
DONE_SCHEMA = {"id": pl.String, "problem_hash": pl.String, "question": pl.String, "answer": pl.String}
DONE_SCHEMA |= {"finish_reason": pl.String}


class RunDir:
    """A run dir, or with `shard` one part of a sharded run dir (only the files of that part)."""

    def __init__(self, path: str | Path, shard: Shard | None = None):
        self.path = Path(path)
        self.shard = shard
        self.prefix = f"{shard.tag}." if shard is not None else ""  # of every file this part writes
        self.shard_dir = self.path / "trajectories"
        self.manifest_path = self.path / f"{self.prefix}manifest.json"
        self.stats_path = self.path / f"{self.prefix}stats.json"
        self.journal_path = self.path / f"{self.prefix}{JOURNAL_NAME}"

    # ---------------------------------------------------------------- reading
    def shards(self) -> list[Path]:
        """The committed shards, in write order (temp files of an unfinished write are not shards): a part's
        own, or of a whole run every part's. A shard that is no regular file (a FIFO would be waited on for
        ever, a device read without end) is an InputFileError naming it, for every command that reads a run."""
        if not self.shard_dir.is_dir():
            return []
        shards = sorted(
            p
            for p in self.shard_dir.iterdir()
            if SHARD_PATTERN.search(p.name) and (self.shard is None or tag_of(p.name) == self.shard)
        )
        for shard in shards:
            _refuse_irregular(shard, "move it aside")
        return shards

    def sharded(self) -> bool:
        """Whether this dir holds the parts of a sharded run (`--shard I/N`)."""
        return bool(tags_in(self.path))

    def parts(self) -> list[RunDir]:
        """The parts of a sharded run found on disk, in shard order ([] for an unsharded run)."""
        return [RunDir(self.path, shard) for shard in sorted(tags_in(self.path))] if self.shard is None else [self]

    def journal_paths(self) -> list[Path]:
        """The journal of this run, or of a whole sharded run every part's."""
        paths = [part.journal_path for part in self.parts()] if self.shard is None and self.sharded() else []
        return [path for path in [self.journal_path, *paths] if path.exists()]

    def done_ids(self) -> set[str]:
        ids: set[str] = set()
        for shard in self.shards():
            ids.update(pq.read_table(shard, columns=["id"]).column("id").to_pylist())
        return ids

    def done_table(self) -> pl.DataFrame:
        """One row per trajectory on disk (the last written of an id): its id, the hash of the problem it
        was made from (null for rows older than the hash), question, answer and finish reason."""
        shards = self.shards()
        if not shards:
            return pl.DataFrame(schema=DONE_SCHEMA)
        scan = pl.scan_parquet([str(shard) for shard in shards]).select(
            "id",
            pl.col("metadata").str.json_path_match("$.problem_hash").alias("problem_hash"),
            "question",
            "answer",
            "finish_reason",
        )
        return scan.unique("id", keep="last", maintain_order=True).collect()

    def trajectories(self) -> list[Trajectory]:
        return [t for shard in self.shards() for t in read_records(shard, Trajectory)]

    def journaled(self) -> list[Trajectory]:
        """Finished trajectories a stopped run left only in its journal (the next run moves them into a shard);
        of a sharded run, those of every part."""
        done = self.done_ids()
        journaled = [t for path in self.journal_paths() for t in read_journal(path).trajectories]
        return list({t.id: t for t in journaled if t.id not in done}.values())

    def manifest(self) -> dict[str, Any] | None:
        """The manifest, or None; a damaged one is a UserError saying what to move aside. A sharded run read as
        one has the first part's (every part has the same settings), with `shards` saying how many."""
        if not self.manifest_path.exists():
            if self.shard is None and self.sharded():
                return self._first_part_manifest()
            return None
        _refuse_irregular(self.manifest_path, MOVE_ASIDE_MANIFEST)
        try:
            manifest = json.loads(read_text(self.manifest_path))
        except (InputFileError, json.JSONDecodeError) as error:
            raise UserError(f"{self.manifest_path} is not readable JSON ({error}); {MOVE_ASIDE_MANIFEST}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("settings"), dict):
            raise UserError(f"{self.manifest_path} holds no settings; {MOVE_ASIDE_MANIFEST}")
        return manifest

    def _first_part_manifest(self) -> dict[str, Any] | None:
        for part in self.parts():
            manifest = part.manifest()
            if manifest is not None:
                keys = ("shard", "expected", "problems")  # the part's own: not the run's
                run_wide = {key: value for key, value in manifest.items() if key not in keys}
                return {**run_wide, "shards": part.shard.count}
        return None

    def shard_settings(self, shard: Path) -> dict[str, Any] | None:
        """The settings a shard was written with (None for shards written before they were recorded)."""
        metadata = pq.read_schema(shard).metadata or {}
        if SETTINGS_KEY not in metadata:
            return None
        try:
            return dict(json.loads(metadata[SETTINGS_KEY]))
        except (ValueError, TypeError):
            raise UserError(f"{shard}: its recorded settings are damaged; {MOVE_ASIDE}") from None

    # ---------------------------------------------------------------- writing
    def prepare(self, settings: dict[str, Any], extra: dict[str, Any]) -> None:
        """Check the dir and that a resumed run uses the same settings; recover an interrupted run's journal."""
        check_finite(identity(settings))
        self._check_layout()
        self._check_siblings(settings)
        journal = read_journal(self.journal_path)
        for source, previous in self._previous_settings(journal.settings if journal.trajectories else None):
            changed = settings_differences(previous, settings)
            if changed:
                described = ", ".join(f"{key}: {old!r} → {new!r}" for key, (old, new) in changed.items())
                raise UserError(
                    f"{self.path} holds a run with other settings ({described}, recorded in {source}); "
                    "use another --out or the same settings"
                )
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        self._drop_temp_files()
        done = self.done_ids()
        recovered = [t for t in journal.trajectories if t.id not in done]  # the rest reached a shard before the kill
        if recovered:
            self.write_shard(list({t.id: t for t in recovered}.values()), journal.settings)
        self.journal_path.unlink(missing_ok=True)
        self.write_manifest({"settings": settings, **extra})
        self._check_siblings(settings)  # again: a sibling started with other settings at the same moment

    def _check_siblings(self, settings: dict[str, Any]) -> None:
        """A sharded run and an unsharded one never share a dir; every part of one splits it as many ways and
        was started with the same settings."""
        if self.shard is None:
            if self.sharded():
                raise UserError(
                    f"{self.path} holds a sharded run ({len(self.parts())} part(s) of "
                    f"{self.parts()[0].shard.count}): give --shard I/N to run a part, or another --out"
                )
            return
        if any(SHARD_PATTERN.search(p.name) and tag_of(p.name) is None for p in RunDir(self.path).shards()) or any(
            (self.path / name).exists() for name in ("manifest.json", JOURNAL_NAME)
        ):
            raise UserError(f"{self.path} holds a run that is not sharded: --shard {self.shard} needs another --out")
        for other in sorted(tags_in(self.path)):
            if other.count != self.shard.count:
                raise UserError(
                    f"{self.path} holds shard {other} of a run split {other.count} ways, and this is --shard "
                    f"{self.shard}: give --shard I/{other.count}, or another --out"
                )
            manifest = RunDir(self.path, other).manifest() if other != self.shard else None
            changed = settings_differences(manifest["settings"], settings) if manifest else {}
            if changed:
                described = ", ".join(f"{key}: {old!r} → {new!r}" for key, (old, new) in changed.items())
                raise UserError(
                    f"{self.path}: shard {other} was started with other settings ({described}); every shard of "
                    "a run takes the same settings: give them, or another --out"
                )

    def _check_layout(self) -> None:
        for path, kind in (
            (self.path, "directory"),
            (self.shard_dir, "directory"),
            (self.manifest_path, "file"),
            (self.stats_path, "file"),
        ):
            if path.exists() and (path.is_dir() if kind == "file" else not path.is_dir()):
                raise UserError(
                    f"{path} should be a {kind}: move it aside to resume"
                    + ("" if path == self.path else " (nothing finished is in it)")
                )
        for shard in self.shards():
            _check_shard(shard)

    def _previous_settings(self, journal_settings: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
        """Every record of the settings that trajectories in this dir were made with."""
        shards = self.shards()
        sources = [(shard.name, self.shard_settings(shard)) for shard in shards]
        sources = [(name, found) for name, found in sources if found is not None]
        if journal_settings is not None:
            sources.append((JOURNAL_NAME, journal_settings))
        manifest = self.manifest()  # read even when unused: a damaged one is reported, not overwritten
        has_rows = any(pq.read_metadata(shard).num_rows for shard in shards) or journal_settings is not None
        if manifest is not None and has_rows:  # a dir with no trajectories is fresh, whatever a failed start wrote
            sources.insert(0, (self.manifest_path.name, manifest["settings"]))
        return sources

    def _drop_temp_files(self) -> None:
        """Left by a run killed mid-write; their rows were never committed (or are still in the journal). A part
        drops only its own: a sibling may be writing its next shard right now."""
        for folder in (self.shard_dir, self.path):
            for stale in folder.glob(f".{self.prefix}*.tmp"):
                if stale.is_file() and tag_of(stale.name[1:]) == self.shard:
                    stale.unlink(missing_ok=True)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    def write_stats(self, stats: dict[str, Any]) -> None:
        write_json(self.stats_path, stats)

    def next_shard_path(self) -> Path:
        numbers = [int(SHARD_PATTERN.search(p.name).group(1)) for p in self.shards()]
        return self.shard_dir / f"{self.prefix}part-{max(numbers, default=-1) + 1:05d}.parquet"

    def write_shard(self, trajectories: Iterable[Trajectory], settings: dict[str, Any] | None = None) -> Path:
        """One shard, written atomically, with `settings` (their identity part) in its Parquet metadata."""
        return self.write_shard_rows([to_row(trajectory) for trajectory in trajectories], settings)

    def write_shard_rows(self, rows: list[dict[str, Any]], settings: dict[str, Any] | None = None) -> Path:
        """`write_shard` of trajectories already made rows (`records.to_row`)."""
        table = rows_to_table(rows, Trajectory)
        if settings is not None:
            metadata = {**(table.schema.metadata or {}), SETTINGS_KEY: json.dumps(identity(settings)).encode()}
            table = table.replace_schema_metadata(metadata)
        return atomic_write(self.next_shard_path(), lambda tmp: pq.write_table(table, tmp), KEPT)

    def remove_rows(self, ids: set[str]) -> int:
        """Take the rows with these ids out of the shards (each rewritten atomically, keeping its settings)."""
        removed = 0
        for shard in self.shards() if ids else []:
            keep = [row_id not in ids for row_id in pq.read_table(shard, columns=["id"]).column("id").to_pylist()]
            if all(keep):
                continue
            removed += keep.count(False)
            kept = pq.read_table(shard).filter(keep)
            if kept.num_rows:
                atomic_write(shard, lambda tmp, kept=kept: pq.write_table(kept, tmp))
            else:
                shard.unlink()  # a 0-row Parquet file cannot be loaded by `datasets`
        return removed


MOVE_ASIDE_MANIFEST = "move it aside to resume (the shards keep their own settings)"


def _refuse_irregular(path: Path, remedy: str) -> None:
    try:
        check_regular_file(path)
    except InputFileError as error:
        raise InputFileError(path, f"{error.reason}; {remedy}") from None


def _check_shard(shard: Path) -> None:
    try:
        check_schema(shard)
        pq.read_metadata(shard)
    except InputFileError as error:
        raise UserError(f"{' '.join(str(error).split())}; {MOVE_ASIDE}") from None  # one line, whatever pyarrow said


# ------------------------------------------------------------------ reading many run dirs at once
def trajectory_files(path: str | os.PathLike) -> list[Path]:
    """The trajectory shards of a run dir (a copy of another shard left out), or the file itself."""
    path = Path(path)
    return without_copies(RunDir(path).shards()) if path.is_dir() else [path]


def shard_paths(run_dirs: Sequence[str | os.PathLike]) -> list[Path]:
    return list(shard_rows(run_dirs))


def shard_rows(run_dirs: Sequence[str | os.PathLike]) -> dict[Path, int]:
    """Every trajectory shard of the run dirs (or Parquet files), checked for the schema, with its row count."""
    paths: list[Path] = []
    for run_dir in map(Path, run_dirs):
        check_input(run_dir)  # a FIFO or a device is refused, not waited on; a broken link is named
        shards = trajectory_files(run_dir)
        if not shards:
            raise InputFileError(run_dir, "no trajectory shards (expected trajectories/part-*.parquet)")
        paths.extend(shards)
    return {path: check_schema(path) for path in paths}
