"""Damaged run dirs: every file of a real run dir truncated, emptied or replaced by another type.

A resume either succeeds without losing a finished trajectory, or is refused with one line
(a UserError: exit 2 in the CLI) that names the file to move aside, and after moving it aside
the resume succeeds. Nothing is changed by a refused resume.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdata.agent.config import CollectConfig
from agentdata.agent.journal import Journal
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.errors import UserError
from agentdata.records import Problem
from tests.cli_helpers import run_cli
from tests.fakes import InProcessSandbox, ScriptedEngine

PROBLEMS = [Problem(f"What is 6 times 7? (variant {i})", "42", id=f"q{i}") for i in range(6)]
ALL_IDS = {f"q{i}-0" for i in range(6)}
CONFIG = CollectConfig(model="scripted", concurrency=2, shard_size=2)
DAMAGES = ("truncate", "empty", "directory", "random_bytes", "json_list", "other_parquet")


def resume(out: Path) -> ScriptedEngine:
    engine = ScriptedEngine()
    collect(PROBLEMS, out, CONFIG, engine=engine, sandbox=InProcessSandbox())
    return engine


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> Path:
    """A run dir as a kill -9 leaves it: shards, manifest, stats, and a journal holding the last two rows."""
    out = tmp_path_factory.mktemp("real") / "run"
    resume(out)
    run = RunDir(out)
    last = run.shards()[-1]
    journal = Journal(run.journal_path, json.loads(run.manifest_path.read_text())["settings"])
    for trajectory in run.trajectories()[-2:]:
        journal.append(trajectory)
    journal.handle.close()
    last.unlink()
    return out


def damage(path: Path, how: str, fraction: float, noise: bytes) -> None:
    data = path.read_bytes() if path.is_file() else b""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if how == "directory":
        path.mkdir()
    elif how == "other_parquet":
        pq.write_table(pa.table({"x": [1, 2]}), path)
    else:
        content = {
            "truncate": data[: int(len(data) * fraction)],
            "empty": b"",
            "random_bytes": noise,
            "json_list": b"[1, 2, 3]",
        }[how]
        path.write_bytes(content)


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def targets(out: Path) -> list[Path]:
    return [out / "trajectories", *sorted(p for p in out.rglob("*") if p.is_file())]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.integers(0, 20), how=st.sampled_from(DAMAGES), fraction=st.floats(0, 0.99), noise=st.binary(max_size=64)
)
def test_a_damaged_run_dir_resumes_or_is_refused_with_one_line_and_nothing_lost(
    killed_run, target, how, fraction, noise
):
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        shutil.copytree(killed_run, out)
        victims = targets(out)
        victim = victims[target % len(victims)]
        damage(victim, how, fraction, noise)
        before = snapshot(out)
        try:
            engine = resume(out)
        except UserError as error:
            message = str(error)
            assert "\n" not in message and "move it aside" in message
            assert snapshot(out) == before  # a refusal changes nothing
            named = re.search(re.escape(str(out)) + r"[^\s,:;]*", message).group(0).rstrip(")")
            assert Path(named) == victim or Path(named) == out, message
            shutil.move(named, Path(scratch) / "aside")
            engine = resume(out)
        ids = [t.id for t in RunDir(out).trajectories()]
        assert sorted(ids) == sorted(ALL_IDS)  # one row per id, nothing missing
        redone = {request.messages[1]["content"] for request in engine.requests}
        assert len(redone) <= 2 or victim.name == "trajectories"  # only the damaged file's rows are redone


@pytest.mark.parametrize("how", ["random_bytes", "json_list", "directory"])
def test_cli_refuses_a_damaged_manifest_in_one_line(killed_run, tmp_path, capsys, how):
    out = tmp_path / "run"
    shutil.copytree(killed_run, out)
    damage(out / "manifest.json", how, 0.5, b"\x00garbage")
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(json.dumps({"id": p.id, "question": p.question, "answer": p.answer}) + "\n" for p in PROBLEMS)
    )
    code = run_cli(["collect", str(problems), "--out", str(out), "--teacher", "openai:http://127.0.0.1:9"])
    error = capsys.readouterr().err
    assert code == 2 and "Traceback" not in error and "manifest.json" in error and "move it aside" in error
