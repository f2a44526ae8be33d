"""`agentdata eval` (not built yet)."""

from agentdata.cli.common import not_built


def command() -> None:
    """Not built yet."""
    not_built("eval")
