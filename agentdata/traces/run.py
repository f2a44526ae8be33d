"""`import_traces`: trace files of another tool (ATIF, Inspect AI logs, STS) into an ordinary run dir.

    import_traces("atif", [Path("harbor/jobs/2026-12-04")], Path("runs/harbor"))

Every file is read and checked first (a malformed one stops the import before anything is written, in one
line naming the file and the row); then the trajectories are graded and written shard by shard, each shard
atomically, into a run dir that `curate`, `filter`, `view`, `regrade` and `inspect` read like one `collect`
wrote. A killed import run again with the same arguments skips what reached a shard; running it on more
files adds them. A trajectory already in the dir (the same id) is not imported twice.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from agentdata import __version__
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import summarise
from agentdata.errors import InputFileError, UserError
from agentdata.events import task
from agentdata.inputs import first_row
from agentdata.records import Problem
from agentdata.traces.atif import is_atif, load_json, read_atif
from agentdata.traces.build import Draft, Problems, draft, graded
from agentdata.traces.config import ImportConfig
from agentdata.traces.inspect_log import is_inspect_log, read_eval_zip, read_inspect
from agentdata.traces.session import Session, Unsupported
from agentdata.traces.sts import is_sts, read_sts

FORMATS = ("atif", "inspect", "sts")
SUFFIXES = {"atif": (".json",), "inspect": (".eval", ".json"), "sts": (".jsonl",)}
NAMES = {"atif": "an ATIF trajectory", "inspect": "an Inspect eval log", "sts": "an STS session"}


@dataclass
class ImportResult:
    run_dir: Path
    format: str
    files: int = 0
    sessions: int = 0  # read from the files
    imported: int = 0  # written this time
    already: int = 0  # in the run dir before (an earlier or interrupted import)
    duplicates: int = 0  # a second row with an id already read
    graded: int = 0  # of those written: with a known answer, so graded
    correct: int = 0
    matched: int = 0  # of those written: their problem found in --problems
    left_out: list[str] = field(default_factory=list)  # sessions agentdata cannot hold, files of another format
    summary: dict[str, Any] = field(default_factory=dict)  # the run dir's, as `collect` reports it

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "format": self.format,
            "files": self.files,
            "sessions": self.sessions,
            "imported": self.imported,
            "already_in_run_dir": self.already,
            "duplicates": self.duplicates,
            "graded": self.graded,
            "correct": self.correct,
            "matched_problems": self.matched,
            "left_out": self.left_out,
            "run": self.summary,
        }


def import_traces(
    kind: str,
    paths: list[Path],
    out: Path,
    problems: list[Problem] | None = None,
    config: ImportConfig | None = None,
    sandbox: Any = None,
) -> ImportResult:
    """Import the `kind` trace files at `paths` (files, or folders searched for them) into the run dir `out`."""
    if kind not in FORMATS:
        raise UserError(f"unknown trace format {kind!r}: choose one of {', '.join(FORMATS)}")
    config = config or ImportConfig()
    started = time.perf_counter()
    result = ImportResult(out, kind)
    drafts = _drafts(kind, paths, Problems(problems), result)
    run = RunDir(out)
    settings = {"teacher": f"import:{kind}"}
    run.prepare(settings, {"agentdata_version": __version__, "import": _record(kind, paths, problems)})
    done = run.done_ids()
    todo = [item for item in drafts if item.trajectory.id not in done]
    result.already = len(drafts) - len(todo)
    _grade_and_write(todo, run, settings, config, sandbox, result)
    result.summary = summarise(run, time.perf_counter() - started).as_dict()
    run.write_stats(result.summary)
    return result


def _record(kind: str, paths: list[Path], problems: list[Problem] | None) -> dict[str, Any]:
    return {"format": kind, "paths": [str(path) for path in paths], "problems_given": problems is not None}


def _drafts(kind: str, paths: list[Path], problems: Problems, result: ImportResult) -> list[Draft]:
    """Every session of every file, as trajectories to grade: each id once, in file order."""
    drafts: list[Draft] = []
    seen: set[str] = set()
    per_problem: Counter[str] = Counter()
    for root in paths:
        for file in trace_files(kind, root):
            sessions = read_file(kind, file, strict=file == root, left_out=result.left_out)
            if sessions is None:
                continue
            result.files += 1
            result.sessions += len(sessions)
            for session in sessions:
                item = draft(session, kind, file.resolve(), problems, per_problem[_key(session)])
                per_problem[_key(session)] += 1
                if item.trajectory.id in seen:
                    result.duplicates += 1
                    continue
                seen.add(item.trajectory.id)
                drafts.append(item)
    if not result.files:
        shown = ", ".join(str(path) for path in paths)
        passed = f"; {len(result.left_out)} left out, e.g. {result.left_out[0]}" if result.left_out else ""
        raise UserError(f"{shown}: no {kind} trace files found (looked for {', '.join(SUFFIXES[kind])}){passed}")
    return drafts


def _key(session: Session) -> str:
    return session.problem_id or next(m["content"] for m in session.messages if m["role"] == "user")


def trace_files(kind: str, path: Path) -> list[Path]:
    """`path` itself, or the files under a folder that may hold `kind` traces, sorted (hidden ones passed over)."""
    if not path.exists():
        raise InputFileError(path, "no such file or directory")
    if not path.is_dir():
        return [path]
    found = [
        file
        for file in path.rglob("*")
        if file.suffix in SUFFIXES[kind] and file.is_file() and not _hidden(file.relative_to(path))
    ]
    return sorted(found)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def read_file(kind: str, path: Path, strict: bool, left_out: list[str]) -> list[Session] | None:
    """The sessions of one file. A file found in a folder that is not of this format is passed over (and named
    in `left_out`); one given by name must be. A malformed file of this format is an InputFileError."""
    document = _document(kind, path)
    if not _is_kind(kind, document):
        if strict:
            raise InputFileError(path, f"not {NAMES[kind]}")
        left_out.append(f"{path}: not {NAMES[kind]}, passed over")
        return None
    try:
        if kind == "atif":
            return read_atif(path, document)
        if kind == "sts":
            return read_sts(path)
        sessions, skipped = read_inspect(path, document)
        left_out.extend(skipped)
        return sessions
    except Unsupported as reason:
        left_out.append(f"{path}: {reason}")
        return []


def _document(kind: str, path: Path) -> Any:
    """Enough of the file to tell its format: the JSON document, or an STS file's first line."""
    if kind == "sts":
        return first_row(path)
    return read_eval_zip(path) if path.suffix == ".eval" else load_json(path)


