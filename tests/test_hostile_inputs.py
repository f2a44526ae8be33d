"""Generated broken input files against every command that reads problems or trajectories.

Each command runs in-process (tests/cli_helpers.run_cli, the console script's error mapping
included) on files that hypothesis damages (tests/hostile_files.py). Whatever the file, the
command ends with exit 0, or exit 2 and exactly one `error:` line on stderr: never a traceback,
never the crash-log line of an unexpected error, and no process left behind. A scripted engine
and a sandbox that runs nothing keep each example fast: what is tested is the reading.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.cli_helpers import run_cli
from tests.fakes import FakeResult, InProcessSandbox, ScriptedEngine
from tests.hostile_files import GOOD_ROW, broken_files, broken_trajectory_files

# Few examples per command, derandomized: the suite stays fast and CI sees the same files every run.
EXAMPLES = int(os.environ.get("AGENTDATA_HOSTILE_EXAMPLES", "12"))
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class NothingRunSandbox(InProcessSandbox):
    """Answers every cell with "42": the commands' reading is under test, not code execution."""

    def run(self, code, session_id=None, timeout=None, **_):
        return FakeResult("ok", "42\n")


@pytest.fixture(scope="module", autouse=True)
def scripted_peers():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("agentdata.engines.load_engine", lambda spec, **options: ScriptedEngine())
        patch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: NothingRunSandbox())
        yield


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A valid collect run dir for `curate --decontam BROKEN`."""
    folder = tmp_path_factory.mktemp("run")
    problems = folder / "p.jsonl"
    problems.write_text(json.dumps(GOOD_ROW) + "\n", encoding="utf-8")
    assert run_cli(["collect", str(problems), "--out", str(folder / "run")]) == 0
    return folder / "run"


def run_quietly(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(args)
    return code, out.getvalue(), err.getvalue()


def child_processes() -> set[int]:
    """Child processes of this test process, but the math-verify workers: a process-wide pool, closed at exit."""
    children = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"agentdata.verify._worker" not in command:
                    children.add(int(entry.name))
    return children


def assert_clean_end(args: list[str], how: str) -> None:
    before = child_processes()
    code, out, err = run_quietly(args)
    described = f"`agentdata {' '.join(args)}` on a file with {how}: exit {code}, stderr {err!r:.600}"
    assert "Traceback" not in out + err, described
    assert code in (0, 2), described
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), described
    assert child_processes() <= before, f"{described}: a process was left running"


PROBLEM_COMMANDS = {
    "inspect": lambda file, out, run: ["inspect", str(file)],
    "collect": lambda file, out, run: ["collect", str(file), "--out", str(out / "run"), "--concurrency", "2"],
    "eval": lambda file, out, run: ["eval", "scripted", str(file), "--k", "1", "--out", str(out / "eval")],
    "filter": lambda file, out, run: [
        "filter",
        str(file),
        "--k",
        "2",
        "embedding=tfidf",
        "--out",
        str(out / "pool.parquet"),
    ],
    "synth stitch": lambda file, out, run: ["synth", "stitch", str(file), "--out", str(out / "sft.parquet")],
    # a broken file given as a trace file: each format's reader ends it in one line too
    "import atif": lambda file, out, run: ["import", "atif", str(file), "--out", str(out / "imported")],
    "import inspect": lambda file, out, run: ["import", "inspect", str(file), "--out", str(out / "imported")],
    "import sts": lambda file, out, run: ["import", "sts", str(file), "--out", str(out / "imported")],
    "curate --decontam": lambda file, out, run: [
        "curate",
        str(run),
        "--decontam",
        str(file),
        "--out",
        str(out / "sft.parquet"),
    ],
}


@pytest.mark.parametrize("command", sorted(PROBLEM_COMMANDS))
@HOSTILE
@given(broken=broken_files())
def test_commands_reading_problems_end_cleanly_on_broken_files(command, broken, run_dir):
    with tempfile.TemporaryDirectory() as folder:
        file = broken.write(Path(folder))
        assert_clean_end(PROBLEM_COMMANDS[command](file, Path(folder), run_dir), f"{broken.suffix} {broken.how}")


TRAJECTORY_COMMANDS = {
    "inspect": lambda file, out: ["inspect", str(file)],
    "curate": lambda file, out: ["curate", str(file), "--out", str(out / "sft.parquet")],
}


@pytest.mark.parametrize("command", sorted(TRAJECTORY_COMMANDS))
@HOSTILE
@given(broken=broken_trajectory_files())
def test_commands_reading_trajectories_end_cleanly_on_broken_files(command, broken):
    with tempfile.TemporaryDirectory() as folder:
        file = broken.write(Path(folder))
        assert_clean_end(TRAJECTORY_COMMANDS[command](file, Path(folder)), f"{broken.suffix} {broken.how}")
