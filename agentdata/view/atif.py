"""`agentdata view --atif DIR`: the trajectories as Harbor's ATIF documents (traces/atif.py), one JSON file per
trajectory, chosen, laid out and redacted exactly as the STS export (view/sts.py) does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentdata.traces.atif import atif_document
from agentdata.view.api import ViewerData
from agentdata.view.sts import SessionFormat, StsSummary, write_sessions


def _atif_text(
    session_id: str, messages: list[dict[str, Any]], header: dict[str, Any], tools: list[dict[str, Any]] | None
) -> tuple[str, int]:
    document = atif_document(session_id, messages, header, tools)
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n", len(messages)


ATIF = SessionFormat("--atif", ".json", _atif_text)


def write_atif(
    data: ViewerData, out: Path, limit: int, where: Mapping[str, str] | None = None, secrets: str = "redact"
) -> StsSummary:
    """Every run, trajectory file and SFT set given, one ATIF file per exported row (see `write_sts`)."""
    return write_sessions(data, out, limit, where, secrets, ATIF)
