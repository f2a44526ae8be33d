"""The fields of a settings dataclass as declared: their metadata, types and names, and how a mistake is told.

A field's metadata (see the package doc) and resolved type are read here, and the one-line errors a setting
gets (`SettingError`, `gone`, `unknown_setting`) are written here. A field may hold a `SettingValue` (a small
type with rules of its own, e.g. `Band`): it parses its own text form and records itself as plain JSON. What
a given value becomes, and its checks (`coerce`, `check_fields`, `Range`), are `build.py`'s.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, Field
from typing import Any

from agentdata.errors import UserError

# The one word for "off" (None) on the command line; a file writes null (docs/settings.md).
NONE_WORD = "none"


class SettingError(UserError, ValueError):
    """A setting outside its range or of the wrong kind: `name` is the field, `where` what gave it (a flag,
    a file's section), so the message names what the user wrote."""

    def __init__(self, name: str, value: Any, message: str, where: str = "", flag: bool = False):
        self.name, self.value, self.reason, self.where, self.flag = name, value, message, where, flag
        if flag:  # a flag: `--max-steps 0: must be at least 1`; an override: `rl.max_steps=0: must be at least 1`
            text = f"{where}{'' if where.endswith('=') else ' '}{show_value(value)}: {message}"
        else:  # a file (as written there) or code (text quoted): `train.yaml rl: max_steps 0: must be at least 1`
            shown = show_value(value, quote=not where, as_json=True)
            text = f"{where + ': ' if where else ''}{name} {shown}: {message}"
        super().__init__(text)

    def at(self, where: str, flag: bool = False) -> SettingError:
        """The same mistake, named by what gave the value."""
        return SettingError(self.name, self.value, self.reason, where, flag)


class SettingValue:
    """A setting's value type with rules of its own (`Band`): built from text or a list, recorded as JSON."""

    @classmethod
    def parse(cls, value: Any) -> SettingValue:
        raise NotImplementedError

    def as_setting(self) -> Any:
        raise NotImplementedError


SHOWN_CHARS = 200  # of a value in an error line (a long path fits): a 10 MB value is named, not echoed


def show_value(value: Any, quote: bool = False, as_json: bool = False) -> str:
    """A value as an error line shows it (cut: a 10 MB value is named, not echoed): a list as a flag takes
    it (A,B), or `as_json` as a file holds it ([1, 2], {"a": 1})."""
    if as_json and isinstance(value, (list, tuple, dict)):
        return cut(json.dumps(value, ensure_ascii=False, default=str))
    if isinstance(value, (list, tuple)):
        return cut(",".join(map(str, value)))
    return show_cut(value) if quote and isinstance(value, str) else cut(str(value))


def show_cut(value: Any) -> str:
    """repr(value), cut to SHOWN_CHARS with the full length said."""
    return cut(repr(value))


def cut(text: str) -> str:
    """`text` as an error line shows it: at most SHOWN_CHARS, with the full length said."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 20]}… ({len(text):,} characters)"


# ------------------------------------------------------------------ fields of a settings dataclass
def is_settings(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def is_value_type(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, SettingValue)


@functools.cache
def field_types(config_type: type) -> dict[str, Any]:
    """The resolved annotation of each field (the modules use `from __future__ import annotations`). Cached:
    resolving them took most of a settings object's construction, and some are made once per trajectory
    (`HealthLimits`, issue 25's driver profile). A class's annotations do not change; do not mutate the dict."""
    return typing.get_type_hints(config_type)


def value_type(annotation: Any) -> tuple[Any, bool]:
    """(the type inside an `X | None`, whether None is allowed)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        return (inner[0] if len(inner) == 1 else annotation), type(None) in args
    return annotation, False


def default_of(item: Field) -> Any:
    if item.default is not MISSING:
        return item.default
    if item.default_factory is not MISSING:
        return item.default_factory()
    return MISSING


def leaf_fields(config_type: type, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Field, Any]]:
    """(path, field, annotation) of every non-composed field, composed settings flattened in place."""
    types_ = field_types(config_type)
    for item in dataclasses.fields(config_type):
        annotation = types_[item.name]
        if is_settings(annotation):
            yield from leaf_fields(annotation, (*prefix, item.name))
        else:
            yield (*prefix, item.name), item, annotation


def renamed_names(config_type: type) -> dict[str, str]:
    """Names of an older release (a field's metadata `was`) -> the field's name now (`teacher` -> `model`)."""
    return {old: path[-1] for path, item, _ in leaf_fields(config_type) for old in item.metadata.get("was", ())}


def gone(old: str, new: str, where: str = "") -> UserError:
    """The one line an old name gets: no alias (a 0.x package keeps none), its new spelling; `where` names the
    file that used it."""
    return UserError(f"{where + ': ' if where else ''}{old} is gone: write {new} (see CHANGELOG.md)")


def unknown_setting(
    key: str, known: Iterable[str], where: str = "", written: str = "", otherwise: str = "see docs/settings.md"
) -> UserError:
    """The one line a name no setting has gets, everywhere (a file, an override, a recipe): the closest real
    names (`written` after each: `=...` on the command line), else where to look."""
    close = difflib.get_close_matches(key, sorted(set(known)), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(name + written for name in close)}?" if close else otherwise
    return UserError(f"{where + ': ' if where else ''}unknown setting {key!r}; {hint}")
