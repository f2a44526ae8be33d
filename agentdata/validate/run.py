"""Find the broken problems of a file before a model is paid to solve them; write a report and a clean file.

    result = validate("problems.jsonl", "problems.clean.jsonl", config=ValidateConfig())

Each problem gets every finding that applies (validate.checks for one problem; here the ones across
problems): a row the loader refuses (`unreadable`), the same question as an earlier row
(`duplicate`), a near-copy of one (`near_duplicate`, MinHash as curate's), a question that shares a
word n-gram with a benchmark (`contaminated`, with `--decontam`). The clean file holds the problems
with none, in agentdata's problem form (any command reads it); the report lists every finding.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.errors import InputFileError
from agentdata.events import task
from agentdata.outputs import companion
from agentdata.problems import problems_from_rows, read_nonempty_rows
from agentdata.publish.secrets import write_shared_json
from agentdata.records import Problem, normalise_question, write_records
from agentdata.steps import BenchmarkNgrams, ContaminationFilter, NearDuplicateFilter
from agentdata.validate.checks import Finding, problem_findings
from agentdata.validate.config import ValidateConfig
from agentdata.versions import stamped

CHECKS = {
    "unreadable": "the loader refuses the row (e.g. a multiple-choice gold that is not one of its options)",
    "gold_unparseable": "the verifier reads nothing in the gold, or the code tests cannot be read",
    "trivial_gold": "an empty response, an empty box or the question repeated is graded correct",
    "choice_not_listed": "a letter gold that is not among the question's choices",
    "empty_program_passes": "a program that does nothing passes every code test",
    "reference_fails": "the problem's reference solution fails its own tests",
    "ungradable": "the sandbox cannot run the code tests (a library they import is missing there)",
    "duplicate": "the same question (case and spacing aside) as an earlier row",
    "near_duplicate": "a near-copy of an earlier question (MinHash Jaccard at or above the threshold)",
    "contaminated": "the question shares a word n-gram with a benchmark question (--decontam)",
}
MAX_LISTED = 10_000  # problems listed in the report (all are counted)


@dataclass
class _Entry:
    row: int  # 1-based, as error lines name rows
    raw: dict[str, Any]
    problem: Problem | None
    findings: list[Finding] = field(default_factory=list)


@dataclass
class ValidateResult:
    path: Path
    rows: int
    clean: int
    findings: dict[str, int]
    broken: list[dict[str, Any]]
    clean_file: Path  # written even with no clean problem (then empty)
    report: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "rows": self.rows,
            "clean": self.clean,
            "broken": self.rows - self.clean,
            "findings": self.findings,
            "problems": self.broken[:MAX_LISTED],
            "clean_file": str(self.clean_file),
            "report": str(self.report) if self.report else None,
        }


def validate(
    path: str | os.PathLike,
    clean_out: str | os.PathLike,
    config: ValidateConfig | None = None,
    question_field: str | None = None,
    answer_field: str | None = None,
    sandbox: Any = None,
    report_out: str | os.PathLike | None = None,
) -> ValidateResult:
    """Check every problem of `path` (see the module doc); write the clean problems and the report."""
    config = config or ValidateConfig()
    path, clean_out = Path(path), Path(clean_out)
    entries = _load(path, question_field, answer_field)
    readable = [entry for entry in entries if entry.problem is not None]
    _check_each(readable, config, sandbox)
    _check_across(readable, config)
    clean = [entry.problem for entry in entries if entry.problem is not None and not entry.findings]
    counts = Counter(finding.check for entry in entries for finding in entry.findings)
    broken = [_listed(entry) for entry in entries if entry.findings]
    # Written even when empty: a clean file left from an earlier run would be read as this run's.
    clean_file = write_records(clean, clean_out, Problem)
    result = ValidateResult(
        path, len(entries), len(clean), {c: counts[c] for c in CHECKS if counts[c]}, broken, clean_file
    )
    result.report = Path(report_out) if report_out else companion(clean_out, ".report.json")
    write_shared_json(result.report, stamped({**result.as_dict(), "checks": CHECKS, "settings": asdict(config)}))
    return result


def _load(path: Path, question_field: str | None, answer_field: str | None) -> list[_Entry]:
    """Every row with its problem, or with the loader's refusal as its finding. A file-wide mistake (no question
    column at all) is still the user's to fix: it raises."""
    rows = read_nonempty_rows(path)
    try:
        problems = problems_from_rows(path, rows, question_field, answer_field)
        return [_Entry(number, row, problem) for number, (row, problem) in enumerate(zip(rows, problems), start=1)]
    except InputFileError as error:
        if error.row is None:
            raise
    entries = []
    for number, row in enumerate(rows, start=1):  # one at a time: a bad row is a finding, not the end
        try:
            entries.append(_Entry(number, row, problems_from_rows(path, [row], question_field, answer_field)[0]))
        except InputFileError as error:
            entries.append(_Entry(number, row, None, [Finding("unreadable", error.reason)]))
    return entries


