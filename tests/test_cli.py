import json
import subprocess
import sys

import pytest

from agentdata.records import Trajectory, write_records
from tests.cli_helpers import run_cli
from tests.test_records import make_trajectory

COMMANDS = ["collect", "curate", "filter", "train", "eval", "regrade", "validate", "synth", "sandbox", "inspect"]


def run_main(args, capsys):
    code = run_cli(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_every_command(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0
    for command in COMMANDS:
        assert command in out


def test_user_error_is_one_line_without_traceback(tmp_path, capsys):
    code, out, err = run_main(["inspect", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2
    assert "error:" in err and "no such file" in err and "Traceback" not in err + out


def test_inspect_problems(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"problem": "What is 6*7?", "answer": "42", "source": "demo"}) + "\n")
    code, out, _ = run_main(["inspect", str(path)], capsys)
    assert code == 0 and "What is 6*7?" in out and "demo" in out


def test_inspect_trajectories_shows_conversation_and_summary(tmp_path, capsys):
    path = write_records([make_trajectory(0), make_trajectory(1)], tmp_path / "t.parquet", Trajectory)
    code, out, _ = run_main(["inspect", str(path), "--show", "1"], capsys)
    assert code == 0
    assert "sympy.factorint" in out and "tool calls" in out and "accuracy" in out and "100.0%" in out


def test_console_script_runs():
    result = subprocess.run([sys.executable, "-m", "agentdata.cli.app", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "collect" in result.stdout


@pytest.mark.parametrize(
    "pair,expected",
    [
        ("a=1", {"a": 1}),
        ("tensor-parallel-size=2", {"tensor_parallel_size": 2}),
        ("x=true", {"x": True}),
        ("t=0.5", {"t": 0.5}),
        ("m=name", {"m": "name"}),
    ],
)
def test_parse_options(pair, expected):
    from agentdata.cli.common import parse_options

    assert parse_options([pair]) == expected
