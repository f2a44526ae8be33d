"""The data of the pages beyond a list: a problem's samples, compare two runs, curate's report, train's curves."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from agentdata.errors import InputFileError
from agentdata.filter.confidence import wilson_interval
from agentdata.settings import Band
from agentdata.view.artifacts import Artifact, journal_note, read_report
from agentdata.view.query import QueryError
from agentdata.view.table import ROW

SAMPLE_COLUMNS = (
    "id",
    "correct",
    "final_answer",
    "finish_reason",
    "num_tool_calls",
    "num_tool_errors",
    "completion_tokens",
    ROW,
)


def artifact_band(artifact: Artifact, default: tuple[float, float]) -> tuple[float, float]:
    """The band of the pool a profile run was made for (its report's config), else the viewer's."""
    band = ((artifact.report or {}).get("config") or {}).get("band")
    return (float(band[0]), float(band[1])) if isinstance(band, list) and len(band) == 2 else default


def problem_page(
    artifact: Artifact, problem_id: str, band: tuple[float, float], drop_reason: str | None = None
) -> dict[str, Any]:
    """One problem's k samples side by side, its pass rate with a 95% Wilson interval, in or out of the band."""
    table = artifact.table()
    samples = table.index.filter(pl.col("problem_id") == problem_id).sort("id")
    if not samples.height:
        raise KeyError(problem_id)
    valid = samples.filter(pl.col("finish_reason") != "error")
    correct = int(valid["correct"].sum())
    rate = correct / valid.height if valid.height else None
    low, high = wilson_interval(correct, valid.height) if valid.height else (None, None)
    in_band = None
    if rate is not None:
        in_band = bool(Band.parse(band).contains(rate))  # filter's rule: both ends exclusive
    return {
        "problem_id": problem_id,
        "question": _full_question(artifact, samples[ROW][0]),
        "samples": samples.select([c for c in SAMPLE_COLUMNS if c in samples.columns]).to_dicts(),
        "correct": correct,
        "valid": valid.height,
        "failed": samples.height - valid.height,
        "pass_rate": rate,
        "interval": [low, high],
        "band": list(band),
        "in_band": in_band,
        "drop_reason": drop_reason,
    }


def _full_question(artifact: Artifact, row: int) -> str:
    record = artifact.table().record(int(row))
    return record["trajectory"].question


def pool_drop_reasons(catalog: Any, artifact: Artifact) -> dict[str, str]:
    """problem id -> why the pool left it out, for a profile run dir whose pool is open too."""
    for other in catalog:
        if other.kind == "pool" and other.links.get("profile") == artifact.key and other.has_rows:
            left_out = other.table().index.filter(pl.col("status") != "in pool")
            return dict(left_out.select("problem_id", "status").iter_rows())
    return {}


def compare_page(first: Artifact, second: Artifact, show: str = "flipped", limit: int | None = 500) -> dict[str, Any]:
    """Two runs on the same problems: per problem the pass rate of each, and which flipped.

    A problem is solved by a run when at least one of its valid samples is correct; it flipped when one
    run solved it and the other did not. `show`: flipped | gained | lost | both | neither | all.
    """
    if not (first.is_trajectories and second.is_trajectories):
        raise QueryError("compare: both artifacts must be runs or trajectory files")
    left, right = _per_problem(first), _per_problem(second)
    joined = left.join(right, on="problem_id", how="inner", suffix="_b")
    joined = joined.with_columns(
        (pl.col("solved") & ~pl.col("solved_b")).alias("lost"),
        (~pl.col("solved") & pl.col("solved_b")).alias("gained"),
        (pl.col("pass_rate_b") - pl.col("pass_rate")).alias("difference"),
    )
    counts = {
        "problems": joined.height,
        "only_in_a": left.height - joined.height,
        "only_in_b": right.height - joined.height,
        "both": int((joined["solved"] & joined["solved_b"]).sum()),
        "neither": int((~joined["solved"] & ~joined["solved_b"]).sum()),
        "gained": int(joined["gained"].sum()),
        "lost": int(joined["lost"].sum()),
    }
    chosen = {
        "flipped": pl.col("gained") | pl.col("lost"),
        "gained": pl.col("gained"),
        "lost": pl.col("lost"),
        "both": pl.col("solved") & pl.col("solved_b"),
        "neither": ~pl.col("solved") & ~pl.col("solved_b"),
        "all": pl.lit(True),
    }
    if show not in chosen:
        raise QueryError(f"show: one of {', '.join(chosen)}, got {show[:40]!r}")
    rows = joined.filter(chosen[show]).sort(["difference", "problem_id"], descending=[True, False])
    shown = rows if limit is None else rows.head(limit)
    return {
        "a": first.key,
        "b": second.key,
        "show": show,
        "counts": counts,
        "total": rows.height,
        "rows": shown.to_dicts(),
    }


def _per_problem(artifact: Artifact) -> pl.DataFrame:
    index = artifact.table().index
    valid = pl.col("finish_reason") != "error"
    return index.group_by("problem_id", maintain_order=True).agg(
        pl.col("question").first(),
        (pl.col("correct") & valid).sum().alias("correct"),
        valid.sum().alias("valid"),
        pl.col("pass_rate").first(),
        (pl.col("correct") & valid).any().alias("solved"),
    )


def curate_page(artifact: Artifact) -> dict[str, Any]:
    """curate's (or stitch's) report: input, rows per drop reason with their share, kept, per source."""
    report = artifact.report
    if not report:
        raise QueryError(f"{artifact.label}: no report beside it (curate writes NAME.report.json)")
    dropped = {key.removeprefix("dropped_"): value for key, value in (report.get("dropped") or {}).items()}
    rows = report.get("input_rows", report.get("rows"))
    return {
        "input": rows,
        "kept": report.get("kept_rows", report.get("written")),
        "dropped": dropped,
        "per_source": report.get("per_source") or [],
        "rejects": artifact.links.get("rejects"),
        "config": report.get("config"),
        "empty": report.get("empty"),
    }


def train_page(artifact: Artifact) -> dict[str, Any]:
    """Every logged number against its step, one series per metric (training logs and evaluations)."""
    path = artifact.path / "metrics.jsonl"
    if not path.is_file():
        return {"series": {}, "stages": [key for role, key in artifact.links.items() if role.startswith("stage")]}
    series: dict[str, list[list[float]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise InputFileError(path, "not a JSON line (a killed run can leave one)", row=number) from None
            step = record.get("step")
            if not isinstance(step, (int, float)):
                continue
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    series.setdefault(key, []).append([step, value])
    trl = read_report(artifact.path / "trl_config.json") or {}
    return {"series": series, "settings": {k: trl.get(k) for k in ("learning_rate", "max_steps", "num_generations")}}


def notes(artifact: Artifact) -> list[str]:
    """A few lines on how an artifact was made, from its report or manifest."""
    report = artifact.report or {}
    lines: list[str] = []
    if artifact.kind == "pool" and report:
        band = (report.get("config") or {}).get("band")
        lines.append(
            f"{report.get('selected')} of {report.get('problems')} problems selected · student {report.get('student')} "
            f"· k {report.get('k')} · band {tuple(band) if band else '?'} (ends exclusive)"
        )
        lines += [f"warning: {warning}" for warning in report.get("warnings") or []]
    elif artifact.kind == "sft" and report:
        kept, given = report.get("kept_rows", report.get("written")), report.get("input_rows", report.get("rows"))
        lines.append(f"{kept} of {given} rows kept")
    elif artifact.kind == "run" and isinstance(report.get("settings"), dict):
        settings = report["settings"]
        shown = ("teacher", "model", "protocol", "samples", "temperature", "max_tool_calls", "max_new_tokens")
        lines.append(" · ".join(f"{key} {settings[key]}" for key in shown if settings.get(key) is not None))
    if artifact.kind == "run" and isinstance(report.get("sharded"), dict):
        sharded = report["sharded"]
        warning = "" if sharded.get("complete") else "warning: not complete, only what is on disk is shown: "
        lines.append(f"{warning}a sharded run of {sharded.get('summary')}")
    unshown = journal_note(artifact)
    if unshown:
        lines.append(f"warning: {unshown}")
    return lines
