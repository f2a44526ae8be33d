"""`agentdata synth stitch` wiring: flags reach the library, the summary prints, mistakes are one line."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import run_cli


def test_stitch_command_writes_an_sft_set(tmp_path, capsys):
    solutions = tmp_path / "gsm.jsonl"
    solutions.write_text(json.dumps({"question": "Q?", "answer": "3*4 = <<3*4=12>>12 apples.\n#### 12"}) + "\n")
    out = tmp_path / "sft.parquet"
    code = run_cli(
        [
            "synth",
            "stitch",
            str(solutions),
            "--solution-field",
            "answer",
            "--out",
            str(out),
            "--protocol",
            "codeblock",
            "--trajectories",
            str(tmp_path / "traj"),
        ]
    )
    assert code == 0
    assert "stitched trajectories written" in capsys.readouterr().out
    row = pq.read_table(out).to_pylist()[0]
    assert row["format"] == "codeblock" and row["num_tool_calls"] == 1
    # canonical, as curate writes it: the code is a tool call and its output a tool message
    assert [m["role"] for m in row["messages"]].count("tool") == 1
    assert [m["content"] for m in row["messages"] if m["role"] == "tool"] == ["12"]


@pytest.mark.parametrize(
    "args,message", [(["--solution-field", "nope"], "no column 'nope'"), (["--max-cells", "0"], "--max-cells 0")]
)
def test_stitch_command_reports_mistakes_in_one_line(tmp_path, capsys, args, message):
    solutions = tmp_path / "s.jsonl"
    solutions.write_text(json.dumps({"question": "Q?", "solution": "1 + 1 = 2", "answer": "2"}) + "\n")
    code = run_cli(["synth", "stitch", str(solutions), "--out", str(tmp_path / "o.parquet"), *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_stitch_writes_the_exports_curate_writes(tmp_path, capsys, monkeypatch):
    """`--for` as curate's: OpenAI's fine-tuning JSONL (the default name follows), the hf Parquet TRL and verl read."""
    from agentdata.formats.forms import FORM_KEY

    monkeypatch.chdir(tmp_path)
    solutions = tmp_path / "gsm.jsonl"
    solutions.write_text(json.dumps({"question": "Q?", "answer": "3*4 = <<3*4=12>>12 apples.\n#### 12"}) + "\n")
    stitch = ["synth", "stitch", str(solutions), "--solution-field", "answer", "--protocol", "hermes"]
    assert run_cli([*stitch, "--for", "openai"]) == 0
    assert "(for openai)" in capsys.readouterr().out
    (line,) = (tmp_path / "stitched_sft.jsonl").read_text().splitlines()
    row = json.loads(line)
    assert set(row) == {"messages", "tools"}
    (call,) = [m for m in row["messages"] if m.get("tool_calls")][0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"code": "print(3*4)"}
    assert [m["content"] for m in row["messages"] if m["role"] == "tool"] == ["12"]

    assert run_cli([*stitch, "--for", "trl", "--out", "trl.parquet"]) == 0
    assert pq.read_metadata("trl.parquet").metadata[FORM_KEY.encode()] == b"hf"
    assert run_cli([*stitch, "--for", "openai", "--out", "wrong.parquet"]) == 2
    assert "--out" in capsys.readouterr().err and not (tmp_path / "wrong.parquet").exists()
