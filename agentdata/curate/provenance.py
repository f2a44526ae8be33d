"""What curate records of how an SFT set was made (publish/provenance.py holds the record's shape)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.agent.rundir import RunDir, settings_digest, trajectory_files


def source_runs(
    run_dirs: Sequence[str | os.PathLike], kept: pl.Series, shard_rows: dict[Path, int]
) -> list[dict[str, Any]]:
    """One entry per input (a run dir or a trajectory file): what its manifest (or first shard) says made
    it, and how many of its rows there were (`shard_rows`: each shard's) and were kept (`kept`: the global
    row numbers kept)."""
    sources, start = [], 0
    for run_dir in map(Path, run_dirs):
        shards = trajectory_files(run_dir)
        rows = sum(shard_rows[shard] for shard in shards)
        run = RunDir(run_dir)
        manifest = (run.manifest() if run_dir.is_dir() else None) or {}
        settings = manifest.get("settings") or run.shard_settings(shards[0]) or {}
        sources.append(
            {
                "path": str(run_dir),
                "teacher": settings.get("teacher"),
                "protocol": settings.get("protocol"),
                "settings_digest": settings_digest(settings) if settings else None,
                "agentdata_version": manifest.get("agentdata_version"),
                "versions": manifest.get("versions"),
                "model_fingerprint": manifest.get("model_fingerprint"),
                "rows": rows,
                "kept": int(((kept >= start) & (kept < start + rows)).sum()),
            }
        )
        start += rows
    return sources


def kept_counts(kept: pl.DataFrame) -> dict[str, dict[str, int]]:
    """The kept rows per source and per domain."""
    return {
        key: dict(kept.group_by(column).len().sort(column).iter_rows())
        for key, column in (("by_source", "source"), ("by_domain", "domain"))
    }
