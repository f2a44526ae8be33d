"""A list the viewer pages through: an in-memory index of the scalar columns, the rows themselves on disk.

The index (one row per record: ids, counts, flags, a short preview of the question) is built once
when the artifact opens, with polars; filters and sorts run on it in memory. Full text (messages,
code, tool output) stays on disk and is scanned only for a search, and a record is read whole
only when it is opened, from its own shard.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from agentdata.filter.steps import PassRateBand
from agentdata.view.query import Query, QueryError

ROW = "_row"  # the record's number in its artifact: stable for the life of the server
FACET_VALUES = 40  # the most values a category's menu lists (the rest are still searchable by typing)
PREVIEW_CHARS = 160


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "category" (a menu), "bool", "number" (min/max), "text" (shown, not filtered)
    label: str = ""


class RowTable:
    """`index`: a frame with ROW and the columns; `search(needle)` returns the ROW numbers whose full text
    holds the needle; `fetch(row)` returns one record whole."""

    origin = "built"  # where the index came from, as the terminal says: built now, or read back (a run dir's)

    def __init__(
        self,
        index: pl.DataFrame,
        columns: Sequence[Column],
        search: Callable[[str], pl.Series],
        fetch: Callable[[int], dict[str, Any]],
    ):
        self.index = index
        self.columns = {column.name: column for column in columns if column.name in index.columns}
        self._search = search
        self._fetch = fetch
        self._facets: dict[str, list[list[Any]]] | None = None

    pending = False  # nothing to keep beside the artifact after the URL (a run dir's table: see `keep`)

    def keep(self, stop: threading.Event, search: bool = True) -> None:
        """Write what makes the next open and the search fast, after the URL is printed: nothing for most lists."""

    def __len__(self) -> int:
        return self.index.height

    def search(self, needle: str) -> pl.Series:
        """The row numbers whose full text holds `needle` (rows a later one replaced among them)."""
        return self._search(needle)

    def describe(self) -> list[dict[str, str]]:
        return [{"name": c.name, "kind": c.kind, "label": c.label or c.name} for c in self.columns.values()]

    def facets(self) -> dict[str, list[list[Any]]]:
        """Each category's values with their counts, most common first (the filter menus)."""
        if self._facets is None:
            self._facets = {
                name: [
                    list(pair)
                    for pair in self.index.group_by(name)
                    .len()
                    .sort(["len", name], descending=[True, False], nulls_last=True)
                    .head(FACET_VALUES)
                    .rows()
                ]
                for name, column in self.columns.items()
                if column.kind in ("category", "bool")
            }
        return self._facets

    def select(self, query: Query) -> pl.DataFrame:
        """The index rows the query keeps, in its order."""
        unknown = sorted(query.columns() - set(self.columns))
        if unknown:
            raise QueryError(f"{unknown[0]}: no such column here (columns: {', '.join(self.columns)})")
        frame = self.index
        conditions = [self._equals(name, value) for name, value in query.equals.items()]
        conditions += [self._bound(name, value, "min") for name, value in query.minimum.items()]
        conditions += [self._bound(name, value, "max") for name, value in query.maximum.items()]
        if query.band:
            conditions.append(PassRateBand(query.band).expression())  # filter's own band step
        if conditions:
            frame = frame.filter(pl.all_horizontal(conditions).fill_null(False))
        if query.search:
            frame = frame.filter(pl.col(ROW).is_in(self.search(query.search).implode()))
        if query.sort:
            frame = frame.sort(query.sort, descending=query.descending, nulls_last=True, maintain_order=True)
        return frame

    def page(self, query: Query) -> dict[str, Any]:
        frame = self.select(query)
        rows = frame.slice(query.offset, query.limit)
        return {"total": frame.height, "offset": query.offset, "rows": rows.to_dicts()}

    def record(self, row: int) -> dict[str, Any]:
        if not 0 <= row < self.row_count():
            raise KeyError(row)
        return self._fetch(row)

    def row_count(self) -> int:
        """Rows on disk, including those a later row with the same id replaced."""
        return int(self.index[ROW].max()) + 1 if self.index.height else 0

    def _equals(self, name: str, value: str) -> pl.Expr:
        column = self.columns[name]
        if column.kind == "bool":
            if value not in ("true", "false"):
                raise QueryError(f"{name}: true or false, got {value[:40]!r}")
            return pl.col(name) == (value == "true")
        if column.kind == "number":
            return pl.col(name) == _as_number(name, value)
        if column.kind != "category":
            raise QueryError(f"{name}: this column cannot be filtered by value")
        return pl.col(name).is_null() if value == "(none)" else pl.col(name).cast(pl.String) == value

    def _bound(self, name: str, value: float, side: str) -> pl.Expr:
        if self.columns[name].kind != "number":
            raise QueryError(f"{side}.{name}: only a number column has bounds")
        return pl.col(name) >= value if side == "min" else pl.col(name) <= value


def _as_number(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise QueryError(f"{name}: {value[:40]!r} is not a number") from None


def needle_forms(needle: str) -> set[str]:
    """The needle, and the needle as JSON writes it inside a string: text stored as JSON (tool-call arguments)
    is matched in that form too."""
    return {needle, json.dumps(needle)[1:-1]}


def contains(expression: pl.Expr, needle: str) -> pl.Expr:
    """Case-insensitive literal match of either form of the needle."""
    pattern = "(?i)" + "|".join(re.escape(form) for form in sorted(needle_forms(needle)))
    return expression.str.contains(pattern).fill_null(False)


def preview(expression: pl.Expr) -> pl.Expr:
    """The start of a long text, for a list cell (the page shows it on one line)."""
    return expression.str.slice(0, PREVIEW_CHARS)
