"""Settings: dataclasses whose fields document themselves, checked once, read from flags, files and code.

Every stage's settings are a dataclass whose fields carry their documentation:

    max_turns: int = field(default=8, metadata={"help": "Model turns per trajectory.", "range": "[1, inf)"})

- `help` (required) is what `--help`, `docs/settings.md` and errors show.
- `range` (every number has one) is an interval, `[0, 1]`, `(0, 1]`, `[1, inf)`; it is checked
  once, when the dataclass is built (`check_fields` in `__post_init__`). NaN is never accepted.
- `choices` lists the values a text setting takes.
- Off is None: `null` in a file, `none` on the command line, and the field's help says what off
  means. `none_alias` names an older spelling of off that still works (`0` for "no cap").
- `split: False` keeps a repeated option's values whole (file paths may hold commas); `append: True`
  makes a repeated flag add to the list below it instead of replacing it.
- `flag` / `aliases` rename the generated command-line option; `cli: False` leaves a field off
  the command line (still settable from a `--config` file); `override_only: True` gives it no flag, only
  its `NAME=VALUE` override (a command's --help keeps its everyday flags, at most 25).
- `parse: "module:function"` reads the field's own text form, from a flag, an override or a file
  (`domain_mix=math=0.5,code=0.5`).
- `key_flags: {KEY: HELP}` on a mapping gives one of its keys a flag of its own (`--model NAME` sets
  `engine_options`' `model`, over `--engine-option model=...` and the file's mapping).
- `extra: "module:Type"` makes a dict field gather the names only that type knows (the stages' `trl`
  mapping takes any field of TRL's SFTConfig / GRPOConfig).
- `was: (OLD_NAME,)` names a field's names of older releases (`teacher` for the rollout's `model`): a file,
  override or `build` that uses one stops with one line naming the new name (no alias).
- `ends: (LOW_NAME, HIGH_NAME)` on a band names its two one-end names of 0.4: used, each stops with one
  line naming the band (no alias).

A dataclass field whose type is another settings dataclass composes it (`loop: LoopConfig`):
its fields stay flat on the command line and in records (`--max-tool-calls`, `"max_tool_calls"`), so
`flatten` and `build` convert between the nested objects and the flat names. Value types with
rules of their own (`Band`, `CountBand`) are in `values.py`; what a field declares is `fields.py`;
a given value made its field's type, checked, and a dataclass built from flat values are `build.py`;
a command's settings as sections of dataclasses, fed by layers (defaults < file < flags or code),
are `sections.py`; files are read by `files.py`.
This package imports no other part of agentdata but `errors` (and `inputs` to read a file).
"""

from agentdata.settings.build import (
    Range,
    build,
    check_fields,
    coerce,
    composed_names,
    field_range,
    flat_names,
    flatten,
    unnest,
)
from agentdata.settings.fields import (
    NONE_WORD,
    SHOWN_CHARS,
    SettingError,
    SettingValue,
    cut,
    default_of,
    field_types,
    gone,
    is_settings,
    is_value_type,
    leaf_fields,
    renamed_names,
    unknown_setting,
    value_type,
)
from agentdata.settings.files import MAX_SETTINGS_BYTES, MAX_SETTINGS_VALUES, read_settings_file
from agentdata.settings.sections import Append, Extra, Given, Layer, Section, Sections
from agentdata.settings.values import Band, CountBand

__all__ = [
    "MAX_SETTINGS_BYTES",
    "MAX_SETTINGS_VALUES",
    "NONE_WORD",
    "SHOWN_CHARS",
    "Append",
    "Band",
    "CountBand",
    "Extra",
    "Given",
    "Layer",
    "Range",
    "Section",
    "Sections",
    "SettingError",
    "SettingValue",
    "build",
    "check_fields",
    "coerce",
    "composed_names",
    "cut",
    "default_of",
    "field_range",
    "field_types",
    "flat_names",
    "flatten",
    "gone",
    "is_settings",
    "is_value_type",
    "leaf_fields",
    "read_settings_file",
    "renamed_names",
    "unknown_setting",
    "unnest",
    "value_type",
]
