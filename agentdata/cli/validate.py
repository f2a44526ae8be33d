"""`agentdata validate PROBLEMS`: broken problems found before a model is paid to solve them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentdata.cli.common import AnswerField, QuestionField, output_file
from agentdata.cli.console import print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.outputs import check_outputs_apart, companion
from agentdata.validate.config import ValidateConfig

SUFFIXES = (".jsonl", ".json", ".parquet")


@settings_command()
def command(
    problems_file: Annotated[
        Path, typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir), any layout.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="The clean problems (default PROBLEMS.clean.jsonl; .jsonl, .json, .parquet)."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="The report (default beside --out: NAME.report.json).")
    ] = None,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    config: ValidateConfig,
    as_json: bool = False,
) -> None:
    """Find broken problems (unreadable gold, trivially matched gold, missing choices, code tests an empty
    program passes or the reference fails, duplicates, benchmark overlap); write a report and a clean file."""
    from agentdata.cli.views import validate_views
    from agentdata.validate import validate

    out = out or problems_file.with_name(f"{problems_file.stem}.clean.jsonl")
    inputs = [problems_file, *config.dedup.decontam_files]
    output_file(out, "--out", SUFFIXES, "the clean problems", inputs)
    if report is not None:
        output_file(report, "--report", (".json",), "the report", inputs)
    check_outputs_apart({"--out": out, "--report": report or companion(out, ".report.json")})
    if not as_json:
        print_line(f"[bold]validate[/] {problems_file} → {out}")
    show(validate(problems_file, out, config, question_field, answer_field, report_out=report), as_json, validate_views)
