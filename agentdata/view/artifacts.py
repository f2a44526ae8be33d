"""What each path given to `agentdata view` holds, and the artifacts it leads to.

    a collect or eval run dir, a filter profile, stitch's trajectories   "run"   (trajectories/part-*.parquet)
    a trajectory file (curate's --rejects, a JSONL of trajectories)      "trajectories"
    an SFT set (curate, synth stitch) with its `.report.json`            "sft"   -> its rejects, its source runs
    an RL pool (filter) with its report and rejects                      "pool"  -> the profile run dir
    a train output dir (`OUT`, `OUT/sft`, `OUT/rl`)                      "train" -> its stages, evaluations, pool
    an eval output dir (report.json)                                     "eval"  -> one run dir per result
    a problem file in any layout `collect` reads                         "problems"

A path that cannot be read becomes a "damaged" artifact holding one line that says why: the page shows
that line (and the server logs it) instead of failing. The server serves these artifacts and the files
they name (reports, plots), nothing else: a plot that is a link out of its folder is left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.inputs import check_input, first_row
from agentdata.view.table import RowTable

KINDS = ("run", "trajectories", "sft", "pool", "train", "eval", "problems", "folder", "damaged")
DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
# Not opened on their own from a folder: reports and run files, and the rejects files their owner's report names.
NOT_ARTIFACTS = (".report.json", ".rejects.parquet", "manifest.json", "stats.json", "journal.jsonl", "trl_config.json")
TABLE_KINDS = ("run", "trajectories", "sft", "pool", "problems")
TRAJECTORY_COLUMNS = {"messages", "problem_id", "question"}
PLOT_SUFFIX = ".png"


@dataclass
class Artifact:
    key: str
    label: str
    path: Path
    kind: str
    error: str | None = None
    parent: str | None = None
    report: dict[str, Any] | None = None  # the JSON report beside it (curate, stitch, filter, eval)
    plots: list[Path] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)  # role ("rejects", "profile", ...) -> artifact key
    rows: RowTable | None = None  # what it lists (None: a train or eval dir, a folder, a damaged path)

    def table(self) -> RowTable:
        if self.rows is None:
            raise UserError(f"{self.label}: a {self.kind} artifact has no rows to list")
        return self.rows

    @property
    def has_rows(self) -> bool:
        return self.rows is not None

    @property
    def is_trajectories(self) -> bool:
        return self.kind in ("run", "trajectories")

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "path": str(self.path),
            "kind": self.kind,
            "error": self.error,
            "parent": self.parent,
            "links": self.links,
            "plots": [plot.name for plot in self.plots],
            "rows": len(self.rows) if self.rows is not None else None,
        }


def detect(path: Path) -> str:
    """The kind of artifact a path holds, from its layout and its columns (rows are not read)."""
    if path.is_dir():
        if (path / "trajectories").is_dir():
            return "run"
        if (path / "report.json").is_file():
            return "eval"
        if _is_train_dir(path):
            return "train"
        if folder_entries(path):
            return "folder"
        raise UserError(
            f"{path}: a folder `agentdata view` does not know (expected a run dir with trajectories/, "
            "a train output dir with metrics.jsonl, an eval dir with report.json, or a folder holding them)"
        )
    names = _columns(path)
    if TRAJECTORY_COLUMNS <= names:
        return "trajectories"
    if "messages" in names:
        return "sft"
    if "pass_rate" in names or "extra_info" in names:
        return "pool"
    return "problems"


def folder_entries(path: Path, depth: int = 3) -> list[Path]:
    """What a folder of artifacts holds (e.g. runs/quickstart): its data files, the folders of a known
    layout in it and the folders that hold such things (a few levels down); not reports, plots, links."""
    entries = []
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith(NOT_ARTIFACTS) or entry.is_symlink():
            continue
        if entry.is_file() and entry.suffix.lower() in DATA_SUFFIXES:
            entries.append(entry)
        elif entry.is_dir() and (
            (entry / "trajectories").is_dir()
            or (entry / "report.json").is_file()
            or _is_train_dir(entry)
            or (depth > 1 and folder_entries(entry, depth - 1))
        ):
            entries.append(entry)
    return entries


def _is_train_dir(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or any(
        (path / stage / "metrics.jsonl").is_file() for stage in ("sft", "rl")
    )


def _columns(path: Path) -> set[str]:
    check_input(path)  # a FIFO named x.parquet is refused, not waited on by pyarrow
    if path.suffix.lower() == ".parquet":
        try:
            return set(pq.read_schema(path).names)
        except Exception as error:  # noqa: BLE001 - pyarrow raises several types for a broken file
            raise UserError(f"{path}: not a readable Parquet file ({one_line(error, path)})") from None
    row = first_row(path)
    return set(row) if row else set()


def read_report(path: Path) -> dict[str, Any] | None:
    """A JSON report, None when there is none; a damaged one is a UserError naming it."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not a readable report ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a report (a JSON object was expected)")
    return data


def plots_in(folder: Path, names: Iterable[str] = ()) -> list[Path]:
    found = [folder / name for name in names] if names else sorted(folder.glob(f"*{PLOT_SUFFIX}"))
    return [path for path in found if servable_plot(path)]


def servable_plot(path: Path) -> bool:
    """A PNG that is a regular file in its own folder: a link that leads out of it (to any file the user can read,
    e.g. ~/.ssh/id_rsa named plot.png) is not served, nor a FIFO, which would be waited on."""
    if path.suffix != PLOT_SUFFIX or not path.is_file():
        return False
    return path.resolve().parent == path.parent.resolve()


def relative_label(path: Path, base: Path) -> str:
    for root in (base, base.parent):
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def one_line(error: BaseException, path: Path) -> str:
    text = " ".join(str(error).split())[:300] or type(error).__name__
    return text if str(path) in text else f"{path}: {text}"


ONLY_IN_JOURNAL = "only_in_journal"  # a run's report key: its finished trajectories in no shard yet


def journal_note(artifact: Artifact) -> str | None:
    """The line saying that a run's trajectories only in its journal are not shown, for the page and the terminal."""
    count = (artifact.report or {}).get(ONLY_IN_JOURNAL) if artifact.kind == "run" else None
    if not count:
        return None
    return (
        f"{artifact.label}: {count} finished trajectories are only in its journal (a run stopped before its next "
        "shard), not shown or exported here; `agentdata inspect` counts them, `collect` resumed with the same --out "
        "moves them into a shard"
    )
