"""A full disk: the command names the file it could not write, exits 2, keeps what was durable and
closes what it opened; a second run resumes. The disk is a real tiny tmpfs (in a user and mount
namespace) where the kernel allows it, else a per-process file size limit (RLIMIT_FSIZE)."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentdata.errors import OutputWriteError, write_refusal
from agentdata.records import atomic_write
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

ENGINE = '''
from agentdata.engines.base import Engine, Generation


class Wordy(Engine):
    """Answers at once with a few kB of text, so the journal fills a small disk fast."""

    def __init__(self, target, *, spec):
        self.spec = spec

    async def generate(self, request):
        return Generation("Let me think. " * 300 + "\\\\boxed{1}", None, "stop", prompt_tokens=1, completion_tokens=1)

    async def aclose(self):
        print("ENGINE CLOSED", flush=True)
'''
PROBLEMS = 60


def can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


@pytest.fixture
def collect_inputs(tmp_path) -> tuple[Path, Path]:
    (tmp_path / "wordy.py").write_text(ENGINE)
    problems = tmp_path / "p.jsonl"
    problems.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(PROBLEMS))
    )
    return problems, tmp_path / "wordy.py"


def collect_args(problems: Path, engine: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "agentdata.cli.app", "collect", str(problems), "--teacher", f"{engine}:Wordy:x",
        "--out", str(out), "shard_size=1000", "--json",
    ]  # fmt: skip


def test_collect_on_a_full_disk_names_the_file_keeps_the_journal_and_resumes(collect_inputs, tmp_path):
    problems, engine = collect_inputs
    if can_mount_tmpfs():  # a real ENOSPC: a 192 KiB tmpfs, the run dir copied out before the namespace ends
        disk, kept = tmp_path / "disk", tmp_path / "kept"
        disk.mkdir()
        script = (
            f"mount -t tmpfs -o size=192k tmpfs {disk} && {{ {' '.join(collect_args(problems, engine, disk / 'run'))}; "
            f"echo rc=$?; cp -a {disk}/run {kept}; }}"
        )
        first = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
        reason = "No space left on device"
    else:  # RLIMIT_FSIZE: a write past 192 KiB fails with EFBIG (Python ignores SIGXFSZ)
        kept = tmp_path / "run"
        limit = 192 * 1024

        def limit_files() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        first = subprocess.run(
            collect_args(problems, engine, kept), capture_output=True, text=True, timeout=300, preexec_fn=limit_files
        )
        first = subprocess.CompletedProcess(first.args, 0, first.stdout + f"rc={first.returncode}\n", first.stderr)
        reason = "File too large"
    assert "rc=2" in first.stdout, first.stdout + first.stderr
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "journal.jsonl: cannot write it" in errors[0] and reason in errors[0], first.stderr
    assert "run the same command again to resume" in errors[0]
    assert "Traceback" not in first.stderr and "Unclosed" not in first.stderr
    assert "ENGINE CLOSED" in first.stdout  # the engine (its HTTP sessions) was closed on the way out
    journaled = (kept / "journal.jsonl").read_text(encoding="utf-8", errors="replace").count("\n") - 1
    assert journaled > 5
    second = subprocess.run(collect_args(problems, engine, kept), capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout[second.stdout.index("{") :])
    assert summary["total"] == PROBLEMS and summary["new"] == PROBLEMS - journaled  # the journaled rows were kept


def test_a_refused_write_is_named_whichever_library_wrapped_it(tmp_path):
    target = tmp_path / "out.parquet"
    target.write_bytes(b"the previous version")

    class ComputeError(Exception):  # polars' own type; it quotes the OS error in its text
        pass

    for raised in (
        ComputeError("parquet: File out of specification: underlying IO error: No space left on device (os error 28)"),
        OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
    ):

        def failing(tmp: str, error=raised) -> None:
            Path(tmp).write_bytes(b"half")
            raise error

        with pytest.raises(OutputWriteError, match=r"out.parquet: cannot write it \((No space|Disk quota)") as caught:
            atomic_write(target, failing)
        assert "free some space" in str(caught.value) and "as it was before" in str(caught.value)
        assert target.read_bytes() == b"the previous version"
        assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]  # no temporary file left
    with pytest.raises(ValueError, match="not a disk problem"):  # anything else is not dressed up as one
        atomic_write(target, lambda tmp: (_ for _ in ()).throw(ValueError("not a disk problem")))
    assert write_refusal(OSError(errno.ENOENT, "No such file")) is None
    assert write_refusal(RuntimeError("errno 28 happened")) == errno.ENOSPC


def test_curate_on_a_full_disk_is_one_line_and_the_old_set_is_kept(tmp_path, monkeypatch):
    run = write_run(tmp_path / "run", [trajectory(f"t{i}", problem_id=f"p{i}") for i in range(3)])
    out = tmp_path / "sft.parquet"
    out.write_bytes(b"yesterday's set")
    import polars as pl

    def full(self, *args, **kwargs):
        raise pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")

    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", full)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(["curate", str(run), "--out", str(out), "--tool-calls", "0,8"])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err.getvalue()
    assert f"{out}: cannot write it (No space left on device)" in lines[0]
    assert out.read_bytes() == b"yesterday's set"
