"""One canonical form from collect to train (issue 42): curate writes it by default and says so in the file,
agentdata's SFT stage reads it as it is, an export or an unmarked set still goes through the conversion,
`train` reads the set once, and curate reads each shard once per pass and reports its passes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata.curate import CurateConfig, curate
from agentdata.formats.forms import file_form
from agentdata.records import ToolCall, Trajectory, assistant_message, strip_none, tool_message
from agentdata.sft.sft_set import read_sft_set
from agentdata.steps.config import DedupConfig
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

ROOT = Path(__file__).resolve().parent.parent


def crafted(id: str, format: str) -> Trajectory:
    row = trajectory(id, problem_id=f"p-{id}", question=f"What is 6 * 7, asked {id} ({format})?")
    row.messages = [
        {"role": "system", "content": f"Solve it in {format}."},
        {"role": "user", "content": row.question},
        assistant_message("Let me compute it.", [ToolCall('print("6 * 7 =", 6 * 7)', id="call_0")]),
        tool_message("call_0", "6 * 7 = 42"),
        assistant_message("So \\boxed{42}."),
    ]
    row.format = format
    return row


ROWS = [crafted("a", "hermes"), crafted("b", "codeblock")]
SETTINGS = {"dedup": DedupConfig(near_dup_threshold=None), "max_per_problem": None}


def curated(tmp_path: Path, name: str = "sft.parquet", **settings) -> Path:
    run = tmp_path / "run" if (tmp_path / "run").is_dir() else write_run(tmp_path / "run", ROWS)
    return curate([run], tmp_path / name, CurateConfig(**SETTINGS, **settings)).output


def without_conversion(monkeypatch) -> None:
    def refuse(*args):
        raise AssertionError("a canonical set was converted")

    monkeypatch.setattr("agentdata.sft.data.canonical_messages", refuse)


def test_curate_writes_the_canonical_form_and_sft_reads_it_without_conversion(tmp_path, monkeypatch):
    output = curated(tmp_path)
    assert file_form(output) == "canonical"
    table = pq.read_table(output)
    assert [strip_none(m) for m in table["messages"].to_pylist()] == [row.messages for row in ROWS]  # as collected
    without_conversion(monkeypatch)
    sft_set = read_sft_set(output)
    assert sft_set.form == "canonical"
    assert [row["messages"] for row in sft_set.rows] == [row.messages for row in ROWS]
    assert [row["format"] for row in sft_set.rows] == ["hermes", "codeblock"]


@pytest.mark.parametrize("target, name", [("trl", "sft.parquet"), ("verl", "sft.parquet"), ("openai", "sft.jsonl")])
def test_an_export_round_trips_to_the_canonical_rows(tmp_path, target, name):
    canonical = read_sft_set(curated(tmp_path, "canonical.parquet")).rows
    export = curated(tmp_path, name, target=target)
    assert file_form(export) == ("hf" if target != "openai" else None)  # JSONL holds no metadata: read as an export
    back = read_sft_set(export).rows
    if target == "openai":  # OpenAI's form keeps no `name` on a tool message, and no `format` column
        for message in (m for row in [*canonical, *back] for m in row["messages"] if m["role"] == "tool"):
            message.pop("name", None)
    assert [row["messages"] for row in back] == [row["messages"] for row in canonical]
    if target != "openai":
        assert [row["format"] for row in back] == [row["format"] for row in canonical]
    # a tool-calling row keeps its tool schemas; a codeblock row's export lists none (formats/forms.py)
    assert back[0]["tools"] == canonical[0]["tools"]


def test_a_set_that_records_no_form_is_read_through_the_conversion(tmp_path, monkeypatch):
    """An export written before the form was recorded (or by another tool) is converted, as it always was."""
    export = curated(tmp_path, "trl.parquet", target="trl")
    older = tmp_path / "older.parquet"
    pq.write_table(pq.read_table(export).replace_schema_metadata(None), older)
    assert file_form(older) is None
    converted = []
    original = __import__("agentdata.sft.data", fromlist=["canonical_messages"]).canonical_messages
    monkeypatch.setattr("agentdata.sft.data.canonical_messages", lambda *args: converted.append(1) or original(*args))
    canonical = read_sft_set(curated(tmp_path, "canonical.parquet")).rows
    assert [row["messages"] for row in read_sft_set(older).rows] == [row["messages"] for row in canonical]
    assert len(converted) == 2  # each row, once


def test_a_canonical_set_in_a_dataset_folder_is_read_as_canonical(tmp_path, monkeypatch):
    folder = curated(tmp_path, "sft").parent.parent  # OUT/data/train.parquet
    without_conversion(monkeypatch)
    assert read_sft_set(folder).form == "canonical" and len(read_sft_set(folder).rows) == 2


def test_train_reads_the_set_once(tmp_path, tiny_model_dir, monkeypatch):
    import agentdata.sft.sft_set as sft_set

    output = curated(tmp_path)
    reads = []
    original = sft_set._canonical_rows
    monkeypatch.setattr(sft_set, "_canonical_rows", lambda *args: reads.append(args) or original(*args))
    config = tmp_path / "train.yaml"
    config.write_text("sft:\n  batch_size: 2\n  max_length: 512\n  max_steps: 1\n")
    args = ["train", "--stage", "sft", "--model", f"hf:{tiny_model_dir}", "--sft-data", str(output)]
    assert run_cli([*args, "--config", str(config), "--out", str(tmp_path / "out")]) == 0
    assert len(reads) == 1  # the plan's read, handed to the trainer
    assert (tmp_path / "out" / "config.json").is_file()


def test_curate_reports_its_passes_over_the_shards(tmp_path):
    write_run(tmp_path / "run", ROWS)
    result = curate(
        [tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(**SETTINGS), rejects=tmp_path / "r.parquet"
    )
    # health: these rows were collected without their health measures, so they are measured from their messages;
    # ids: a row that a later row of its id replaced is read once (test_shards: merged parts)
    assert result.passes == ["scalars", "ids", "features", "health", "secrets", "write", "rejects"]
    report = json.loads(result.report.read_text())
    assert report["shard_passes"] == {"count": 7, "passes": result.passes}


@pytest.mark.skipif(not shutil.which("strace"), reason="counts the opens with strace")
def test_curate_opens_each_shard_once_per_pass(tmp_path):
    run = write_run(tmp_path / "run", [crafted(f"r{i}", "hermes") for i in range(12)])
    trace = tmp_path / "trace.txt"
    curate_cli = "from agentdata.cli.app import main; main()"
    command = [sys.executable, "-c", curate_cli, "curate", str(run), "--out", str(tmp_path / "sft.parquet")]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    traced = subprocess.run(
        ["strace", "-f", "-e", "trace=openat", "-o", str(trace), *command], env=environment, capture_output=True
    )
    if traced.returncode and "ptrace" in traced.stderr.decode(errors="replace"):
        pytest.skip("ptrace is not permitted here")
    assert traced.returncode == 0, traced.stderr.decode()[-2000:]
    passes = json.loads((tmp_path / "sft.report.json").read_text())["shard_passes"]["count"]
    opened = re.findall(r'openat\([^"]*"([^"]+part-\d+\.parquet)", [^)]*\) = \d+', trace.read_text())
    shards = sorted(run.glob("trajectories/*.parquet"))
    counts = [opened.count(str(shard)) for shard in shards]
    # each shard once per pass and once for its footer (the schema check and the row count); besides, polars
    # sometimes reads a footer again (the scan's schema, its row count for the row index), and a run with no
    # manifest names its teacher from the first shard's settings. A fresh scan per pass opened every shard
    # twice a pass (13-14 times each here).
    # (Which shards polars reads again varies run to run: a sum capped at two extra opens a shard failed a clean
    # CI run at 33 of 32; the cap per shard is what tells a pass that scans afresh, at 13-14 a shard.)
    assert max(counts) <= passes + 3, counts
