"""A settings command's flags, declared from its dataclasses the way TRL's HfArgumentParser does: what each flag
is called, what it parses, its help, default and --help group. It reads field metadata, never a run's values
(those are cli/options.py's).

One option per field (`--max-tool-calls`, help and default from the field), plus `--config FILE.yaml|json`,
`--print-config` and `--json`. A new field in a dataclass is a new flag with no other change, unless it is no
everyday flag: metadata `override_only` (no command lists it) or the command's `overrides` (this one does not)
make it a key and an override only (`lora_r=8`), so that each command's --help lists at most 25 flags
(tests/test_flag_counts.py). Each settings parameter is a section of the command's settings path
(`agentdata.settings.sections`); `train` declares its sections itself (`sft`, and `rl` with the closed loop's
settings). A name only one section has is one flag (`--num-generations`); a name several sections have with
one meaning is one flag that sets it in all of them (`--max-steps`: SFT's and GRPO's); one section's is set by
an override (`rl.max_steps=3`, cli/overrides.py). A flag of an older release (`--rl-max-steps`,
`--min-tool-calls`) is no alias: a hidden option that stops with one line naming its new spelling.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agentdata.cli.overrides import PRINT_CONFIG_HELP
from agentdata.settings import Section, Sections, default_of, is_value_type, value_type

CONFIG_HELP = "YAML or JSON file of settings (names as the flags, with _ for -); flags override it."
CONTEXT = "_typer_context"  # the parameter typer hands the command's context to
JSON_HELP = "Print the summary as JSON (machine-readable) instead of tables."
EVERY_SECTION = "Every stage"  # the --help group of the flags that set a name in every section having it
_PAIRS = """'{"KEY": VALUE}'"""  # how a KEY=VALUE flag's setting is written as an override


@dataclass
class GeneratedOption:
    """One flag as declared: its spelling, what the command line parses, its help and default, the settings it
    sets. What a run gave it is read by cli/options.py."""

    name: str  # the setting's name: the key in files and records
    flag: str
    aliases: tuple[str, ...]
    annotation: Any  # what the CLI parses (a str for lists and pairs)
    default: Any
    help: str
    field_type: Any  # the dataclass field's own type
    kind: str  # "plain", "bool", "joined" (A,B), "repeat" (a list), "pairs" (KEY=VALUE), "parsed", "key" (one key's)
    targets: tuple[str, ...] = ()  # the sections it sets
    param: str = ""  # the Python parameter behind it (unique in the command)
    split: bool = True  # a repeated option also takes comma-separated values
    append: bool = False  # a repeated option adds to the file's (or default) list instead of replacing it
    parse: str = ""  # "module:function" turning the flag's text into the value (metadata "parse")
    panel: str | None = None  # the --help group it is listed in
    hidden: bool = False  # an old spelling: works, is not listed
    notice: str = ""  # said when the option is used (an old spelling)
    key: str = ""  # a "key" option's key of its mapping setting (`--model` sets engine_options' `model`)

    def parameter(self) -> inspect.Parameter:
        decls = [f"{self.flag}/--no-{self.flag[2:]}"] if self.kind == "bool" else [self.flag, *self.aliases]
        # typer parses a bool or a plain number or text itself; any other value is text that coerce reads,
        # so its default is shown in the help and the value stays unset until given
        parsed_by_typer = self.kind == "bool" or (self.kind == "plain" and self.annotation in (int, float, str))
        default = self.default if parsed_by_typer else None
        shown = self.default is not None if parsed_by_typer else _shown_default(self.default)
        info = typer.Option(*decls, help=self.help, show_default=shown, rich_help_panel=self.panel, hidden=self.hidden)
        return inspect.Parameter(
            self.param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[self.annotation, info]
        )


def _shown_default(value: Any) -> str | bool:
    if value is None or value == [] or value == {}:
        return False
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def generated_options(
    sections: Sections,
    flags: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    exclude: tuple[str, ...] = (),
    removed: dict[str, str] | None = None,
    overrides: tuple[str, ...] = (),
) -> list[GeneratedOption]:
    """The options of a command's settings: one per name (a name several sections share with one meaning
    sets them all; one section's is its override, `rl.max_steps=3`). A field with metadata `override_only`,
    or named in the command's `overrides`, is no flag: it is set by its override (`top_p=0.9`), and its
    flag of 0.4 stops with one line saying so. `removed` names other old flags and their new spelling
    ({old flag: new spelling}): each is a hidden option that stops with one line."""
    flags, defaults, removed = flags or {}, defaults or {}, dict(removed or {})
    by_name: dict[str, list[Section]] = {}
    for section in sections.sections.values():
        for name, (item, _) in section.fields.items():
            if name not in exclude and item.metadata.get("cli") is not False:
                by_name.setdefault(name, []).append(section)
    options, switches = [], set()  # switches: removed flags that took no value (a bool's)
    for name, owners in by_name.items():
        item, annotation = owners[0].fields[name]
        flag = flags.get(name) or item.metadata.get("flag") or "--" + name.replace("_", "-")
        is_bool = value_type(annotation)[0] is bool
        if item.metadata.get("override_only") or name in overrides:  # `top_p=0.9` is how --top-p 0.9 reads now
            switch = "false" if default_of(item) else "true"  # what the old flag (or its --no-) turned
            value = {"bool": switch, "pairs": _PAIRS}.get(_cli_kind(annotation)[0], "VALUE")
            removed[flag] = f"{name}={value}"
            switches |= {flag} if is_bool else set()
        elif len(owners) == 1 or _one_meaning(name, owners):
            options.append(_option(name, owners, flags.get(name), defaults, owners[0].label))
        if len(owners) > 1:  # the per-section flags of 0.4 (--sft-max-steps): now sft.max_steps=...
            plain_flag = (flags.get(name) or "--" + name.replace("_", "-")).removeprefix("--")
            for owner in owners:
                old = f"--{owner.name}-{plain_flag}"
                removed[old] = f"{owner.name}.{name}={'true' if is_bool else 'VALUE'}"
                switches |= {old} if is_bool else set()
    for option in options:
        item, _ = sections.sections[option.targets[0]].fields[option.name]
        ends = item.metadata.get("ends", ())
        removed |= {"--" + end.replace("_", "-"): f"{option.flag} MIN,MAX" for end in ends}
        if len(option.targets) > 1:
            option.panel = EVERY_SECTION
    options = [one for option in options for one in _with_key_options(sections, option)]  # `--model`
    options = [option for option in options if option.flag not in removed]  # the old flag means another now
    options += [_removed_option(flag, spelling, flag in switches) for flag, spelling in removed.items()]
    if sections.single:  # one section: every option in the one list
        for option in options:
            option.panel = None
    return options


def _with_key_options(sections: Sections, option: GeneratedOption) -> list[GeneratedOption]:
    """`option`, then `--KEY NAME` for each key of its mapping that has a flag of its own (metadata `key_flags`:
    `--model NAME` is engine_options' `model`), merged into the mapping the file, overrides and flags make."""
    item, _ = sections.sections[option.targets[0]].fields[option.name]
    keys = item.metadata.get("key_flags", {})
    return [option] + [
        GeneratedOption(
            option.name,
            "--" + key.replace("_", "-"),
            (),
            Optional[str],
            None,
            text,
            str,
            "key",
            option.targets,
            f"{option.param}_{key}",
            key=key,
            panel=option.panel,
        )
        for key, text in keys.items()
    ]


def _removed_option(flag: str, spelling: str, switch: bool) -> GeneratedOption:
    """A hidden option for a flag of an older release: using it stops with one line naming the new spelling."""
    param = "removed_" + flag.lstrip("-").replace("-", "_")
    note = f"{flag} is gone: write {spelling} (see CHANGELOG.md)"
    kind, annotation = ("bool", bool) if switch else ("plain", Optional[str])
    return GeneratedOption("", flag, (), annotation, None, note, str, kind, param=param, hidden=True, notice=note)


def _one_meaning(name: str, owners: list[Section]) -> bool:
    """A name whose fields have one type and range in every section: one flag can set them all."""
    kinds = {
        (str(value_type(owner.fields[name][1])[0]), owner.fields[name][0].metadata.get("range")) for owner in owners
    }
    return len(kinds) == 1


def _option(name: str, owners: list[Section], flag: Any, defaults: dict[str, Any], panel: str) -> GeneratedOption:
    item, annotation = owners[0].fields[name]
    declared = flag or item.metadata.get("flag") or "--" + name.replace("_", "-")
    names = (declared,) if isinstance(declared, str) else tuple(declared)
    aliases = tuple(item.metadata.get("aliases", ())) + names[1:]
    helps = {owner.label: owner.fields[name][0].metadata.get("help", "") for owner in owners}
    help_text = item.metadata.get("help", "")
    if len(set(helps.values())) > 1:  # each stage says it its own way: the first sentence of each
        help_text = " ".join(f"{label}: {_first_sentence(text)}" for label, text in helps.items())
    section_defaults = {owner.name: defaults.get(name, owner.defaults().get(name)) for owner in owners}
    default = next(iter(section_defaults.values()))
    if len(owners) > 1:
        one = " or ".join(f"{owner.name}.{name}=" for owner in owners)
        help_text += f" Sets it for {' and '.join(owner.label for owner in owners)}; {one} sets one."
        if len({repr(value) for value in section_defaults.values()}) > 1:
            shown = ", ".join(
                f"{owner.label} {_shown_default(section_defaults[owner.name]) or 'none'}" for owner in owners
            )
            help_text += f" Defaults: {shown}."
            default = None
    if item.metadata.get("range"):
        help_text += f" Range {item.metadata['range']}."
    kind, cli_type = ("parsed", Optional[str]) if item.metadata.get("parse") else _cli_kind(annotation)
    return GeneratedOption(
        name,
        names[0],
        aliases,
        cli_type,
        default,
        help_text,
        annotation,
        kind,
        targets=tuple(owner.name for owner in owners),
        param=name,
        split=item.metadata.get("split", True),
        append=item.metadata.get("append", False),
        parse=item.metadata.get("parse", ""),
        panel=panel,
    )


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _cli_kind(annotation: Any) -> tuple[str, Any]:
    inner, optional = value_type(annotation)
    origin = typing.get_origin(inner)
    if inner is bool:
        return "bool", bool
    if origin is dict or inner is dict:
        return "pairs", Optional[list[str]]
    if origin is list:
        return "repeat", Optional[list[str]]
    if origin is tuple or is_value_type(inner):
        return "joined", Optional[str]
    if inner is str:
        return "plain", Optional[str] if optional else str
    if inner in (int, float):  # an optional number also takes `none` (off), so its text is read by coerce
        return "plain", Optional[str] if optional else inner
    return "plain", Optional[str]


def common_parameters(config_file: bool) -> list[inspect.Parameter]:
    """What every settings command also takes: `--config` (unless `config_file` is False), `--print-config`,
    `--json`, and the parameter typer hands the command's context to."""
    extra = []
    if config_file:
        option = typer.Option("--config", help=CONFIG_HELP)
        extra.append(_keyword("config_file", None, Annotated[Path | None, option]))
    extra.append(
        _keyword("print_config", False, Annotated[bool, typer.Option("--print-config", help=PRINT_CONFIG_HELP)])
    )
    extra.append(_keyword("as_json", False, Annotated[bool, typer.Option("--json", help=JSON_HELP)]))
    # typer hands the command's context to a parameter annotated typer.Context (typer vendors its own click)
    extra.append(inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
    return extra


def _keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
