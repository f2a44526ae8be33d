"""Every TRL field reachable: a stage's config-file section may set any `GRPOConfig` /
`SFTConfig` field, beside agentdata's own stage settings.

The settings path sorts a section's keys (`agentdata.settings.sections`): a stage's own name is
its field, a name only TRL's config has goes into the stage's `trl` mapping (its field's
metadata `extra` names the TRL type), and a key that is neither is refused, naming it and the
closest valid keys, so a misspelling never silently does nothing. `trl_arguments` builds TRL's
config from what the machine gives (`machine_arguments`) and what the stage computes, with the
TRL-only fields the user set on top (theirs win: they asked for it). `write_trl_settings` records
the effective TRL settings in the run dir.

The TRL-only fields travel in the stage config's `trl` mapping. A TRL field that the stage
computes from one of its own settings (`output_dir` from `out`, GRPO's
`max_completion_length` from `max_new_tokens`, ...) is refused there, naming the setting to
use instead: one name per setting, and nothing the user sets is silently overwritten.
"""

from __future__ import annotations

import dataclasses
import json
import typing
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
    check_trl_types(config)


def check_trl_types(config: Any) -> None:
    """Each value of the `trl` mapping is of the type TRL's config declares for it (`max_grad_norm: "big"`
    would train, then crash at the first clipping): a SettingError naming the field, before any work."""
    if not config.trl:
        return
    from agentdata.registry import load_object
    from agentdata.settings import SettingError
    from agentdata.settings.types import describe, fits

    (spec,) = [item.metadata["extra"] for item in dataclasses.fields(config) if item.name == "trl"]
    hints = typing.get_type_hints(load_object(spec))
    for key, value in config.trl.items():
        if key in hints and not fits(value, hints[key]):
            raise SettingError(key, value, f"expected {describe(hints[key])} (TRL's {spec.partition(':')[2]})")


def machine_arguments() -> dict[str, Any]:
    """TRL fields that follow the machine rather than a setting: batches are put in pinned memory only
    where an accelerator can use it (on a CPU-only machine torch's DataLoader warns that it cannot)."""
    import torch

    return {"dataloader_pin_memory": torch.accelerator.is_available()}


def trl_arguments(trl_type: type, computed: dict[str, Any], overrides: dict[str, Any]) -> Any:
    """TRL's config from the machine's and the stage's computed arguments, the user's TRL-only fields on top."""
    unknown = sorted(set(overrides) - field_names(trl_type))
    if unknown:
        raise UserError(f"{unknown[0]!r} is not a field of TRL's {trl_type.__name__}")
    try:
        return trl_type(**{**machine_arguments(), **computed, **overrides})
    except (TypeError, ValueError) as error:
        raise UserError(f"TRL's {trl_type.__name__} refused the settings {sorted(overrides)}: {error}") from None


def write_trl_settings(arguments: Any, out_dir: str | Path) -> Path:
    """The effective TRL settings (every field, after TRL's own post-processing) as JSON in the run dir."""
    from agentdata.records import write_json

    values = json.loads(json.dumps(arguments.to_dict(), default=str))
    return write_json(Path(out_dir) / TRL_SETTINGS_FILE, values)
