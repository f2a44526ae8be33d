"""Stage runs kept by what they depend on: shared between arms, done once, resumed after a kill.

Every stage of every arm (collect, stitch, curate, the SFT sets, SFT, the profile, a pool, GRPO, an
evaluation) is named by a digest of everything it depends on: its own settings and the keys of the
stages it reads. Its folder is `WORK/<stage>-<digest>/`, and `result.json` in it, written atomically
when the stage ends, is its completion marker. So

- two arms whose chains agree up to a stage share that stage's run (one collect, one stitch, one
  profile for every pool kind): the second finds `result.json` and reuses it;
- a killed experiment, started again, skips every stage with a marker and runs the first one
  without: a collect, profile or evaluation resumes its own run dir (nothing generated twice); a
  training stage starts again from its start (its half-written folder is cleared);
- a stage that fails is remembered for the rest of this run (another arm needing it fails the same
  way, without running it twice: `failed.json` names the run); a rerun tries it again;
- arms running at once in worker processes (runner.py, `--jobs`) never run one stage twice: the
  first takes the stage's lock (`WORK/<stage>-<digest>.lock`, flock, released when its process
  ends however it ends), the second waits for it and then finds it done.

Each result records the stage's wall and CPU time (this process and its finished children) and the
load average before and after, so a report can say when the machine was shared.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.events import note
from agentdata.records import write_json

RESULT = "result.json"
FAILED = "failed.json"  # how the stage failed, and in which run of the experiment


class StageFailed(Exception):
    """A stage raised: `stage` and a one-line `reason`; the arm is reported failed, the others go on."""

    def __init__(self, stage: str, reason: str):
        self.stage, self.reason = stage, reason
        super().__init__(f"{stage}: {reason}")


def digest(data: Any) -> str:
    """A stable short name for settings (JSON, keys sorted; paths and tuples as text and lists)."""
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def digest_file(path: Path) -> str:
    """A file's content digest (an input a stage reads, named by what it holds rather than where)."""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12]


def torch_threads() -> int | None:
    """torch's threads per operation (OMP_NUM_THREADS, else one per core): read beside a stage's CPU time, since
    threads that outnumber the free cores spin while they wait for each other (bench/RESULTS.md)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (sandbox workers, subprocesses)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def read_marker(path: Path) -> dict[str, Any] | None:
    """A stage's `result.json` or `failed.json`; None when there is none, or it is not a JSON object (a marker
    emptied by a full disk or edited by hand marks nothing)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class StageRun:
    stage: str
    key: str
    dir: Path
    result: dict[str, Any]
    reused: bool  # found done (an earlier arm, or a run before a kill)

    @property
    def seconds(self) -> float:
        return float(self.result.get("_timing", {}).get("wall_s", 0.0))

    @property
    def cpu_seconds(self) -> float:
        return float(self.result.get("_timing", {}).get("cpu_s", 0.0))

    def summary(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "key": self.key,
            "dir": str(self.dir),
            "reused": self.reused,
            **self.result.get("_timing", {}),
        }


@dataclass
class Workshop:
    root: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # this run of the experiment, in every worker
    restartable: tuple[str, ...] = ("sft", "grpo")  # stages that begin again from scratch after a kill

    def folder(self, stage: str, depends_on: dict[str, Any]) -> tuple[str, Path]:
        key = digest({"stage": stage, **depends_on})
        return key, self.root / f"{stage}-{key}"

    def done(self, stage: str, depends_on: dict[str, Any]) -> StageRun | None:
        key, folder = self.folder(stage, depends_on)
        marker = folder / RESULT
        if not marker.exists():
            return None
        result = read_marker(marker)
        if result is None:  # emptied, cut or hand-edited: the stage is not known to be done, so it is done again
            note("experiment", f"{folder.name}: its {RESULT} is damaged (not a JSON object); the stage is run again")
            return None
        return StageRun(stage, key, folder, result, reused=True)

    def run(self, stage: str, depends_on: dict[str, Any], action: Callable[[Path], dict[str, Any]]) -> StageRun:
        """The stage's result: found done, or `action(folder)` run now and marked done."""
        key, folder = self.folder(stage, depends_on)
        with self.claim(folder):
            finished = self.done(stage, depends_on)
            if finished is not None:
                return finished
            self.raise_if_failed(stage, folder)
            if stage in self.restartable and folder.exists():
                shutil.rmtree(folder)  # a training stage killed half-way starts again from its start model
            folder.mkdir(parents=True, exist_ok=True)
            (folder / FAILED).unlink(missing_ok=True)  # an earlier run's failure: this run tries again
            write_json(folder / "depends_on.json", {"stage": stage, **depends_on})
            result = self.timed(stage, folder, action)
            write_json(folder / RESULT, result)
        return StageRun(stage, key, folder, json.loads((folder / RESULT).read_text(encoding="utf-8")), reused=False)

    def timed(self, stage: str, folder: Path, action: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """`action(folder)` with its wall and CPU time and the load around it; a failure is marked in the folder."""
        load_before, wall, cpu = os.getloadavg()[0], time.perf_counter(), cpu_seconds()
        try:
            result = action(folder)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as error:  # noqa: BLE001 - any failure of one stage is that arm's, not the experiment's
            text = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
            failure = StageFailed(stage, " ".join(text.split())[:500])
            write_json(folder / FAILED, {"run": self.run_id, "reason": failure.reason})
            raise failure from error
        result["_timing"] = {
            "wall_s": time.perf_counter() - wall,
            "cpu_s": cpu_seconds() - cpu,
            "load_before": load_before,
            "load_after": os.getloadavg()[0],
            "threads": torch_threads(),
        }
        return result

    def raise_if_failed(self, stage: str, folder: Path) -> None:
        """The stage failed earlier in this run (another arm's try): fail the same way without running it again."""
        failed = read_marker(folder / FAILED)  # a damaged one says nothing: the stage is tried (and it is removed)
        if failed is not None and failed.get("run") == self.run_id:
            raise StageFailed(stage, str(failed.get("reason") or "failed earlier in this run"))

    @contextmanager
    def claim(self, folder: Path) -> Iterator[None]:
        """The stage's lock, held while it is checked and run: another worker wanting it waits here."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(folder.with_name(folder.name + ".lock"), "a", encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                note("experiment", f"{folder.name}: another arm is running it; waiting to reuse it")
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield  # closing the file releases the lock (and so does the process ending, however it ends)
