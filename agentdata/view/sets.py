"""The other tables the viewer lists: SFT sets (curate, stitch), RL pools (filter) and problem files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.errors import InputFileError
from agentdata.formats.forms import file_form
from agentdata.inputs import read_nonempty_rows
from agentdata.problems import load_problems
from agentdata.view.table import ROW, Column, RowTable, contains, preview

SFT_COLUMNS = (
    Column("problem_id", "text", "problem"),
    Column("question", "text"),
    Column("correct", "bool"),
    Column("source", "category"),
    Column("teacher", "category"),
    Column("format", "category", "protocol"),
    Column("num_tool_calls", "number", "tool calls"),
    Column("messages_count", "number", "messages"),
)
POOL_COLUMNS = (
    Column("problem_id", "text", "problem"),
    Column("question", "text"),
    Column("status", "category"),
    Column("source", "category"),
    Column("domain", "category"),
    Column("pass_rate", "number", "pass rate"),
    Column("pass_rate_low", "number", "interval low"),
    Column("pass_rate_high", "number", "interval high"),
    Column("n_rollouts", "number", "rollouts"),
)
PROBLEM_COLUMNS = (
    Column("id", "text"),
    Column("question", "text"),
    Column("answer", "text"),
    Column("source", "category"),
    Column("domain", "category"),
)
IN_POOL = "in pool"


# --------------------------------------------------------------------------- SFT sets


def sft_table(path: Path) -> RowTable:
    """An SFT set in any form curate writes (Parquet canonical or hf/trl/verl, JSONL openai), listed by conversation."""
    if path.suffix.lower() == ".parquet":
        scan = pl.scan_parquet(path).with_row_index(ROW)
        names = scan.collect_schema().names()
        if "messages" not in names:
            raise InputFileError(path, f"not an SFT set: no `messages` column (columns: {', '.join(names)})")
        first_user = pl.col("messages").list.eval(
            pl.element().filter(pl.element().struct.field("role") == "user").struct.field("content")
        )
        wanted = [
            name for name in ("problem_id", "correct", "source", "teacher", "format", "num_tool_calls") if name in names
        ]
        index = _collect(
            path,
            scan.select(
                ROW,
                *wanted,
                preview(first_user.list.first()).alias("question"),
                pl.col("messages").list.len().alias("messages_count"),
            ),
        )

        def search(needle: str) -> pl.Series:
            content = pl.col("messages").list.eval(contains(pl.element().struct.field("content"), needle)).list.any()
            return _collect(path, scan.filter(content.fill_null(False)).select(ROW))[ROW]

        def fetch(row: int) -> dict[str, Any]:
            values = _collect(path, scan.slice(row, 1)).row(0, named=True)
            return {"sft_row": sft_record(path, row, values)}

        return RowTable(index, SFT_COLUMNS, search, fetch)
    rows = read_nonempty_rows(path)
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("messages"), list):
            raise InputFileError(path, "not an SFT set: no `messages` list", row=number)
    index = pl.DataFrame(
        {
            ROW: list(range(len(rows))),
            "question": [_first_user(row["messages"])[:160] for row in rows],
            "messages_count": [len(row["messages"]) for row in rows],
            **{
                name: [row.get(name) for row in rows]
                for name in ("problem_id", "source", "teacher", "format", "num_tool_calls")
                if any(name in row for row in rows)
            },
        },
        strict=False,
    )

    def search_rows(needle: str) -> pl.Series:
        lowered = needle.lower()
        found = [number for number, row in enumerate(rows) if lowered in json.dumps(row["messages"]).lower()]
        return pl.Series(ROW, found, dtype=pl.UInt32)

    return RowTable(index, SFT_COLUMNS, search_rows, lambda row: {"sft_row": sft_record(path, row, rows[row])})


def sft_record(path: Path, row: int, values: dict[str, Any]) -> dict[str, Any]:
    """An SFT row in canonical form (what the conversation view and the SFT mask read): a canonical set's as
    it is, an export's converted back, as SFT reads them (sft.data.canonical_row)."""
    from agentdata.sft.data import canonical_row

    canonical = canonical_row(values, file_form(path), None, path, row + 1)
    return {**{key: value for key, value in values.items() if key not in ("messages", "tools", ROW)}, **canonical}


