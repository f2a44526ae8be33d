"""Every TRL field reachable: a stage's config-file section may set any `GRPOConfig` /
`SFTConfig` field, beside agentdata's own stage settings.

`split_section` sorts one section (`rl:` or `sft:`) into the stage's own fields and TRL-only
fields, and refuses a key that is neither, naming it and the closest valid keys (difflib), so
a misspelling never silently does nothing. `trl_arguments` builds TRL's config from what the
stage computes, with the TRL-only fields the user set on top (theirs win: they asked for it).
`write_trl_settings` records the effective TRL settings in the run dir.

The TRL-only fields travel in the stage config's `trl` mapping. A TRL field that the stage
computes from one of its own settings (`output_dir` from `out`, GRPO's
`max_completion_length` from `max_new_tokens`, ...) is refused there, naming the setting to
use instead: one name per setting, and nothing the user sets is silently overwritten.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path
from typing import Any

from agentdata.errors import UserError

TRL_SETTINGS_FILE = "trl_config.json"


def field_names(config_type: type) -> set[str]:
    return {item.name for item in dataclasses.fields(config_type) if item.init}


def stage_names(stage_type: type) -> set[str]:
    """A stage's own setting names: its fields and, flat, those of composed settings (`loop`)."""
    from agentdata.settings import flat_names

    return field_names(stage_type) | set(flat_names(stage_type))


def split_section(
    section: dict[str, Any], stage_type: type, trl_type: type, where: str, also_valid: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stage settings, TRL-only settings) of one section; an unknown key is a UserError.

    A name both define (`learning_rate`, `temperature`) is the stage's: it sets TRL's from it.
    `also_valid` are keys the section may hold that were taken out before (the closed loop's):
    they count as known, so a misspelling of one is told its closest name too.
    """
    own, trl = stage_names(stage_type) | also_valid, field_names(trl_type)
    unknown = sorted(key for key in section if key not in own and key not in trl)
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, sorted(own | trl), n=3, cutoff=0.6)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else f"; valid keys are the fields of {stage_type.__name__} and TRL's {trl_type.__name__}"
        )
        raise UserError(f"{where}: unknown setting {key!r}{hint}")
    stage = {key: value for key, value in section.items() if key in own}
    return stage, {key: value for key, value in section.items() if key not in own}


def check_trl_overrides(config: Any, computed_from: dict[str, str]) -> None:
    """Refuse a `trl` mapping that is not one, or that sets what the stage sets (`computed_from`:
    TRL field -> the stage setting it comes from); a ValueError, as a config's `__post_init__` raises."""
    if not isinstance(config.trl, dict):
        raise ValueError(f"trl must be a mapping of TRL field names to values, got {type(config.trl).__name__}")
    own = stage_names(type(config))
    for key in config.trl:
        if key in computed_from:
            raise ValueError(
                f"{key} is computed from `{computed_from[key]}` by agentdata: set {computed_from[key]} instead"
            )
        if key in own:
            raise ValueError(f"trl: {key} is a setting of the stage itself: set it directly, not under trl")


def trl_arguments(trl_type: type, computed: dict[str, Any], overrides: dict[str, Any]) -> Any:
    """TRL's config from the stage's computed arguments with the user's TRL-only fields on top."""
    unknown = sorted(set(overrides) - field_names(trl_type))
    if unknown:
        raise UserError(f"{unknown[0]!r} is not a field of TRL's {trl_type.__name__}")
    try:
        return trl_type(**{**computed, **overrides})
    except (TypeError, ValueError) as error:
        raise UserError(f"TRL's {trl_type.__name__} refused the settings {sorted(overrides)}: {error}") from None


def write_trl_settings(arguments: Any, out_dir: str | Path) -> Path:
    """The effective TRL settings (every field, after TRL's own post-processing) as JSON in the run dir."""
    from agentdata.records import write_json

    values = json.loads(json.dumps(arguments.to_dict(), default=str))
    return write_json(Path(out_dir) / TRL_SETTINGS_FILE, values)
