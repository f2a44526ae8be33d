"""`curate --reasoning keep|strip`: the model's thinking stays on assistant messages, or goes."""

from __future__ import annotations

import polars as pl
import pytest

from agentdata.curate import CurateConfig, curate
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run


def thinking_run(tmp_path):
    thoughtful = trajectory("a")
    thoughtful.messages[1]["reasoning_content"] = "Sum the first ten primes with the tool."
    return write_run(tmp_path / "run", [thoughtful])


@pytest.mark.parametrize("mode", ["keep", "strip"])
def test_reasoning_kept_or_stripped(tmp_path, mode):
    result = curate([thinking_run(tmp_path)], tmp_path / "sft.parquet", CurateConfig(reasoning=mode))
    messages = pl.read_parquet(result.output)["messages"][0].to_list()
    expected = "Sum the first ten primes with the tool." if mode == "keep" else None
    assert messages[1].get("reasoning_content") == expected  # strip: no such field at all
    assert messages[1]["tool_calls"] and messages[1]["content"] == "Step 0: compute."


def test_cli_reasoning_flag(tmp_path):
    run = thinking_run(tmp_path)
    code = run_cli(["curate", str(run), "--out", str(tmp_path / "sft.parquet"), "--reasoning", "strip"])
    assert code == 0
    assert pl.read_parquet(tmp_path / "sft.parquet")["messages"][0].to_list()[1].get("reasoning_content") is None
    bad = run_cli(["curate", str(run), "--out", str(tmp_path / "x.parquet"), "--reasoning", "drop"])
    assert bad == 2
