"""`agentdata inspect FILE`: pretty-print problems, trajectories or a collect run dir."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.agent.inspection import journal_only, load_for_inspection
from agentdata.agent.journal import JOURNAL_NAME
from agentdata.agent.shard_status import read_sharded
from agentdata.cli.common import AnswerField, QuestionField, console, print_json
from agentdata.cli.options import settings_command
from agentdata.cli.views import conversation, problems_summary, problems_table, trajectories_stats, trajectories_summary


@settings_command()
def command(
    path: Annotated[Path, typer.Argument(help="A problem file, a trajectory file, or a collect run dir.")],
    show: Annotated[int, typer.Option("--show", "-n", help="How many records to print in full.")] = 3,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    as_json: bool = False,
) -> None:
    """Pretty-print problems or trajectories, with a summary table."""
    kind, records = load_for_inspection(path, question_field, answer_field)
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
