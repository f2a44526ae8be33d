"""The end of every command: its result as tables on the terminal, or as one JSON document.

A stage returns a result with `as_dict()`; the command hands it here with the function that
draws it (`cli/views.py`):

    show(summary, as_json, views.collect_views)

With `--json` the document is `as_dict()` and nothing else reaches stdout, so it stays
parseable; without, each renderable the views give is printed in turn, a line of text (a str, rich
markup) as one line that the terminal may wrap but rich never folds, so a log keeps it whole. A result whose `empty`
says why nothing was written ends the command with that one error line (exit 2) after its
output either way, naming its report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rich.console import Console, RenderableType

from agentdata.cli.console import console as stdout_console
from agentdata.cli.console import print_json
from agentdata.errors import UserError


class Result(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


Views = Callable[[Any], Iterable[RenderableType]]


def show(result: Result, as_json: bool, views: Views, console: Console = stdout_console) -> None:
    """Print `result` on `console` (see the module doc); raise a UserError when it is `empty`."""
    if as_json:
        print_json(result.as_dict())
    else:
        for renderable in views(result):
            console.print(renderable, soft_wrap=isinstance(renderable, str))
    empty = getattr(result, "empty", None)
    if empty:
        report = getattr(result, "report", None)
        raise UserError(f"{empty} (report: {report})" if report else empty)
