"""`agentdata view PATH --export DIR`: the viewer as a static site that opens from disk or any static host.

A page opened from disk cannot `fetch()` the files beside it, so every answer the page would ask the
server for is written as a small script, `data/NAME.js`, that puts it into `window.AGENTDATA_DATA`;
the page loads them with `<script>` tags as it needs them. The lists are filtered in the page by the
same rules as the server's (`app.js` `filterRows`). Each artifact's first `limit` rows (or the rows
a `where` query keeps) are written with their conversation, their SFT mask and their problem's page.
Every value written is scanned for secrets first (publish/secrets.py) and each is redacted, unless `keep`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.events import task
from agentdata.publish.secrets import redact_tree
from agentdata.view.api import ViewerData
from agentdata.view.artifacts import Artifact
from agentdata.view.query import Query, QueryError
from agentdata.view.server import CSP, asset, plain
from agentdata.view.table import ROW

# A <meta> policy cannot say frame-ancestors (browsers ignore it there); the page needs no connection at all.
EXPORT_CSP = CSP.replace("connect-src 'self'", "connect-src 'none'").replace("; frame-ancestors 'none'", "")


@dataclass
class ExportSummary:
    out: Path
    artifacts: int = 0
    rows: int = 0
    of: int = 0
    masks: int = 0
    problems: int = 0
    files: int = 0
    bytes: int = 0
    problems_lines: list[str] = field(default_factory=list)  # one line per record that could not be written
    secrets: dict[str, Any] = field(default_factory=dict)  # the mode, and secrets cut per kind over every file

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "index": str(self.out / "index.html"),
            "artifacts": self.artifacts,
            "rows": self.rows,
            "rows_in_artifacts": self.of,
            "masks": self.masks,
            "problems": self.problems,
            "files": self.files,
            "bytes": self.bytes,
            "skipped": self.problems_lines,
            "secrets": self.secrets,
        }


def selected_rows(artifact: Artifact, where: Mapping[str, str], limit: int) -> list[dict[str, Any]]:
    """The index rows an export writes: those `where` keeps, the first `limit` of them."""
    try:
        frame = artifact.table().select(Query.parse(where))
    except QueryError as error:
        raise UserError(f"--where: {artifact.label}: {error}") from None
    return frame.head(limit).to_dicts()


def check_where(data: ViewerData, where: Mapping[str, str]) -> None:
    """Every filter names a column of every list (before any file is written)."""
    for artifact in data.catalog:
        if artifact.has_rows:
            selected_rows(artifact, where, 1)


def export_site(
    data: ViewerData, out: Path, limit: int, where: Mapping[str, str] | None = None, secrets: str = "redact"
) -> ExportSummary:
    """The static site of `data` in `out` (see the module doc); `secrets`: `keep` writes them as they are, any
    other mode redacts each (a site has no row to leave out)."""
    where = dict(where or {})
    check_where(data, where)
    prepare_out(out)
    summary = ExportSummary(out)
    writer = _Writer(out, summary, redact=secrets != "keep")
    (out / "static").mkdir(parents=True, exist_ok=True)
    for name in ("app.js", "app.css"):
        writer.raw(out / "static" / name, asset(name))
    page = asset("index.html").decode("utf-8")
    page = page.replace("<!--csp-->", f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">')
    page = page.replace("<!--data-->", '<script src="data/artifacts.js"></script>')
    writer.raw(out / "index.html", page.encode("utf-8"))
    chosen = {a.key: selected_rows(a, where, limit) for a in data.catalog if a.has_rows}
    with task("export", total=sum(len(rows) for rows in chosen.values())) as advance:
        done = [0]

        def step() -> None:
            done[0] += 1
            advance(done[0])

        for artifact in data.catalog:
            summary.artifacts += 1
            _pages(writer, data, artifact)
            for number, plot in enumerate(artifact.plots):
                writer.raw(out / "data" / artifact.key / f"plot{number}.png", plot.read_bytes())
            if artifact.key in chosen:
                _table_files(writer, data, artifact, chosen[artifact.key], summary, step)
    runs = [a for a in data.catalog if a.is_trajectories and a.has_rows]
    for first, second in combinations(runs, 2):
        for a, b in ((first, second), (second, first)):
            writer.put(f"compare/{a.key}-{b.key}", data.compare(a.key, b.key, "all", limit=None))
    artifacts = data.artifacts()
    writer.put("artifacts", artifacts)
    summary.secrets = (
        {"mode": secrets, "found": dict(sorted(writer.found.items()))} if writer.redact else {"mode": secrets}
    )
    return summary


def _table_files(writer, data, artifact, rows, summary, step) -> None:
    """The list (with each row's searchable text), every row's page and mask, every problem's page."""
    texts = _records(writer, data, artifact, rows, summary, step)
    problems = _problems(writer, data, artifact, rows, summary)
    table = artifact.table()
    exported = [{**row, "_text": texts.get(row[ROW], "")} for row in rows]
    index = {"columns": table.describe(), "rows": exported, "problems": problems, "exported": len(rows)}
    writer.put(f"{artifact.key}/index", {**index, "of": len(table)})
    summary.rows += len(rows)
    summary.of += len(table)


def _pages(writer: _Writer, data: ViewerData, artifact: Artifact) -> None:
    builders: dict[str, Callable[[str], Any]] = {}
    if artifact.kind == "train":
        builders["train"] = data.train
    if artifact.kind == "eval":
        builders["eval"] = data.evaluation
    if artifact.kind == "sft" and artifact.report:
        builders["curate"] = data.curate
    for name, build in builders.items():
        writer.put(f"{artifact.key}/{name}", build(artifact.key))


def _records(writer, data, artifact, rows, summary, advance) -> dict[int, str]:
    """Each row's page and SFT mask; returns each row's searchable text (what the server's search reads)."""
    texts: dict[int, str] = {}
    for row in rows:
        number = row[ROW]
        try:
            record = data.record(artifact.key, number, writer.redacted_source)
        except UserError as error:
            summary.problems_lines.append(" ".join(str(error).split()))
            writer.put(f"{artifact.key}/r/{number}", {"__error": " ".join(str(error).split())})
            advance()
            continue
        record = writer.redacted(record)  # its fields outside the source too, before the search text is lower-cased
        writer.put(f"{artifact.key}/r/{number}", record)
        texts[number] = _searchable(record)
        if record.get("maskable"):
            try:
                writer.put(f"{artifact.key}/m/{number}", data.mask(artifact.key, number, writer.redacted_source))
                summary.masks += 1
            except UserError as error:
                writer.put(f"{artifact.key}/m/{number}", {"__error": " ".join(str(error).split())})
        advance()
    return texts


def _problems(writer, data, artifact, rows, summary) -> dict[str, int]:
    """The problem page of every exported trajectory's problem; returns problem id -> its file number."""
    if not artifact.is_trajectories:
        return {}
    numbers: dict[str, int] = {}
    for row in rows:
        problem_id = row.get("problem_id")
        if problem_id is None or problem_id in numbers:
            continue
        numbers[problem_id] = len(numbers)
        writer.put(f"{artifact.key}/p/{numbers[problem_id]}", data.problem(artifact.key, problem_id))
        summary.problems += 1
    return numbers


def _searchable(record: dict[str, Any]) -> str:
    """Question, text, code and tool output of a record, lower-cased, for the page's search."""
    pieces = [str(record.get("question") or "")]
    problem = record.get("problem")
    if problem:
        pieces += [str(problem.get("question") or ""), str(problem.get("answer") or "")]
    for turn in record.get("turns") or []:
        pieces += [part.get("text") or part.get("code") or "" for part in turn["segments"]]
        pieces += [turn.get("reasoning") or ""]
        for call in turn.get("calls") or []:
            pieces += [call.get("code") or call.get("arguments") or "", call.get("output") or ""]
    return "\n".join(pieces).lower()


class _Writer:
    def __init__(self, out: Path, summary: ExportSummary, redact: bool = True):
        self.out = out
        self.summary = summary
        self.redact = redact
        self.found: Counter = Counter()

    def redacted(self, value: Any) -> Any:
        """`value` as JSON would carry it, with its secrets redacted (counted) unless the export keeps them."""
        value = json.loads(json.dumps(plain(value), ensure_ascii=False, default=str, allow_nan=False))
        return redact_tree(value, self.found) if self.redact else value

    def redacted_source(self, record: dict[str, Any]) -> dict[str, Any]:
        """A row's source (a Trajectory, an SFT row, a problem) with its secrets redacted before a view is drawn
        from it: highlighted code and a mask's tokens split the text into pieces no pattern finds a key in."""
        return {key: self._redacted_value(value) for key, value in record.items()} if self.redact else record

    def _redacted_value(self, value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
            return dataclasses.replace(value, **redact_tree(fields, self.found))
        return redact_tree(value, self.found)

    def put(self, name: str, value: Any) -> None:
        """`data/NAME.js`: the value as a script that stores it under NAME (JSON is a JavaScript literal), every
        secret in it redacted."""
        text = json.dumps(self.redacted(value), ensure_ascii=False, allow_nan=False)
        script = f"(window.AGENTDATA_DATA = window.AGENTDATA_DATA || {{}})[{json.dumps(name)}] = {text};\n"
        self.raw(self.out / "data" / f"{name}.js", script.encode("utf-8"))

    def raw(self, path: Path, content: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        self.summary.files += 1
        self.summary.bytes += len(content)


MARKER = ".agentdata-view"


def check_out(out: Path, flag: str = "--export") -> None:
    """A new or empty folder, or an earlier export of ours; any other folder is refused rather than written into."""
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(f"{flag} {out} is a folder that holds other files: give a new or empty folder")


def prepare_out(out: Path, flag: str = "--export") -> None:
    """`check_out`, then an earlier export of ours is emptied first, so that it holds only this export."""
    check_out(out, flag)
    if out.is_dir() and any(out.iterdir()):
        for entry in out.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by agentdata view; a later export into this folder replaces it\n")
