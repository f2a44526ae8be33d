import json
import re
import subprocess
import sys

import pytest

from agentdata.records import Trajectory, write_records
from tests.cli_helpers import run_cli
from tests.test_records import make_trajectory

COMMANDS = ["collect", "curate", "filter", "train", "eval", "inspect", "regrade", "validate", "synth", "sandbox"]


def run_main(args, capsys):
    code = run_cli(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def listed_commands(help_text: str) -> list[str]:
    """The names in the help's Commands box (the first word of each entry; a wrapped line has none)."""
    box = help_text.split("Commands", 1)[1]
    return re.findall(r"^│ (\S+) ", box, flags=re.MULTILINE)


def test_help_lists_every_command(capsys):
    # the names as the Commands box lists them: "train" also occurs in the app's own description
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0
    assert listed_commands(out) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_every_listed_command_has_its_help(command, capsys):
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0 and re.search(rf"Usage: agentdata {command}\b", out)


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
    assert result.returncode == 0 and listed_commands(result.stdout) == COMMANDS


def test_library_deprecations_stay_out_of_a_commands_output_and_ours_do_not(capsys):
    import warnings

    from agentdata.cli.app import quiet_libraries

    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()
        quiet_libraries()
        for module in ("transformers.modeling_utils", "trl.trainer.grpo_trainer", "agentdata.sft.run"):
            warnings.warn_explicit(f"{module}: `x` is deprecated", FutureWarning, "f.py", 1, module=module)
    assert [str(w.message) for w in shown] == ["agentdata.sft.run: `x` is deprecated"]  # ours still shows
