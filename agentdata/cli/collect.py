"""`agentdata collect`: a teacher solves problems with the real code sandbox; every turn is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.agent.config import CollectConfig
from agentdata.cli.common import AnswerField, ProblemsFile, QuestionField, output_dir, read_problems, tracked
from agentdata.cli.console import print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.settings import Sections
from agentdata.training.config import TrackingConfig


@settings_command(sections=Sections(tracked("config", {"config": CollectConfig})))
def command(
    problems_file: ProblemsFile = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run dir; an existing one is resumed.")] = Path(
        "runs/collect"
    ),
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    config: CollectConfig,
    tracking: TrackingConfig,
    as_json: bool = False,
) -> None:
    """Run a teacher model against the code sandbox and record real trajectories."""
    from agentdata.agent.runner import collect
    from agentdata.cli.views import collect_views
    from agentdata.training.trackers import check_trackers, report_to_trackers

    check_trackers(tracking, "collect")
    output_dir(out, "--out", inputs=[problems_file])
    problems = read_problems(problems_file, question_field, answer_field)
    config = config.for_run()  # an unset protocol: the teacher's own, read from its dir
    part = f" · shard {config.sharding.shard} (its share of the problems)" if config.sharding.shard else ""
    # a harness's rows are native whatever --protocol says: its own tools and calls, as the model made them
    protocol = "native" if config.harness else config.loop.protocol
    how = f"protocol {protocol}" + (f" · harness {escape(config.harness)}" if config.harness else "")
    if not as_json:
        print_line(
            f"[bold]collect[/] {len(problems[: config.limit])} problems from {problems_file or 'built-in problems'} · "
            f"teacher {config.model} · {config.samples} sample(s) each · {how} · temperature "
            f"{config.loop.temperature}{part} → {out}"
        )
    summary = collect(problems, out, config)
    report_to_trackers(tracking, "collect", out, summary.as_dict(), [out])
    show(summary, as_json, collect_views)
