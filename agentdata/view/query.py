"""One list request: filters, a search, a sort and a page, read from the URL's query string.

    ?correct=false&finish_reason=answer          a category (or true/false) equals a value
    ?min.num_tool_calls=1&max.num_tool_calls=3   a number within bounds (both ends included)
    ?band=0.2,0.8                                 pass rate inside the band, ends exclusive (filter's rule)
    ?q=range(12)                                  full text (question, code, tool output), case-insensitive
    ?sort=completion_tokens&desc=1&offset=50&limit=50

A bad value is a `QueryError` naming the parameter (the server answers 400 with that one line);
which columns exist is the table's business (`RowTable.page` checks the names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentdata.settings import Band

PAGE_SIZE = 50
MAX_PAGE = 500
MAX_SEARCH_CHARS = 200
MAX_OFFSET = 2**32  # more rows than any table holds (its row numbers are 32-bit), far below what a slice overflows at
RESERVED = {"q", "sort", "desc", "offset", "limit", "band"}


class QueryError(ValueError):
    """A request the viewer cannot answer: one line naming the parameter."""


@dataclass(frozen=True)
class Query:
    equals: dict[str, str] = field(default_factory=dict)
    minimum: dict[str, float] = field(default_factory=dict)
    maximum: dict[str, float] = field(default_factory=dict)
    band: Band | None = None
    search: str = ""
    sort: str | None = None
    descending: bool = False
    offset: int = 0
    limit: int = PAGE_SIZE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Query:
        equals: dict[str, str] = {}
        minimum: dict[str, float] = {}
        maximum: dict[str, float] = {}
        for name, value in params.items():
            if name in RESERVED or value == "":
                continue
            if name.startswith(("min.", "max.")):
                bound = minimum if name.startswith("min.") else maximum
                bound[name[4:]] = _number(name, value)
            else:
                equals[name] = value
        search = params.get("q", "").strip()
        if len(search) > MAX_SEARCH_CHARS:
            raise QueryError(f"q: a search of at most {MAX_SEARCH_CHARS} characters")
        return cls(
            equals=equals,
            minimum=minimum,
            maximum=maximum,
            band=_band(params.get("band", "")),
            search=search,
            sort=params.get("sort") or None,
            descending=params.get("desc", "") in ("1", "true"),
            offset=int(_number("offset", params.get("offset", "0"), whole=True, low=0, high=MAX_OFFSET)),
            limit=int(_number("limit", params.get("limit", str(PAGE_SIZE)), whole=True, low=1, high=MAX_PAGE)),
        )

    def columns(self) -> set[str]:
        """Every column the query names (the table checks they exist)."""
        named = set(self.equals) | set(self.minimum) | set(self.maximum)
        return named | ({self.sort} if self.sort else set()) | ({"pass_rate"} if self.band else set())

    def as_params(self) -> dict[str, Any]:
        """The query back as URL parameters (the static export's pages carry them the same way)."""
        params: dict[str, Any] = dict(self.equals)
        params.update({f"min.{name}": value for name, value in self.minimum.items()})
        params.update({f"max.{name}": value for name, value in self.maximum.items()})
        if self.band:
            params["band"] = f"{self.band[0]},{self.band[1]}"
        if self.search:
            params["q"] = self.search
        if self.sort:
            params.update(sort=self.sort, desc=int(self.descending))
        return params


def _number(name: str, text: str, whole: bool = False, low: float | None = None, high: float | None = None) -> float:
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise QueryError(f"{name}: {text[:40]!r} is not a {'whole ' if whole else ''}number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise QueryError(f"{name}: {text[:40]!r} is not a finite number")
    if (low is not None and value < low) or (high is not None and value > high):
        raise QueryError(f"{name}: {value} is outside [{low}, {high}]")
    return value


def _band(text: str) -> Band | None:
    """LO,HI as `filter` takes its band (the one Band type), both ends within [0, 1]."""
    if not text:
        return None
    try:
        band = Band.parse(text)
    except ValueError as error:
        raise QueryError(f"band: {text[:40]!r}: {error}") from None
    if not (0 <= band.low and band.high <= 1):
        raise QueryError(f"band: {text[:40]!r}: both ends within [0, 1]")
    return band