def _is_kind(kind: str, document: Any) -> bool:
    return {"atif": is_atif, "inspect": is_inspect_log, "sts": is_sts}[kind](document)


def _grade_and_write(
    drafts: list[Draft], run: RunDir, settings: dict[str, Any], config: ImportConfig, sandbox: Any, result: ImportResult
) -> None:
    """Grade `config.shard_size` at a time, each batch written as one shard (a kill loses at most one)."""
    owns_sandbox = sandbox is None
    needs_sandbox = any(item.problem is not None and item.problem.domain == "code" for item in drafts)
    with task("import", len(drafts)) as advance, ThreadPoolExecutor(config.concurrency) as pool:
        try:
            if needs_sandbox and sandbox is None:
                from agentdata.sandbox import open_sandbox

                sandbox = open_sandbox(config.sandbox, max_rps=config.sandbox_max_rps)
            for start in range(0, len(drafts), config.shard_size):
                batch = drafts[start : start + config.shard_size]
                trajectories = list(pool.map(graded, batch, repeat(sandbox)))
                run.write_shard(trajectories, settings)
                result.imported += len(trajectories)
                result.graded += sum(item.problem is not None for item in batch)
                result.matched += sum(item.matched for item in batch)
                result.correct += sum(t.correct for t in trajectories)
                advance(result.imported, correct=result.correct)
        finally:
            if owns_sandbox and sandbox is not None:
                sandbox.close()
