"""Was the pool profiled the way GRPO will sample? Pass rates hold only for the settings that made them.

A problem solved 2 of 4 times at temperature 0.7 with 1,024 tokens may be solved never at 1.0
with 512: the band is only right when the profile ran the agent loop as the GRPO rollouts will
(`agentdata.agent.config.rollout_loop()`: temperature 1.0). `filter` records the profile's loop
settings in the pool file's Parquet metadata (key `agentdata.profile`) and in its report, and
warns when they differ from GRPO's defaults; `train` reads them back and warns when they differ
from the GRPO settings it is about to use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata.agent.config import LoopConfig, rollout_loop
from agentdata.outputs import companion

POOL_METADATA_KEY = "agentdata.profile"
# The loop settings a pass rate depends on: sampling and tools (not where the sandbox runs).
MATCHED_KEYS = (
    "protocol",
    "temperature",
    "top_p",
    "max_new_tokens",
    "max_tool_calls",
    "max_turns",
    "tools",
    "tool_output_chars",
    "tool_timeout",
    "system_prompt",
)


def loop_settings(loop: LoopConfig) -> dict[str, Any]:
    return {key: _plain(getattr(loop, key)) for key in MATCHED_KEYS}


def grpo_default_loop(model: str | None = None) -> dict[str, Any]:
    """The loop GRPO's rollouts from `model` run with when no setting is given (its protocol: the model's own,
    recorded in its dir when agentdata trained it, else the default)."""
    return loop_settings(rollout_loop().for_model(model))


def loop_differences(profiled: dict[str, Any], grpo: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Settings recorded for both that differ (a key an older pool did not record is not compared)."""
    return {
        key: (profiled[key], grpo[key])
        for key in MATCHED_KEYS
        if key in profiled and key in grpo and _plain(profiled[key]) != _plain(grpo[key])
    }


def differences_text(differences: dict[str, tuple[Any, Any]]) -> str:
    """`temperature 0.7 (GRPO: 1.0), max_new_tokens 1024 (GRPO: 512)`."""
    return ", ".join(
        f"{key} {_shown(profiled)} (GRPO: {_shown(grpo)})" for key, (profiled, grpo) in differences.items()
    )


def profile_metadata(student: str, k: int, loop: LoopConfig, fingerprint: str | None) -> dict[str, Any]:
    """What the pool file records of the profile that chose it."""
    return {"student": student, "k": k, "model_fingerprint": fingerprint, "loop": loop_settings(loop)}


def recorded_profile(pool: str | Path) -> dict[str, Any] | None:
    """The profile a pool file records (Parquet metadata, else the `<pool>.report.json` beside it); None if none."""
    from agentdata.publish.layout import data_file

    given = Path(pool)
    path = data_file(given)  # a dataset folder's data file
    if path.suffix == ".parquet" and path.is_file():
        import pyarrow.parquet as pq

        try:
            metadata = pq.read_schema(path).metadata or {}
        except (OSError, ValueError):
            metadata = {}
        if POOL_METADATA_KEY.encode() in metadata:
            return json.loads(metadata[POOL_METADATA_KEY.encode()])
    report = companion(given, ".report.json")
    if report.is_file():
        try:
            recorded = json.loads(report.read_text(encoding="utf-8")).get("profile")
        except (OSError, ValueError):
            return None
        return recorded if isinstance(recorded, dict) else None
    return None


def _plain(value: Any) -> Any:
    """JSON-normalised so that values compare as values (1 == 1.0, a tuple == a list)."""
    return json.loads(json.dumps(value, default=str))


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)
