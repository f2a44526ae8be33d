"""The SFT-set pipeline: trajectories from run dirs -> named filter steps -> `messages` + `tools` Parquet.

Passes 1 and 2 (curate/passes.py) read the run a piece at a time: the stored scalar columns and the
cheap rules, then the text features of the rows left (the messages are read, never kept) and the
steps that judge a row alone; the steps that compare rows then run once on every kept row. Pass 3
streams the shards again and writes only the kept rows (and, if asked, the rejects). Messages are
never all in memory, nor is any column of the rows dropped but what the report counts.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

from agentdata.agent.shard_files import ROW_ID, damaged_shard
from agentdata.agent.shard_status import incomplete_note
from agentdata.agent.tool_use import ToolUse
from agentdata.curate.config import CurateConfig
from agentdata.curate.passes import INPUT_COLUMNS, run_curate_steps
from agentdata.curate.provenance import kept_counts, source_runs
from agentdata.curate.redaction import find_secrets, redact_file, secret_counts
from agentdata.curate.shards import Shards
from agentdata.errors import OutputWriteError, UserError
from agentdata.formats.forms import form_metadata, target_form, target_suffix
from agentdata.formats.sft_set.writer import write_sft_form
from agentdata.outputs import companion
from agentdata.publish.card import write_card
from agentdata.publish.hub import check_hub, push_set
from agentdata.publish.layout import SetLayout, is_folder_out, remove_earlier_set, removed_note, set_layout
from agentdata.publish.provenance import as_metadata, provenance_record
from agentdata.publish.secrets import SecretScanner, write_shared_json
from agentdata.records import SFT_COLUMNS, UNCHANGED, atomic_write
from agentdata.steps import REASON_COLUMN, Step, StepResult
from agentdata.versions import stamped

# What the SFT set holds: `messages` and `tools` (canonical: as collect stored them; an export: in the form its
# reader takes, formats/forms.py), plus provenance.


@dataclass
class CurateResult:
    input_rows: int
    kept_rows: int
    counts: dict[str, int]
    output: Path | None  # None when no row was kept: nothing is written (see `empty`)
    rejects: Path | None
    report: Path
    per_source: list[dict]
    card: Path | None = None  # the dataset card (README.md in a folder, NAME.README.md beside a file)
    empty: str | None = None  # why no SFT set was written (the report and rejects still are)
    tool_use: dict = field(default_factory=dict)  # agent.tool_use numbers of the input and the kept rows
    scoring: dict = field(default_factory=dict)  # per scorer (prm, judge): scored, cached, retried, failed
    warnings: list[str] = field(default_factory=list)  # one line each: a sharded input run not complete
    secrets: dict = field(default_factory=dict)  # publish.secrets.SecretCounts of the kept rows, and the mode
    pushed: dict | None = None  # publish.hub.Pushed of --push-to-hub
    passes: list[str] = field(default_factory=list)  # the reads of the shards' data, by name (curate/shards.py)

    def as_dict(self) -> dict:
        return {
            "input_rows": self.input_rows,
            "kept_rows": self.kept_rows,
            "dropped": {f"dropped_{reason}": count for reason, count in self.counts.items()},
            "output": str(self.output) if self.output else None,
            "empty": self.empty,
            "rejects": str(self.rejects) if self.rejects else None,
            "report": str(self.report),
            "card": str(self.card) if self.card else None,
            "per_source": self.per_source,
            "tool_use": self.tool_use,
            "scoring": self.scoring,
            "warnings": self.warnings,
            "secrets": self.secrets,
            "pushed": self.pushed,
            "shard_passes": {"count": len(self.passes), "passes": self.passes},
        }


def curate(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    config: CurateConfig | None = None,
    rejects: str | os.PathLike | None = None,
    on_step: Callable[[Step, int], None] | None = None,
    command: list[str] | None = None,
) -> CurateResult:
    """Build an SFT set from run dirs; every dropped row has a reason in the counts (and `rejects`).

    `out` is a file (NAME.parquet, NAME.jsonl) or a dataset folder (publish/layout.py); the set is written
    with its card and, in Parquet, its provenance (`command`: the CLI's arguments, recorded to rebuild it)."""
    config = config or CurateConfig()
    out = Path(out)
    check_suffix(out, config.target)
    layout = set_layout(out, target_suffix(config.target))
    shards = Shards.of(run_dirs)
    warnings = [note for note in map(incomplete_note, run_dirs) if note]
    if config.publish.push_to_hub:  # before any work: a push that cannot happen is known now
        check_hub(config.publish.push_to_hub)
    try:
        input_rows, result, scorers = run_curate_steps(shards, config, on_step)
        result, flagged, secrets = _handle_secrets(shards, result, config.publish.secrets)
        scores = [column for scorer in scorers for column in scorer.columns]  # stored on the rows, kept or not
        output, empty, card = None, None, None
        if result.kept.height:
            kept = result.kept.select(ROW_ID, *scores)
            record = provenance_record(
                "curate",
                asdict(config),
                command,
                sources=source_runs(run_dirs, result.kept[ROW_ID], shards.rows),
                counts=kept_counts(result.kept),
                dropped={f"dropped_{reason}": count for reason, count in result.counts.items()},
                input_rows=input_rows,
                secrets=secrets,
            )
            redact = sorted(flagged) if config.publish.secrets == "redact" else []
            output = _write_sft_set(shards, kept, layout, config.target, config.reasoning == "strip", record, redact)
            card = write_card(layout, "sft", result.kept.height, record, config.publish.license)
        else:
            empty = (
                f"{out}: the SFT set is empty (none of {input_rows} trajectories kept), so nothing was written: "
                + empty_advice(result.counts)
            )
            empty += removed_note(remove_earlier_set(layout))
        rejects_path = None
        if rejects is not None:
            reasons = result.rejected.select(
                ROW_ID, REASON_COLUMN, *(c for c in scores if c in result.rejected.columns)
            )
            rejects_path = _write_rows(shards, reasons, Path(rejects), None, name="rejects")
    except pl.exceptions.PolarsError as error:  # a shard whose schema reads but whose data does not
        raise damaged_shard(shards.paths, error) from None
    every_row = pl.concat([result.kept.select(INPUT_COLUMNS), result.rejected.select(INPUT_COLUMNS)])
    curated = CurateResult(
        input_rows,
        result.kept.height,
        result.counts,
        output,
        rejects_path,
        report_path(out),
        source_counts(every_row, result.kept),
        card,
        empty,
        tool_use_report(every_row, result.kept),
        {scorer.reason.removesuffix("_low"): scorer.counts.as_dict() for scorer in scorers},
        warnings,
        secrets,
        passes=shards.passes,
    )
    if output is not None and config.publish.push_to_hub:
        curated.pushed = push_set(layout, config.publish.push_to_hub, not config.publish.public).as_dict()
    _write_report(curated, config, shards.paths)
    return curated


# What keeps the rows a reason dropped: the setting that applies, or why none does.
ADVICE = {
    "incorrect": "--keep-incorrect keeps wrong answers",
    "no_tool_call": "--tool-calls 0,MAX keeps trajectories without a call",
    "too_many_tool_calls": "--tool-calls MIN,MAX with a larger MAX keeps more calls",
    "malformed_tool_call": "a call named a tool its trajectory does not declare in `tools`, or its arguments were "
    "not a JSON object (a code call's without `code`): no setting trains on such calls",
    "no_answer": "a trajectory without a final answer is never kept",
    "tool_error_ratio": "max_tool_error_ratio= allows more failing calls",
    "too_long": "max_tokens= allows longer trajectories",
    "max_per_problem": "--max-per-problem 0 lifts the cap per problem",
    "source_share": "balance_sources= allows a larger share per source",
}


def empty_advice(dropped: Counter | dict[str, int]) -> str:
    """Why nothing was kept, by drop reason (the largest first), each with the setting that would keep them."""
    reasons = sorted(((count, reason) for reason, count in dropped.items() if count), reverse=True)
    said = "dropped " + ", ".join(f"{reason} {count}" for count, reason in reasons) if reasons else "no rows"
    advice = [f"{reason}: {ADVICE[reason]}" for _, reason in reasons if reason in ADVICE]
    return "; ".join([said, *advice]) if advice else f"{said}; see the drop reasons in the report"


def check_suffix(out: Path, target: str) -> None:
    if is_folder_out(out):  # a dataset folder holds either form
        return
    jsonl = out.suffix in (".jsonl", ".json")
    if (target_form(target) == "openai") != jsonl:
        wanted = "JSONL (--out NAME.jsonl)" if target == "openai" else "Parquet (--out NAME.parquet)"
        raise UserError(f"{out}: --for {target} writes {wanted}")


def _write_sft_set(
    shards: Shards,
    rows: pl.DataFrame,
    layout: SetLayout,
    target: str,
    strip_reasoning: bool,
    provenance: dict,
    redact: Sequence[int] = (),
) -> Path:
    """The kept rows (the `redact` rows' secrets redacted) to the layout's data file, with the provenance and
    the form as its metadata. The canonical form goes straight from the shards to the file; rows to redact, or
    an export, go through a canonical staging file beside it first, so `out` never holds a secret, not even
    for a moment, and an export is converted from it by the export's writer."""
    out = layout.data
    canonical = target_form(target) == "canonical"
    staging = out.with_name(f".{out.name}.canonical.parquet")
    written = out if canonical and not redact else staging
    metadata = as_metadata(provenance) | form_metadata("canonical")
    try:
        try:
            _write_rows(shards, rows, written, SFT_COLUMNS, strip_reasoning, metadata)
        except OutputWriteError as error:  # the user knows `out`, not the staging file beside it
            raise OutputWriteError(layout.out, error.errno, UNCHANGED) from None
        if redact:  # the file holds the rows in row-number order
            wanted = set(redact)
            positions = {index for index, row in enumerate(rows[ROW_ID].sort()) if row in wanted}
            redact_file(written, positions, SecretScanner())
        if not canonical:
            return write_sft_form(written, out, target, as_metadata(provenance))
        return written.replace(out)
    finally:
        staging.unlink(missing_ok=True)


def _handle_secrets(shards: Shards, result: StepResult, mode: str) -> tuple[StepResult, dict[int, Counter], dict]:
    """Scan the kept rows for secrets; `drop` moves the rows holding one to the rejects (reason `secret`),
    `redact` returns them to be redacted as they are written, `keep` scans nothing."""
    if mode == "keep" or not result.kept.height:
        return result, {}, {"mode": mode}
    flagged = find_secrets(shards, result.kept[ROW_ID], SecretScanner())
    counts = {"mode": mode, **secret_counts(flagged).as_dict()}
    if mode != "drop" or not flagged:
        return result, flagged, counts
    holds = pl.col(ROW_ID).is_in(pl.Series(sorted(flagged), dtype=result.kept[ROW_ID].dtype).implode())
    dropped = result.kept.filter(holds).with_columns(pl.lit("secret").alias(REASON_COLUMN))
    kept = result.kept.filter(~holds)
    rejected = pl.concat([result.rejected, dropped], how="diagonal_relaxed")
    return StepResult(kept, rejected, {**result.counts, "secret": len(flagged)}), {}, counts


def tool_use_report(table: pl.DataFrame, kept: pl.DataFrame) -> dict:
    """Tool-use efficiency (agent.tool_use) of all input rows and of the kept ones, and of the input per source
    and per domain."""
    sums = [
        pl.len().alias("trajectories"),
        pl.col("correct").fill_null(False).sum().alias("correct"),
        pl.col("num_tool_calls").sum().alias("tool_calls"),
        pl.col("num_tool_errors").sum().alias("tool_errors"),
    ]

    def per(by: str) -> list[dict]:
        groups = table.group_by(by).agg(sums).sort(by).to_dicts()
        return [{by: group.pop(by), **ToolUse(**group).as_dict()} for group in groups]

    return {
        "input": ToolUse(**table.select(sums).row(0, named=True)).as_dict(),
        "kept": ToolUse(**kept.select(sums).row(0, named=True)).as_dict(),
        "by_source": per("source"),
        "by_domain": per("domain"),
    }


def source_counts(table: pl.DataFrame, kept: pl.DataFrame) -> list[dict]:
    before = table.group_by("source").agg(pl.len().alias("input"), pl.col("problem_id").n_unique().alias("problems"))
    after = kept.group_by("source").agg(pl.len().alias("kept"), pl.col("problem_id").n_unique().alias("kept_problems"))
    joined = before.join(after, on="source", how="left").fill_null(0).sort("source")
    return joined.to_dicts()


def _write_rows(
    shards: Shards,
    rows: pl.DataFrame,
    target: Path,
    columns: Sequence[str] | None,
    strip_reasoning: bool = False,
    metadata: dict[str, str] | None = None,
    name: str = "write",
) -> Path:
    """Stream the shards (the pass `name`), keep `rows` (by global row number, in input order) with their own
    columns (a drop reason, scores) after `columns` (default: all of the trajectory's), write atomically with
    `metadata`."""
    selected = shards.scan(name).join(rows.lazy(), on=ROW_ID, how="inner", maintain_order="left")
    extra = [column for column in rows.columns if column != ROW_ID]
    selected = selected.select(*columns, *extra) if columns else selected.drop(ROW_ID)
    if strip_reasoning:  # a null field is an absent one to every reader (our records, chat templates)
        no_reasoning = pl.element().struct.with_fields(pl.lit(None, dtype=pl.String).alias("reasoning_content"))
        selected = selected.with_columns(pl.col("messages").list.eval(no_reasoning))
    return atomic_write(target, lambda tmp: selected.sink_parquet(tmp, engine="streaming", metadata=metadata))


def _write_report(result: CurateResult, config: CurateConfig, paths: Sequence[Path]) -> Path:
    report = {**result.as_dict(), "config": asdict(config), "shards": [str(path) for path in paths]}
    del report["report"]
    return write_shared_json(result.report, stamped(report))


def report_path(out: Path) -> Path:
    return companion(out, ".report.json")
