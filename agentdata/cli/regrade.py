"""`agentdata regrade RUN --problems FIXED.jsonl --out NEW`: stored trajectories graded again, nothing generated."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentdata.cli.common import AnswerField, QuestionField, output_dir
from agentdata.cli.console import print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.regrade.config import RegradeConfig


@settings_command()
def command(
    run: Annotated[Path, typer.Argument(help="A collect run dir (or a trajectory Parquet file) to grade again.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The regraded run dir, a new folder (default RUN-regraded).")
    ] = None,
    problems_file: Annotated[
        Path | None,
        typer.Option(
            "--problems",
            help="Problems whose gold answers (or code tests) to grade against, any layout; matched by id, else "
            "by question. Default: each trajectory's stored gold, graded by today's verifier.",
        ),
    ] = None,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    config: RegradeConfig,
    as_json: bool = False,
) -> None:
    """Grade stored trajectories again against the current gold answers and verifier; report what flipped."""
    from agentdata.cli.views import regrade_views
    from agentdata.problems import load_problems
    from agentdata.regrade import regrade

    out = out or run.with_name(f"{run.stem}-regraded")
    output_dir(out, "--out", [run, problems_file])
    problems = load_problems(problems_file, question_field, answer_field) if problems_file else None
    if not as_json:
        against = f"the gold of {problems_file}" if problems_file else "the stored gold"
        print_line(f"[bold]regrade[/] {run} against {against} → {out}")
    show(regrade(run, out, problems, config), as_json, regrade_views)