def _check_each(entries: list[_Entry], config: ValidateConfig, sandbox: Any) -> None:
    owns_sandbox = sandbox is None and any(entry.problem.domain == "code" for entry in entries)
    if owns_sandbox:
        from agentdata.sandbox import open_sandbox

        sandbox = open_sandbox(config.sandbox, max_rps=config.sandbox_max_rps)
    try:
        with task("validate", len(entries)) as advance, ThreadPoolExecutor(config.concurrency) as pool:
            problems = [entry.problem for entry in entries]
            raws = [entry.raw for entry in entries]
            for done, (entry, findings) in enumerate(
                zip(entries, pool.map(problem_findings, problems, raws, repeat(sandbox))), start=1
            ):
                entry.findings.extend(findings)
                advance(done)
    finally:
        if owns_sandbox:
            sandbox.close()


def _check_across(entries: list[_Entry], config: ValidateConfig) -> None:
    """Duplicates, near-duplicates and benchmark overlap: findings that compare questions."""
    if not entries:
        return
    first: dict[str, _Entry] = {}
    for entry in entries:
        key = normalise_question(entry.problem.question)
        if key in first:
            earlier = first[key]
            other = (
                ""
                if earlier.problem.answer == entry.problem.answer
                else f"; its gold differs ({earlier.problem.answer!r})"
            )
            entry.findings.append(Finding("duplicate", f"the same question as row {earlier.row}{other}"))
        else:
            first[key] = entry
    questions = pl.DataFrame({"question": [entry.problem.question for entry in entries]})
    dedup = config.dedup
    if dedup.near_dup_threshold:
        near = NearDuplicateFilter(threshold=dedup.near_dup_threshold, ngram=dedup.near_dup_ngram)
        for entry, keep in zip(entries, near.keep(questions).to_list()):
            if not keep and not any(finding.check == "duplicate" for finding in entry.findings):
                entry.findings.append(Finding("near_duplicate", "a near-copy of an earlier question"))
    if dedup.decontam_files:
        benchmark = BenchmarkNgrams.from_files(dedup.decontam_files, dedup.decontam_ngram)
        overlap = ContaminationFilter(benchmark).keep(questions).to_list()
        files = ", ".join(benchmark.files)
        for entry, keep in zip(entries, overlap):
            if not keep:
                entry.findings.append(Finding("contaminated", f"shares a {dedup.decontam_ngram}-gram with {files}"))


def _listed(entry: _Entry) -> dict[str, Any]:
    problem = entry.problem
    question = problem.question if problem else str(entry.raw.get("question") or entry.raw.get("problem") or "")
    return {
        "row": entry.row,
        "id": problem.id if problem else None,
        "question": question if len(question) <= 200 else question[:199] + "…",
        "findings": [{"check": finding.check, "detail": finding.detail} for finding in entry.findings],
    }
