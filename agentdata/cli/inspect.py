"""`agentdata inspect FILE`: pretty-print problems, trajectories, a collect run dir, or an SFT set or pool
(with the provenance its Parquet metadata records)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from agentdata.agent.inspection import Inspection, inspect_path
from agentdata.cli import render
from agentdata.cli.common import AnswerField, QuestionField
from agentdata.cli.options import settings_command
from agentdata.cli.views import inspect_views
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
        inspection = Inspection(path, "sft set", [], rows=_rows(path), provenance=provenance)
    else:
        inspection = replace(inspect_path(data_file(path), question_field, answer_field), provenance=provenance)
    render.show(inspection, as_json, lambda inspection: inspect_views(inspection, show))


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(data_file(path)).metadata.num_rows
