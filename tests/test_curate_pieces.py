"""curate piece by piece (curate/passes.py) gives what one whole-run table gives: the same rows kept in the same
order, the same rejects with the same reasons, the same counts and the same SFT set, with duplicates, near-copies
and per-problem caps whose rows fall in different pieces."""

from __future__ import annotations

import random
from functools import partial

import polars as pl
import pytest

import agentdata.curate.passes as passes
from agentdata.curate import CurateConfig, curate
from agentdata.curate.passes import run_curate_steps, split_row_local
from agentdata.curate.shards import Shards
from agentdata.curate.steps import curate_steps
from agentdata.settings import build
from agentdata.steps import REASON_COLUMN
from tests.curate_fixtures import trajectory, write_run

QUESTIONS = [
    "A farmer has a rectangular field whose length is three times its width and whose perimeter is 200 m.",
    "What is the sum of the first ten prime numbers, counting two as the first of them?",
    "How many ways can five distinct books be arranged on a shelf with two of them kept together?",
    "Find the area of a triangle whose sides measure 3, 4 and 5 units, in square units.",
]


def varied_run(folder, count: int = 90) -> list:
    """Trajectories that every step has something to do with, their problems spread over the whole run: wrong and
    unanswered ones, bad calls, too many calls, exact duplicates (the same problem and code) and problems whose
    question is a near copy of another's (one word changed), each first seen far from its copies."""
    rng = random.Random(7)
    rows = []
    for index in range(count):
        problem = rng.randrange(count // 3)
        question = QUESTIONS[problem % len(QUESTIONS)] + f" Case {problem}."
        if problem % 5 == 0:  # a near copy of problem 0's question
            question = QUESTIONS[0].replace("farmer", "grower") + " Case 0."
        code = [f"print({problem} + {rng.randrange(3)})"] * rng.choice((1, 1, 2, 9))
        rows.append(
            trajectory(
                f"t{index}",
                problem_id=f"p{problem}",
                question=question,
                code=code,
                correct=rng.random() < 0.85,
                final_answer=None if rng.random() < 0.05 else "129",
                bad_arguments=rng.random() < 0.05,
                source=f"src{problem % 3}",
                tokens=rng.choice((100, 200, 40_000)),
            )
        )
    return write_run(folder, rows, per_shard=7)


def paths_of(run) -> Shards:
    return Shards.of(sorted((run / "trajectories").glob("*.parquet")))


@pytest.mark.parametrize(
    "settings",
    [{}, {"max_per_problem": 1, "near_dup_threshold": 0.7}, {"balance_sources": 0.4, "near_dup_field": "solution"}],
)
@pytest.mark.parametrize("piece_rows", [1, 10, 16])
def test_pieces_give_what_the_whole_table_gives(tmp_path, settings, piece_rows):
    paths = paths_of(varied_run(tmp_path / "run"))
    config = build(CurateConfig, settings)
    seen: dict[str, list] = {"whole": [], "pieces": []}
    rows, whole, _ = run_curate_steps(paths, config, lambda s, n: seen["whole"].append((s.reason, n)), None)
    rows_too, pieces, _ = run_curate_steps(paths, config, lambda s, n: seen["pieces"].append((s.reason, n)), piece_rows)
    assert rows == rows_too == 90
    assert whole.kept.equals(pieces.kept)  # the same rows, columns and order
    assert 0 < whole.kept.height < 90
    by_row = [result.rejected.sort(passes.ROW_ID) for result in (whole, pieces)]
    assert by_row[0].equals(by_row[1])
    assert whole.counts == pieces.counts and len(whole.counts) >= 4
    assert seen["whole"] == seen["pieces"]  # the rows left after each step, as the CLI prints them


def test_the_whole_curate_writes_the_same_files_piece_by_piece(tmp_path, monkeypatch):
    run = varied_run(tmp_path / "run")
    outputs = {}
    for name, piece_rows in (("whole", None), ("pieces", 8)):
        monkeypatch.setattr("agentdata.curate.sft.run_curate_steps", partial(run_curate_steps, piece_rows=piece_rows))
        result = curate([run], tmp_path / f"{name}.parquet", rejects=tmp_path / f"{name}-rejects.parquet")
        outputs[name] = result
    whole, pieces = outputs["whole"], outputs["pieces"]
    assert pl.read_parquet(whole.output).equals(pl.read_parquet(pieces.output))
    assert pl.read_parquet(whole.rejects).equals(pl.read_parquet(pieces.rejects))
    assert whole.counts == pieces.counts and whole.per_source == pieces.per_source
    assert whole.tool_use == pieces.tool_use


def test_only_the_leading_row_local_steps_run_piece_by_piece():
    _, feature_steps = curate_steps(CurateConfig(max_per_problem=2))
    local, whole_run = split_row_local(feature_steps)
    assert [step.reason for step in local] == ["no_model_turn", "malformed_tool_call", "health"]
    assert [step.reason for step in whole_run] == ["duplicate", "near_duplicate", "max_per_problem"]
    scalar_steps, _ = curate_steps(CurateConfig())
    assert all(step.row_local for step in scalar_steps)


def test_rejects_keep_only_what_is_read_back(tmp_path):
    paths = paths_of(varied_run(tmp_path / "run"))
    _, result, _ = run_curate_steps(paths, CurateConfig(), piece_rows=10)
    assert result.rejected.columns == [passes.ROW_ID, REASON_COLUMN, *passes.INPUT_COLUMNS]
    assert "messages" not in result.kept.columns and "question" in result.kept.columns