def _first_user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if isinstance(m, dict) and m.get("role") == "user"), "")


# --------------------------------------------------------------------------- RL pools


def pool_frame(path: Path, rejects: Path | None, questions: pl.DataFrame | None) -> pl.DataFrame:
    """Every profiled problem: the pool's (status "in pool") and the rejects' (status = the drop reason)."""
    pool = _collect(path, pl.scan_parquet(path))
    if "extra_info" in pool.columns:  # the verl form
        pool = pool.select(pl.col("extra_info").struct.unnest(), pl.col("data_source").alias("source"), "ability")
        pool = pool.rename({"ability": "domain"})
    missing = [name for name in ("problem_id", "pass_rate") if name not in pool.columns]
    if missing:
        raise InputFileError(path, f"not an RL pool: no {' or '.join(missing)} column")
    if "question" not in pool.columns:  # the agentdata form holds it as the prompt's last message
        question = pl.col("prompt").list.last().struct.field("content") if "prompt" in pool.columns else pl.lit(None)
        pool = pool.with_columns(question.cast(pl.String).alias("question"))
    # a pool's rejects file opened on its own lists the problems left out, each with its reason
    status = pl.col("drop_reason") if "drop_reason" in pool.columns else pl.lit(IN_POOL)
    pool = pool.with_columns(status.alias("status")).drop("prompt", strict=False)
    frames = [pool]
    if rejects is not None and rejects.is_file():  # the problems left out hold no question: the profile's
        left_out = _collect(rejects, pl.scan_parquet(rejects)).with_columns(pl.col("drop_reason").alias("status"))
        frames.append(left_out)
    frame = pl.concat(frames, how="diagonal_relaxed")
    if questions is not None and questions.height:
        known = questions.unique("problem_id", keep="first").rename({"question": "profiled"})
        frame = frame.join(known, on="problem_id", how="left", maintain_order="left")
        frame = frame.with_columns(pl.coalesce("question", "profiled").alias("question")).drop("profiled")
    return frame.with_row_index(ROW)


def pool_table(path: Path, rejects: Path | None, questions: pl.DataFrame | None) -> RowTable:
    frame = pool_frame(path, rejects, questions)
    full_questions = frame.select(ROW, "question") if "question" in frame.columns else None
    index = frame.with_columns(preview(pl.col("question"))) if "question" in frame.columns else frame

    def search(needle: str) -> pl.Series:
        if full_questions is None:
            return pl.Series(ROW, [], dtype=pl.UInt32)
        return full_questions.filter(contains(pl.col("question"), needle))[ROW]

    def fetch(row: int) -> dict[str, Any]:
        return {"problem": frame.row(row, named=True)}

    return RowTable(index, POOL_COLUMNS, search, fetch)


# --------------------------------------------------------------------------- problem files


def problems_table(path: Path) -> RowTable:
    problems = load_problems(path, require_answer=False)
    full = pl.DataFrame(
        {
            ROW: list(range(len(problems))),
            "id": [p.id for p in problems],
            "question": [p.question for p in problems],
            "answer": [p.answer for p in problems],
            "source": [p.source for p in problems],
            "domain": [p.domain for p in problems],
        },
        schema={
            ROW: pl.UInt32,
            "id": pl.String,
            "question": pl.String,
            "answer": pl.String,
            "source": pl.String,
            "domain": pl.String,
        },
    )
    index = full.with_columns(preview(pl.col("question")), preview(pl.col("answer")))

    def search(needle: str) -> pl.Series:
        return full.filter(contains(pl.col("question"), needle) | contains(pl.col("answer"), needle))[ROW]

    def fetch(row: int) -> dict[str, Any]:
        problem = problems[row]
        return {
            "problem": {
                "problem_id": problem.id,
                "question": problem.question,
                "answer": problem.answer,
                "source": problem.source,
                "domain": problem.domain,
                "metadata": problem.metadata,
            }
        }

    return RowTable(index, PROBLEM_COLUMNS, search, fetch)


def _collect(path: Path, frame: pl.LazyFrame) -> pl.DataFrame:
    try:
        return frame.collect()
    except (pl.exceptions.PolarsError, OSError) as error:
        raise InputFileError(path, f"cannot be read ({' '.join(str(error).split())[:200]})") from None
