"""The `KEY=VALUE` dialect of every settings command, and `--print-config`: override words, never a flag's value.

    agentdata train --config train.yaml rl.max_steps=3 sft.learning_rate=2e-5

A positional `KEY=VALUE` sets a setting the way a `--config` file does (`rl.max_steps=3` is the file's
`rl:` section's `max_steps: 3`; a name without a section sets every section having it), as verl's and
torchtune's Hydra-style overrides are typed. VALUE is JSON (`3`, `true`, `[1, 2]`, `null`) or else text. The
command class (`SettingsCommand`, cli/options.py) takes the words out of the arguments before click parses the
rest; here they are read as keys and values. Values come from: the defaults < the file < overrides < flags. A key
no section knows is one line naming the closest real keys; a key given twice is one line, as in a file.
`experiment` takes the same words over its recipe's base (with a recipe's keys).

`--print-config` prints the resolved tree, each value with where it came from (default, file, override or
flag), and runs nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import typer

from agentdata.errors import UserError
from agentdata.settings import Given, Layer, Sections, cut, flatten, unknown_setting

OVERRIDE = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*=")
META_KEY = "agentdata.overrides"
PRINT_CONFIG_HELP = (
    "Print the resolved settings and where each value came from (default, file, override, flag); run nothing."
)
OVERRIDE_MARK = "="  # the `where` of an override ends so: `rl.max_steps=` (SettingError writes `rl.max_steps=0`)


def override_key(text: str) -> str:
    """The key of a `KEY=VALUE` word, `-` read as `_`."""
    return text.partition("=")[0].replace("-", "_")


def json_or_text(raw: str, where: str) -> Any:
    """VALUE of KEY=VALUE: JSON (`3`, `true`, `{"a": 1}`) or else the text itself."""
    if raw[:1] in ("{", "[", '"'):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as error:
            raise UserError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    try:
        value = json.loads(raw)
    except ValueError:  # not JSON, or a number of more than 4,300 digits: the text, which the setting's type reads
        return raw
    return value if isinstance(value, (int, float)) or value is None else raw


def override_values(overrides: Sequence[str], sections: Sections) -> dict[str, Given]:
    """The overrides as a config file's keys, each a `Given` naming it; an unknown key is one UserError."""
    return {
        key: Given(value, key + OVERRIDE_MARK, flag=True)
        for key, value in override_pairs(overrides, lambda key, text: check_key(key, sections, text)).items()
    }


def override_pairs(overrides: Sequence[str], check: Callable[[str, str], None]) -> dict[str, Any]:
    """`KEY=VALUE` words as {key: value} (`-` in a key read as `_`), each key passed to `check(key, text)`; a
    key given twice is refused, as a file's is (which one was meant?)."""
    values: dict[str, Any] = {}
    said: dict[str, str] = {}
    for text in overrides:
        key, raw = override_key(text), text.partition("=")[2]
        check(key, text)
        if key in said:
            raise UserError(f"{key} is given twice on the command line ({cut(said[key])}, {cut(text)}); keep one")
        said[key] = text
        values[key] = json_or_text(raw.strip(), text)
    return values


def given_overrides(context: Any) -> list[str]:
    """The `KEY=VALUE` words SettingsCommand took out of the command's arguments."""
    return list(context.meta.get(META_KEY, []))


def check_key(key: str, sections: Sections, text: str) -> None:
    """`key` names a setting (`rl.max_steps`, or `max_steps` for every section having it); else one line
    naming the closest real key."""
    known = known_keys(sections)
    if key not in known:
        raise unknown_setting(key, known, text, written="=...", otherwise="see --print-config for every key")


def known_keys(sections: Sections) -> set[str]:
    """Every key an override may name: `section.name`, and the bare name (every section having it). A
    section's `extra` names (TRL's config fields) are checked when the layer is made, as a file's are."""
    keys = set()
    for section in sections.sections.values():
        names = [*section.fields, *section.band_ends, *section.renamed]
        extra = section.extra()
        names += sorted(extra[1]) if extra else []
        keys |= set(names) | ({f"{section.name}.{name}" for name in names} if not sections.single else set())
    return keys


def source_of(given: Given | None) -> str:
    """Where a value came from, as --print-config says it."""
    if given is None or not given.where:
        return "default"
    if given.where.startswith("-"):
        return f"flag {given.where}"
    if given.where.endswith(OVERRIDE_MARK):
        return f"override {given.where[:-1]}"
    return f"file {given.where}"


def print_config(sections: Sections, layers: Sequence[Layer], built: Mapping[str, Any], as_json: bool) -> None:
    """The resolved settings (`built`, by parameter) and each value's source, as YAML (or JSON)."""
    merged = sections.given(layers)
    tree: dict[str, dict[str, tuple[Any, str]]] = {}
    for name, section in sections.sections.items():
        values: dict[str, Any] = {}
        for param in section.configs:
            values.update(flatten(built[param]))
        tree[name] = {key: (value, source_of(merged[name].get(key))) for key, value in values.items()}
    if as_json:
        data = {name: {key: {"value": v, "source": s} for key, (v, s) in items.items()} for name, items in tree.items()}
        typer.echo(json.dumps(data if not sections.single else next(iter(data.values())), indent=2, default=str))
        return
    for name, items in tree.items():
        indent = "" if sections.single else "  "
        if not sections.single:
            typer.echo(f"{name}:")
        for key, (value, source) in items.items():
            typer.echo(f"{indent}{key}: {json.dumps(value, default=str)}  # {source}")
