"""`agentdata inspect FILE`: pretty-print problems, trajectories, a collect run dir, or an SFT set or pool
(with the provenance its Parquet metadata records)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from agentdata.agent.inspection import journal_only, load_for_inspection
from agentdata.agent.journal import JOURNAL_NAME
from agentdata.agent.shard_status import read_sharded
from agentdata.cli.common import AnswerField, QuestionField
from agentdata.cli.console import console, print_json
from agentdata.cli.options import settings_command
from agentdata.cli.views import conversation, problems_summary, problems_table, trajectories_stats, trajectories_summary
from agentdata.publish.layout import data_file
from agentdata.publish.provenance import read_provenance


@settings_command()
def command(
    path: Annotated[
        Path, typer.Argument(help="A problem file, a trajectory file, a collect run dir, an SFT set or an RL pool.")
    ],
    show: Annotated[int, typer.Option("--show", "-n", help="How many records to print in full.")] = 3,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    as_json: bool = False,
) -> None:
    """Pretty-print problems or trajectories, with a summary table; a set's provenance."""
    provenance = read_provenance(path)
    if provenance is not None and provenance.get("stage") == "curate":  # an SFT set: no trajectory ids
        _show_sft_set(path, provenance, as_json)
        return
    kind, records = load_for_inspection(data_file(path), question_field, answer_field)
    journaled = len(journal_only(path)) if kind == "trajectories" else 0
    sharded = read_sharded(path) if kind == "trajectories" and path.is_dir() else None
    if as_json:
        if kind == "trajectories":
            shards = {"sharded": sharded.as_dict()} if sharded else {}
            print_json(
                {"path": str(path), "kind": kind, **trajectories_stats(records), "only_in_journal": journaled, **shards}
            )
        else:
            print_json(
                {
                    "path": str(path),
                    "kind": kind,
                    "problems": len(records),
                    "sources": dict(Counter(p.source for p in records).most_common()),
                    **({"provenance": provenance} if provenance else {}),
                }
            )
        return
    if kind == "trajectories":
        for trajectory in records[:show]:
            console.print(conversation(trajectory))
        console.print(trajectories_summary(records, title=f"{path}"))
        if journaled:
            journal = f"{path / JOURNAL_NAME}" if not sharded else f"the journals of {path} (a journal per shard)"
            console.print(
                f"{journaled} of them are only in {journal}: the run was stopped before they reached "
                "a shard; running the same command again keeps them and does the rest"
            )
        if sharded:
            colour = "green" if sharded.complete else "yellow"
            console.print(f"[{colour}]a sharded run of {escape(sharded.line())}[/]", highlight=False)
    else:
        console.print(problems_table(records, limit=show))
        console.print(problems_summary(records))
    if provenance:
        console.print(provenance_table(provenance))


def _show_sft_set(path: Path, provenance: dict[str, Any], as_json: bool) -> None:
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(data_file(path)).metadata.num_rows
    if as_json:
        print_json({"path": str(path), "kind": "sft set", "rows": rows, "provenance": provenance})
        return
    console.print(f"[bold]{path}[/]: an SFT set of {rows:,} rows")
    console.print(provenance_table(provenance))


def provenance_table(provenance: dict[str, Any]) -> Table:
    """How a set was made, from its Parquet metadata (publish/provenance.py)."""
    table = Table(title="provenance", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("made by", f"agentdata {provenance.get('stage')} (settings {provenance.get('settings_digest')})")
    table.add_row("rebuild", f"{provenance.get('command') or 'made from Python'} (in {provenance.get('cwd')})")
    for source in provenance.get("sources", []):
        table.add_row(
            "source",
            f"{source.get('path')}: teacher {source.get('teacher')}, protocol {source.get('protocol')}, "
            f"settings {source.get('settings_digest')}, {source.get('kept')} of {source.get('rows')} rows kept",
        )
    for key, counts in provenance.get("counts", {}).items():
        table.add_row(key.replace("_", " "), ", ".join(f"{name}: {count}" for name, count in counts.items()))
    dropped = {reason: count for reason, count in provenance.get("dropped", {}).items() if count}
    if dropped:
        table.add_row("dropped", ", ".join(f"{reason}: {count}" for reason, count in dropped.items()))
    if provenance.get("band"):
        table.add_row("band", str(provenance["band"]))
    versions = provenance.get("versions", {})
    table.add_row("versions", ", ".join(f"{name} {version}" for name, version in versions.items()))
    return table
