"""What the page asks for, as plain data: the server answers with it as JSON, the static export writes it.

Every answer is built from the catalog's artifacts, addressed by their keys and row numbers; no
request names a path, so nothing outside the artifacts given can be reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentdata.filter.config import DEFAULT_BAND
from agentdata.view import pages
from agentdata.view.artifacts import Artifact, servable_plot
from agentdata.view.catalog import Catalog
from agentdata.view.mask import Tokenizers, masked_tokens
from agentdata.view.query import Query, QueryError
from agentdata.view.render import sft_row_view, trajectory_view

# What a caller does to a row's source before any view of it is drawn: the static export redacts secrets there,
# since a view splits text (highlighted code, a mask's tokens) into pieces no secret pattern can match.
SourceFilter = Callable[[dict[str, Any]], dict[str, Any]]


class NotFound(KeyError):
    """No such artifact, row or problem here (the server answers 404)."""


class ViewerData:
    def __init__(
        self, catalog: Catalog, tokenizers: Tokenizers | None = None, band: tuple[float, float] = DEFAULT_BAND
    ):
        self.catalog = catalog
        self.tokenizers = tokenizers or Tokenizers()
        self.band = band
        self._summaries: dict[str, dict[str, Any]] = {}  # the artifacts never change while the viewer runs

    # ---------------------------------------------------------------- artifacts
    def artifact(self, key: str) -> Artifact:
        artifact = self.catalog.get(key)
        if artifact is None:
            raise NotFound(key)
        return artifact

    def artifacts(self) -> dict[str, Any]:
        return {"artifacts": [self.summary(artifact) for artifact in self.catalog]}

    def summary(self, artifact: Artifact) -> dict[str, Any]:
        if artifact.key not in self._summaries:
            self._summaries[artifact.key] = self._summary(artifact)
        return self._summaries[artifact.key]

    def _summary(self, artifact: Artifact) -> dict[str, Any]:
        data = artifact.as_dict()
        if artifact.has_rows:
            table = artifact.table()
            data["columns"] = table.describe()
            data["facets"] = table.facets()
            if artifact.is_trajectories:
                data["stats"] = table.stats()
        if artifact.kind == "pool":
            data["band"] = list(pages.artifact_band(artifact, self.band))
        if artifact.is_trajectories:
            data["band"] = list(self.band_of(artifact))
        data["link_list"] = [
            {"role": role.split(":")[0], "key": key, "label": self.artifact(key).label, "kind": self.artifact(key).kind}
            for role, key in artifact.links.items()
        ]
        data["has_report"] = artifact.report is not None
        data["notes"] = pages.notes(artifact)
        return data

    def band_of(self, artifact: Artifact) -> tuple[float, float]:
        """A profile's band is its pool's; any other run's is the viewer's --band."""
        for other in self.catalog:
            if other.kind == "pool" and other.links.get("profile") == artifact.key:
                return pages.artifact_band(other, self.band)
        return pages.artifact_band(artifact, self.band)

    # ---------------------------------------------------------------- lists and records
    def rows(self, key: str, params: Mapping[str, str]) -> dict[str, Any]:
        artifact = self.artifact(key)
        return artifact.table().page(Query.parse(params))

    def record(self, key: str, row: int, source_filter: SourceFilter | None = None) -> dict[str, Any]:
        record = self._source(key, row, source_filter)
        if "trajectory" in record:
            return trajectory_view(record["trajectory"], row)
        if "sft_row" in record:
            return sft_row_view(record["sft_row"], row)
        return {"row": row, "problem": record["problem"]}

    def mask(self, key: str, row: int, source_filter: SourceFilter | None = None) -> dict[str, Any]:
        artifact = self.artifact(key)
        record = self._source(key, row, source_filter)
        if "trajectory" in record:
            trajectory = record["trajectory"]
            values = {"messages": trajectory.messages, "tools": trajectory.tools, "format": trajectory.format}
        elif "sft_row" in record:
            values = record["sft_row"]
        else:
            raise QueryError(f"{artifact.label}: a problem has no conversation to train on")
        return masked_tokens(self.tokenizers.get(), values, artifact.path, row + 1)

    def _source(self, key: str, row: int, source_filter: SourceFilter | None) -> dict[str, Any]:
        """The row as its table holds it ({"trajectory"}, {"sft_row"} or {"problem"}), through `source_filter`."""
        try:
            record = self.artifact(key).table().record(row)
        except KeyError:
            raise NotFound(f"{key}/{row}") from None
        return source_filter(record) if source_filter else record

    # ---------------------------------------------------------------- pages
    def problem(self, key: str, problem_id: str) -> dict[str, Any]:
        artifact = self.artifact(key)
        if not artifact.is_trajectories:
            raise QueryError(f"{artifact.label}: a problem's samples are shown from a run or trajectory file")
        reasons = pages.pool_drop_reasons(self.catalog, artifact)
        try:
            return pages.problem_page(artifact, problem_id, self.band_of(artifact), reasons.get(problem_id))
        except KeyError:
            raise NotFound(problem_id) from None

    def curate(self, key: str) -> dict[str, Any]:
        return pages.curate_page(self.artifact(key))

    def train(self, key: str) -> dict[str, Any]:
        return pages.train_page(self.artifact(key))

    def evaluation(self, key: str) -> dict[str, Any]:
        artifact = self.artifact(key)
        children = {child.path.resolve(): child.key for child in self.catalog if child.parent == artifact.key}
        results = []
        for result in (artifact.report or {}).get("results") or []:
            run = Path(str(result.get("run_dir", "")))
            candidates = [run, artifact.path / run.relative_to(run.anchor)] if run.is_absolute() else [run]
            candidates.append(artifact.path / "runs" / Path(*run.parts[-3:]) if len(run.parts) >= 3 else run)
            found = next((children[c.resolve()] for c in candidates if c.exists() and c.resolve() in children), None)
            results.append({**result, "artifact": found})
        return {"results": results, "settings": (artifact.report or {}).get("settings")}

    def compare(self, first: str, second: str, show: str = "flipped", limit: int | None = 500) -> dict[str, Any]:
        return pages.compare_page(self.artifact(first), self.artifact(second), show, limit)

    def plot(self, key: str, number: int) -> Path:
        artifact = self.artifact(key)
        if not 0 <= number < len(artifact.plots) or not servable_plot(artifact.plots[number]):  # as it is now
            raise NotFound(f"{key}/plot/{number}")
        return artifact.plots[number]
