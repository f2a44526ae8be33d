"""The catalog of a viewer: every artifact opened (its table, its report, its plots) and those it leads to."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from agentdata.agent.rundir import RunDir
from agentdata.agent.shard_status import read_sharded
from agentdata.errors import UserError
from agentdata.view.artifacts import (
    ONLY_IN_JOURNAL,
    Artifact,
    detect,
    folder_entries,
    one_line,
    plots_in,
    read_report,
    relative_label,
)
from agentdata.view.search_index import Cancelled
from agentdata.view.sets import pool_table, problems_table, sft_table
from agentdata.view.trajectories import trajectory_table

log = logging.getLogger("agentdata.view")


class Catalog:
    """The artifacts of one viewer, in the order found; a path given twice (or reached twice) is one artifact."""

    def __init__(self) -> None:
        self.artifacts: list[Artifact] = []
        self._by_path: dict[Path, Artifact] = {}

    def __iter__(self):
        return iter(self.artifacts)

    def get(self, key: str) -> Artifact | None:
        return next((artifact for artifact in self.artifacts if artifact.key == key), None)

    def add(self, path: Path, label: str | None = None, parent: str | None = None) -> Artifact:
        resolved = path.resolve() if path.exists() else path.absolute()
        if resolved in self._by_path:
            return self._by_path[resolved]
        artifact = Artifact(f"a{len(self.artifacts)}", label or str(path), path, "damaged", parent=parent)
        self.artifacts.append(artifact)
        self._by_path[resolved] = artifact
        try:
            self._open(artifact)
        except (UserError, OSError, ValueError) as error:  # a file that is not what it should be: its line
            artifact.kind, artifact.error, artifact.rows = "damaged", one_line(error, path), None
        except Exception as error:  # noqa: BLE001 - pyarrow and polars raise many types for a broken file
            log.debug("opening %s", path, exc_info=True)
            artifact.kind, artifact.error, artifact.rows = "damaged", one_line(error, path), None
        return artifact

    def _open(self, artifact: Artifact) -> None:
        path = artifact.path
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
        artifact.kind = detect(path)
        OPENERS[artifact.kind](self, artifact)

    def children(self, artifact: Artifact, role: str, paths: Iterable[Path]) -> None:
        """Open what `artifact` leads to; a role that can be many (runs, stages, items) is numbered."""
        for number, path in enumerate(paths):
            label = f"{artifact.label} · {relative_label(path, artifact.path)}"
            child = self.add(path, label=label, parent=artifact.key)
            artifact.links[f"{role}:{number}" if role in MANY else role] = child.key

    def keep(self, stop: threading.Event | None = None, search: bool = True) -> None:
        """What each table keeps beside its artifact for the next open (a run dir's index, its search index): run
        after the URL is printed, in the background, while the page is served; `stop` set abandons it."""
        stop = stop or threading.Event()
        for artifact in self.artifacts:
            if stop.is_set():
                return
            if artifact.rows is None or not artifact.rows.pending:
                continue
            try:
                artifact.rows.keep(stop, search)
            except Cancelled:
                return
            except Exception as error:  # noqa: BLE001 - a shard damaged meanwhile: one line; the list still serves
                log.warning("%s (its index is not kept beside it)", one_line(error, artifact.path))
                log.debug("keeping %s", artifact.path, exc_info=True)


def open_artifacts(paths: Sequence[Path | str]) -> Catalog:
    """Every path given (and what each leads to), opened: each table's index built, each report read."""
    catalog = Catalog()
    for path in paths:
        catalog.add(Path(path))
    return catalog


MANY = ("run", "stage", "item")


def report_beside(path: Path) -> Path:
    """`sft.parquet` -> `sft.report.json` (curate, stitch and filter write their report there)."""
    return path.with_name(path.stem + ".report.json")


def open_trajectories(catalog: Catalog, artifact: Artifact) -> None:
    artifact.rows = trajectory_table(artifact.path)
    if artifact.kind == "run":
        sharded = read_sharded(artifact.path)  # its parts read as one run, and which are not finished said
        if sharded is not None:
            artifact.report = {**(RunDir(artifact.path).manifest() or {}), "sharded": sharded.as_dict()}
        else:
            artifact.report = read_report(artifact.path / "manifest.json")
            stats = read_report(artifact.path / "stats.json")
            if stats is not None:
                artifact.report = {**(artifact.report or {}), "stats": stats}
        unshown = only_in_journal(artifact.path)
        if unshown:
            artifact.report = {**(artifact.report or {}), ONLY_IN_JOURNAL: unshown}


def only_in_journal(run: Path) -> int:
    """Finished trajectories a stopped (or still running) collect left only in its journal, in no shard yet: the
    viewer lists shards, so they are not shown (nor exported); `inspect` counts them, `collect` resumed moves them
    into a shard. Read only where a journal is there."""
    run_dir = RunDir(run)
    return len(run_dir.journaled()) if run_dir.journal_paths() else 0


def open_sft(catalog: Catalog, artifact: Artifact) -> None:
    artifact.rows = sft_table(artifact.path)
    artifact.report = read_report(report_beside(artifact.path))
    if not artifact.report:
        return
    rejects = artifact.report.get("rejects")
    if rejects and Path(rejects).exists():
        catalog.children(artifact, "rejects", [Path(rejects)])
    runs = sorted({Path(shard).parent.parent for shard in artifact.report.get("shards") or []})
    catalog.children(artifact, "run", [run for run in runs if (run / "trajectories").is_dir()])


def open_pool(catalog: Catalog, artifact: Artifact) -> None:
    artifact.report = read_report(report_beside(artifact.path))
    report = artifact.report or {}
    questions = None
    profile = Path(report["profile_dir"]) if report.get("profile_dir") else None
    if profile is not None and (profile / "trajectories").is_dir():
        catalog.children(artifact, "profile", [profile])
        child = catalog.get(artifact.links["profile"])
        if child is not None and child.kind == "run":
            questions = child.table().index.select("problem_id", "question")
    rejects = (
        Path(report["rejects"])
        if report.get("rejects")
        else artifact.path.with_name(artifact.path.stem + ".rejects.parquet")
    )
    artifact.rows = pool_table(artifact.path, rejects if rejects.is_file() else None, questions)
    artifact.plots = plots_in(artifact.path.parent, [artifact.path.stem + ".pass_rate.png"])


def open_train(catalog: Catalog, artifact: Artifact) -> None:
    """A stage dir (metrics.jsonl) or `--stage all`'s OUT (sft/ and rl/ stage dirs)."""
    path = artifact.path
    if (path / "metrics.jsonl").is_file():
        artifact.plots = plots_in(path / "plots")
        steps = sorted(path.glob("eval/step-*"))
        catalog.children(artifact, "run", [step for step in steps if (step / "trajectories").is_dir()])
        return
    stages = [path / stage for stage in ("sft", "rl") if (path / stage / "metrics.jsonl").is_file()]
    catalog.children(artifact, "stage", stages)
    for name in ("pool.parquet", "demo_sft.parquet"):
        if (path / name).is_file():
            catalog.children(artifact, name.split(".")[0], [path / name])


def open_eval(catalog: Catalog, artifact: Artifact) -> None:
    artifact.report = read_report(artifact.path / "report.json")
    artifact.plots = plots_in(artifact.path)
    runs = sorted(run.parent for run in artifact.path.glob("runs/*/*/*/trajectories") if run.is_dir())
    catalog.children(artifact, "run", runs)


def open_folder(catalog: Catalog, artifact: Artifact) -> None:
    """A folder of artifacts (runs/quickstart): each one it holds, opened as if given."""
    catalog.children(artifact, "item", folder_entries(artifact.path))


def open_problems(catalog: Catalog, artifact: Artifact) -> None:
    artifact.rows = problems_table(artifact.path)


OPENERS = {
    "run": open_trajectories,
    "trajectories": open_trajectories,
    "sft": open_sft,
    "pool": open_pool,
    "train": open_train,
    "eval": open_eval,
    "problems": open_problems,
    "folder": open_folder,
}
