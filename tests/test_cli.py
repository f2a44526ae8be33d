import json
import re
import subprocess
import sys

import pytest

from agentdata.records import Trajectory, write_records
from tests.cli_helpers import run_cli
from tests.test_records import make_trajectory

COMMANDS = [
    *("collect", "curate", "filter", "train", "eval", "experiment", "inspect"),
    *("regrade", "validate", "view", "synth", "sandbox", "import"),
]


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


@pytest.mark.parametrize("args", [["--help"], ["inspect", "missing.jsonl"]])
def test_main_gives_the_callers_sigterm_handler_back(args, capsys):
    # a leaked handler let a later forked child shrug off Pool.terminate()'s SIGTERM: CI hung on it
    import signal

    def mine(signum, frame):
        raise AssertionError("not to be called")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        run_main(args, capsys)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


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


def test_a_library_bar_drawn_with_tqdm_itself_stays_out_of_a_commands_output():
    # transformers draws its GGUF conversion bar with tqdm.auto directly, past the hub's switch
    script = (
        "import os; os.environ.pop('TQDM_DISABLE', None)\n"
        "from agentdata.cli.app import quiet_libraries; quiet_libraries()\n"
        "from tqdm.auto import tqdm\n"
        "for _ in tqdm(range(3), desc='Converting and de-quantizing GGUF tensors...'): pass\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "GGUF" not in result.stderr + result.stdout


def test_progress_into_a_log_is_whole_lines_not_a_folded_bar():
    # no terminal (a log file, CI): each task says how far it got and where it ended, one line each
    from rich.console import Console

    from agentdata.cli.progress import LogRenderer, rendering
    from agentdata.events import Event, note, task

    console = Console(record=True, width=80)
    with rendering(console=console):
        with task("collect", total=3, message="Loading the teacher") as advance:
            for done in (1, 2, 3):
                advance(done, accuracy=0.5, trajectories_per_s=1.5, tokens_per_s=40.0, tool_calls=done)
        note("train", "profiling the SFT model on 8 problems of problems.jsonl to keep the band 0,1 (k=4, GRPO's loop)")
    lines = console.export_text().splitlines()
    assert lines[0] == "Loading the teacher" and lines[1].startswith("collect 3/3 · ")
    assert lines[1].endswith("acc 50% · 1.50 traj/s · 40 tok/s · 3 tool calls") and "━" not in lines[1]
    assert lines[2].startswith("profiling the SFT model") and len(lines) == 3  # longer than 80, still one line
    # a long task also says how far it got, at most every `every_s` seconds
    renderer = LogRenderer(Console(record=True, width=80), every_s=0)
    for kind, completed in (("start", 0), ("advance", 1), ("advance", 2)):
        renderer(Event(kind, "profile", completed=completed, total=4))
    assert [line.split(" · ")[0] for line in renderer.console.export_text().splitlines()] == [
        "profile 1/4",
        "profile 2/4",
    ]


def test_the_same_task_of_two_scopes_is_two_bars_and_each_line_names_its_scope():
    # an experiment's arms in worker processes: both evaluate at once, and their events come back scoped
    from rich.console import Console

    from agentdata.cli.progress import LogRenderer, RichRenderer
    from agentdata.events import Event

    stats = {"accuracy": 0.5, "trajectories_per_s": 1.0, "tokens_per_s": 9.0, "tool_calls": 1}
    renderer = LogRenderer(Console(record=True, width=80), every_s=0)
    for scope in ("band", "all"):
        renderer(Event("start", "collect", total=2, scope=scope))
    renderer(Event("advance", "collect", completed=1, total=2, stats=stats, scope="band"))
    renderer(Event("log", "experiment", message="arm band · seed 0 · eval: running", scope="band"))
    renderer(Event("end", "collect", total=2, scope="all"))
    lines = renderer.console.export_text().splitlines()
    assert lines[0].startswith("band · collect 1/2 · ") and lines[0].endswith(
        "acc 50% · 1.00 traj/s · 9 tok/s · 1 tool calls"
    )
    assert lines[1] == "band arm band · seed 0 · eval: running"
    assert lines[2].startswith("all · collect 0/2")
    assert list(renderer.tasks) == ["band · collect"]  # the other arm's task is still open

    bars = RichRenderer(Console(record=True, width=120, force_terminal=True))
    for scope in ("band", "all"):
        bars(Event("start", "collect", total=2, scope=scope))
    assert sorted(bars.tasks) == ["all · collect", "band · collect"]
    bars(Event("end", "collect", total=2, scope="band"))
    assert list(bars.tasks) == ["all · collect"]  # the other arm's bar goes on
    bars.close()
