"""A command's settings as sections of dataclasses, fed by layers: the one settings path of every command.

TRL's `HfArgumentParser` parses a tuple of dataclasses into one namespace; here a command's
settings are `Section`s, each a group of dataclasses parsed together the same way (their names
never overlap inside a section), and the sections keep their own namespaces:

    TRAIN = Sections(Section("sft", {"sft": SFTStageConfig}),
                     Section("rl", {"rl": GRPOStageConfig, "closed_loop": ClosedLoopConfig}))

A value comes from a `Layer` (what one source gave: the field's default < the command's defaults <
the config file < flags or code), and in every layer it is written the way a config file writes it:

    {"rl": {"max_steps": 3}}     a section's own mapping (`rl:` in a file)
    {"rl.max_steps": 3}          the same, as one dotted key
    {"max_steps": 3}             a name without a section: every section that has it
    {"loop": {"top_p": 0.9}}     a composed field's mapping stays flat (`top_p`)
    {"rl": {"num_iterations": 2}}  a name only the section's `extra` type knows (TRL's GRPOConfig): its `trl` mapping

A name nobody knows is a one-line UserError naming where it was written and the closest names.
`Append(["x"])` adds to the list below it (a repeated `--tool`); a band's old one-end names of 0.4
(`max_tool_calls` for curate's `tool_calls`) stop with one line naming the band. Each given value
remembers where it came from (`Given.where`), so a bad one is told as the user wrote it:
`--max-steps 0: must be at least 1`, `rl.max_steps=0: must be at least 1`, `train.yaml rl: max_steps 0: ...`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import load_object
from agentdata.settings.build import _build, coerce, composed_names, unnest
from agentdata.settings.fields import (
    SettingError,
    default_of,
    field_types,
    gone,
    leaf_fields,
    renamed_names,
    unknown_setting,
)


class Append(list):
    """Values added to the list below them (the file's, else the default) instead of replacing it."""


class Extra(dict):
    """Names only a section's `extra` type knows (TRL's): merged key by key over the ones below."""


@dataclass(frozen=True)
class Given:
    """A value and what gave it: a flag (`--max-steps`), a file's section (`train.yaml rl`) or code ("")."""

    value: Any
    where: str = ""
    flag: bool = False


Layer = dict[str, dict[str, Given]]  # section name -> setting name -> what this source gave


@dataclass(frozen=True)
class Section:
    """Settings dataclasses parsed together under one name (the file's `rl:`, the flags' `--rl-` prefix)."""

    name: str
    configs: dict[str, type]  # the command's parameter name -> its settings dataclass
    title: str = ""  # how help and messages name it ("GRPO"); the name when empty

    @property
    def label(self) -> str:
        return self.title or self.name

    @cached_property
    def owner(self) -> dict[str, str]:
        """Every flat setting name of the section -> the parameter whose dataclass holds it."""
        owners: dict[str, str] = {}
        for param, config_type in self.configs.items():
            for path, _, _ in leaf_fields(config_type):
                if path[-1] in owners:
                    raise TypeError(f"section {self.name}: {path[-1]} is in two of its dataclasses")
                owners[path[-1]] = param
        return owners

    @cached_property
    def fields(self) -> dict[str, tuple[dataclasses.Field, Any]]:
        """Every flat name -> (its field, its annotation)."""
        return {path[-1]: (item, kind) for config in self.configs.values() for path, item, kind in leaf_fields(config)}

    @cached_property
    def composed(self) -> set[str]:
        return {name for config in self.configs.values() for name in composed_names(config)}

    def extra(self) -> tuple[str, frozenset[str]] | None:
        """(the field that gathers names of another type, those names): the stage's `trl` and TRL's config."""
        for name, (item, _) in self.fields.items():
            if "extra" in item.metadata:
                return name, _extra_names(item.metadata["extra"])
        return None

    @cached_property
    def band_ends(self) -> dict[str, tuple[str, int]]:
        """Old single-end names of a band (`max_tool_calls`) -> (the band's name, which end)."""
        ends = {}
        for name, (item, _) in self.fields.items():
            for index, old in enumerate(item.metadata.get("ends", ())):
                ends[old] = (name, index)
        return ends

    @cached_property
    def renamed(self) -> dict[str, str]:
        """Names of an older release (`teacher`) -> the setting's name now (`model`)."""
        return {old: new for config in self.configs.values() for old, new in renamed_names(config).items()}

    def defaults(self) -> dict[str, Any]:
        """Every flat name's default in this section (a composed field's default as the stage sets it)."""
        values = {}
        for config_type in self.configs.values():
            values.update(_defaults(config_type))
        return values


def _defaults(config_type: type, base: Any = None) -> dict[str, Any]:
    values = {}
    types = field_types(config_type)
    for item in dataclasses.fields(config_type):
        value = getattr(base, item.name) if base is not None else default_of(item)
        if dataclasses.is_dataclass(types[item.name]):
            values.update(_defaults(types[item.name], value))
        else:
            values[item.name] = value
    return values


@functools.cache
def _extra_names(spec: str) -> frozenset[str]:
    extra_type = load_object(spec)  # TRL: imported only when a name needs it
    return frozenset(item.name for item in dataclasses.fields(extra_type) if item.init)


class Sections:
    """A command's settings path: its sections, how a source's values reach them, and the built settings."""

    def __init__(self, *sections: Section):
        self.sections = {section.name: section for section in sections}
        self._owner = {name: section.owner for name, section in self.sections.items()}
        for section in sections:
            clash = set(self.sections) & (set(self._owner[section.name]) | section.composed)
            if clash:
                raise TypeError(f"section names {sorted(clash)} are also setting names")

    @classmethod
    def of(cls, configs: Mapping[str, type], names: Mapping[str, str] | None = None) -> Sections:
        """One section per settings parameter of a command (named after it, or as `names` says)."""
        names = names or {}
        return cls(*(Section(names.get(param, param), {param: kind}) for param, kind in configs.items()))

    @property
    def single(self) -> bool:
        return len(self.sections) == 1

    def owners(self, name: str) -> list[str]:
        """The sections that hold the flat setting `name`."""
        return [section for section, owner in self._owner.items() if name in owner]

    # ------------------------------------------------------------------ a source's values as a layer
    def layer(
        self, values: Mapping[str, Any], where: str = "", flag: bool = False, plain: Iterable[str] = ()
    ) -> tuple[Layer, dict[str, Any]]:
        """(the layer of `values`, written as a config file writes them; the command's own `plain` options among
        them). An unknown name is a UserError naming `where` and the closest names."""
        layer: Layer = {name: {} for name in self.sections}
        plain, plain_values = set(plain), {}
        # A section's own key wins over a name that sets every section, in either order (`max_steps=3
        # rl.max_steps=4`, or a file's `rl: {max_steps: 4}` before its `max_steps: 3`: GRPO's is 4, SFT's 3).
        for key, value in sorted(values.items(), key=lambda item: item[0].partition(".")[0] in self.sections):
            section, _, name = key.partition(".")
            if section in self.sections and isinstance(value, Mapping) and not name:
                self._route_section(layer, section, value, _join(where, section), flag)
            elif section in self.sections and name:
                self._route_section(layer, section, {name: value}, _join(where, section), flag)
            elif key in plain:
                plain_values[key] = value
            else:
                self._route_flat(layer, key, value, where, flag, plain)
        return layer, plain_values

    def _route_flat(self, layer: Layer, key: str, value: Any, where: str, flag: bool, plain: set[str]) -> None:
        """A name without a section: into every section that knows it."""
        known = [name for name, section in self.sections.items() if self._knows(section, key)]
        if not known:
            known = [name for name, section in self.sections.items() if self._extra_knows(section, key)]
        if not known:
            self._unknown(
                key, where, [name for section in self.sections.values() for name in self._names(section)], plain
            )
        for section in known:
            self._route_section(layer, section, {key: value}, where, flag)

    def _route_section(
        self, layer: Layer, section_name: str, values: Mapping[str, Any], where: str, flag: bool
    ) -> None:
        section = self.sections[section_name]
        owner, composed, ends = self._owner[section_name], section.composed, section.band_ends
        for key, value in values.items():
            if key in composed and isinstance(value, Mapping):
                self._route_section(layer, section_name, value, where, flag)
            elif key in owner:
                layer[section_name][key] = _merged(layer[section_name].get(key), _given(value, where, flag))
            elif key in ends:  # an end alone of 0.4 (`max_tool_calls: 5`): no alias, one line naming the band
                raise UserError(f"{where + ': ' if where else ''}{key} is gone: write {ends[key][0]}: [MIN, MAX]")
            elif key in section.renamed:  # a name of an older release (`teacher`): one line naming the new one
                raise gone(key, section.renamed[key], where)
            elif self._extra_knows(section, key):
                extra_name, _ = section.extra()  # type: ignore[misc]
                given = _given(value, where, flag)
                given = dataclasses.replace(given, value=Extra({key: given.value}))
                layer[section_name][extra_name] = _merged(layer[section_name].get(extra_name), given)
            else:
                self._unknown(key, where, self._names(section), ())

    def _knows(self, section: Section, key: str) -> bool:
        return (
            key in self._owner[section.name]
            or key in section.composed
            or key in section.band_ends
            or key in section.renamed
        )

    def _extra_knows(self, section: Section, key: str) -> bool:
        extra = section.extra() if key not in self._owner[section.name] else None
        return extra is not None and key in extra[1]

    def _names(self, section: Section) -> list[str]:
        extra = section.extra()
        return [*self._owner[section.name], *section.band_ends, *(extra[1] if extra else ())]

    def _unknown(self, key: str, where: str, names: Sequence[str], plain: Iterable[str]) -> None:
        known = [*names, *plain, *self.sections]
        raise unknown_setting(key, known, where, otherwise="see `--help` or docs/settings.md")

    # ------------------------------------------------------------------ layers -> settings
    def given(self, layers: Sequence[Layer]) -> Layer:
        """What the layers give, merged (a higher layer wins; appends combine with what is below)."""
        merged: Layer = {name: {} for name in self.sections}
        for layer in layers:
            for section, values in layer.items():
                for name, given in values.items():
                    merged[section][name] = _merged(merged[section].get(name), given)
        return merged

    def build(self, layers: Sequence[Layer]) -> dict[str, Any]:
        """Each settings parameter's dataclass, built from the layers (lowest first) over the fields' defaults."""
        built: dict[str, Any] = {}
        for section_name, values in self.given(layers).items():
            section = self.sections[section_name]
            fields, defaults = section.fields, None
            coerced: dict[str, dict[str, Any]] = {param: {} for param in section.configs}
            for name, given in values.items():
                if _combines(given.value):
                    defaults = defaults if defaults is not None else section.defaults()
                    given = dataclasses.replace(given, value=_resolved(given.value, defaults.get(name)))
                item, annotation = fields[name]
                if isinstance(given.value, str) and "parse" in item.metadata:  # its text form, as its flag takes it
                    said = given.where[:-1] if given.where.endswith("=") else _join(given.where, name)  # `domain_mix=`
                    given = dataclasses.replace(given, value=load_object(item.metadata["parse"])(given.value, said))
                try:
                    coerced[self._owner[section_name][name]][name] = coerce(name, annotation, given.value)
                except SettingError as error:
                    raise error.at(given.where, given.flag) from None
            for param, config_type in section.configs.items():
                built[param] = self._build_one(section, config_type, coerced[param], values)
        return built

    def _build_one(self, section: Section, config_type: type, values: dict[str, Any], given: dict[str, Given]) -> Any:
        try:
            return _build(config_type, unnest(dict(values), [config_type]))
        except SettingError as error:
            extra = section.extra()
            source = given.get(error.name)
            if source is None and extra is not None and error.name in extra[1]:  # a TRL field: its mapping's source
                source = given.get(extra[0])
            if source is None:
                raise
            if not isinstance(source.value, (list, tuple, dict, _Over, Append)):
                error = SettingError(error.name, source.value, error.reason)  # as the user wrote it: 2, not 2.0
            raise error.at(source.where, source.flag) from None
        except (TypeError, ValueError) as error:  # a check across fields in __post_init__
            prefix = "" if self.single else f"{section.label} settings: "
            raise UserError(f"{prefix}{error}") from None


def _given(value: Any, where: str, flag: bool) -> Given:
    """A value with what gave it (a `Given` already knows)."""
    return value if isinstance(value, Given) else Given(value, where, flag)


def _join(where: str, section: str) -> str:
    return f"{where} {section}" if where else section


def _merged(below: Given | None, above: Given) -> Given:
    """`above` over `below`: the `trl` extras merge key by key; an Append is kept over what is below,
    to be combined with it when the settings are built."""
    if below is None:
        return above
    if isinstance(above.value, Append):
        return Given(_Over(below.value, above.value), above.where, above.flag)
    if isinstance(above.value, Extra) and isinstance(below.value, Mapping):
        return Given(Extra({**below.value, **above.value}), above.where, above.flag)
    return above


@dataclass(frozen=True)
class _Over:
    """An Append given over another value."""

    below: Any
    above: Append


def _combines(value: Any) -> bool:
    return isinstance(value, (Append, _Over))


def _resolved(value: Any, default: Any) -> Any:
    """An Append made a whole value: over what is below it, else over the default."""
    if isinstance(value, _Over):
        below, above = _resolved(value.below, default), value.above
    elif isinstance(value, Append):
        below, above = default, value
    else:
        return value
    base = [part.strip() for part in below.split(",") if part.strip()] if isinstance(below, str) else below
    base = list(base or [])
    return base + [item for item in above if item not in base]
