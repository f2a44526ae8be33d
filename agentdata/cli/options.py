"""Command-line options generated from the settings dataclasses, the way TRL's HfArgumentParser does.

A command declares the settings it needs as parameters annotated with their dataclass:

    @settings_command()
    def command(problems_file: ..., out: ..., *, config: CollectConfig, as_json: bool = False): ...

and gets one option per field (`--max-tool-calls`, help and default from the field), plus `--config
FILE.yaml|json` and `--json`. A new field in a dataclass is a new flag with no other change, unless it is no
everyday flag: metadata `override_only` (no command lists it) or the command's `overrides` (this one does not)
make it a key and an override only (`lora_r=8`), so that each command's --help lists at most 25 flags
(tests/test_flag_counts.py). Each settings parameter is a section of the command's settings path
(`agentdata.settings.sections`); `train` declares its sections itself (`sft`, and `rl` with the closed loop's
settings). A name only one section has is one flag (`--num-generations`); a name several sections have with
one meaning is one flag that sets it in all of them (`--max-steps`: SFT's and GRPO's); one section's is set by
an override (`rl.max_steps=3`, cli/overrides.py). Values come from: the field's default < the command's
default < the file < overrides < flags. A value out of its range ends the command with one line naming the
flag. A flag of an older release (`--rl-max-steps`, `--min-tool-calls`) is no alias: it stops with one line
naming its new spelling.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agentdata.cli.console import print_error
from agentdata.cli.overrides import META_KEY, PRINT_CONFIG_HELP, json_or_text, override_values, print_config
from agentdata.cli.progress import rendering
from agentdata.errors import UserError
from agentdata.registry import load_object
from agentdata.settings import (
    Append,
    Extra,
    Given,
    Layer,
    Section,
    Sections,
    default_of,
    is_settings,
    is_value_type,
    read_settings_file,
    value_type,
)

CONFIG_HELP = "YAML or JSON file of settings (names as the flags, with _ for -); flags override it."
CONTEXT = "_typer_context"
JSON_HELP = "Print the summary as JSON (machine-readable) instead of tables."
EVERY_SECTION = "Every stage"  # the --help group of the flags that set a name in every section having it
_PAIRS = """'{"KEY": VALUE}'"""  # how a KEY=VALUE flag's setting is written as an override


@dataclass
class GeneratedOption:
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

    def value(self, raw: Any) -> Any:
        """The flag's value in the field's terms."""
        if self.kind == "pairs":
            return parse_key_values(raw or [], self.flag)
        if self.kind == "key":  # one key of a mapping, merged into what is below it (an empty one: nothing)
            return Extra({self.key: raw} if raw else {})
        if self.kind == "parsed":  # a field with its own text form (metadata "parse")
            return load_object(self.parse)(raw, self.flag)
        if self.kind == "repeat" and self.split:
            parts = [part.strip() for value in raw or [] for part in value.split(",") if part.strip()]
            if raw and not parts:
                raise UserError(f"{self.flag} {','.join(raw)}: give at least one value")
            return Append(parts) if self.append else parts
        if self.kind == "repeat" and self.append:
            return Append(raw or [])
        return raw


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


# ------------------------------------------------------------------ KEY=VALUE options
def parse_key_values(pairs: list[str], flag: str = "--engine-option") -> dict[str, Any]:
    """Repeated KEY=VALUE flags as a dict; VALUE is JSON (`3`, `true`, `{"a": 1}`) or else plain text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UserError(f"{flag} {pair}: expected KEY=VALUE")
        options[key] = json_or_text(raw.strip(), f"{flag} {pair}")
    return options


# ------------------------------------------------------------------ the decorator
@dataclass
class GivenSettings:
    """What the command line gave, not yet built: for a command whose library builds its own settings
    (`train`: its stages' defaults depend on the data). `values` are written as a config file writes them
    (`"rl.max_steps"`), each a `Given` that names its flag; `config_file` is `--config`, unread."""

    values: dict[str, Given] = field(default_factory=dict)
    config_file: Path | None = None


def settings_command(
    flags: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    exclude: tuple[str, ...] = (),
    config_file: bool = True,
    sections: Sections | None = None,
    section_names: dict[str, str] | None = None,
    removed: dict[str, str] | None = None,
    overrides: tuple[str, ...] = (),
) -> Callable:
    """Give a command its generated settings options, `--config` and `--json` (see the module doc).

    The command takes its settings as parameters annotated with their dataclasses (each one section,
    named after the parameter unless `section_names` says otherwise), or, with `sections` given, one
    parameter annotated `GivenSettings` that receives what the command line gave, unbuilt. `overrides` names
    the settings that are everyday elsewhere but not in this command: keys and overrides, no flags.
    """

    def decorate(func: Callable) -> Callable:
        signature = inspect.signature(func, eval_str=True)
        unbuilt = next((n for n, p in signature.parameters.items() if p.annotation is GivenSettings), None)
        configs = {
            name: p.annotation
            for name, p in signature.parameters.items()
            if is_settings(p.annotation) and name != unbuilt
        }
        path = sections or Sections.of(configs, section_names)
        special = {*configs, "as_json", unbuilt}
        plain = [p for name, p in signature.parameters.items() if name not in special]
        options = generated_options(path, flags, defaults, exclude, removed, overrides)
        clash = {p.name for p in plain} & {o.param for o in options}
        if clash:
            raise TypeError(f"{func.__name__}: parameters {sorted(clash)} are also settings fields")
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in plain]
        parameters += [option.parameter() for option in options] + _common_parameters(config_file)

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            try:
                call = _Invocation(kwargs.pop(CONTEXT), options, path, defaults or {}, kwargs)
                config_path = kwargs.pop("config_file", None)
                if kwargs.pop("print_config", False):
                    call.read_file(config_path, [p.name for p in plain])
                    return print_config(path, call.layers(), call.build(), kwargs["as_json"])
                if unbuilt:
                    built = {unbuilt: GivenSettings(call.flag_values(), config_path)}
                else:
                    call.read_file(config_path, [p.name for p in plain])
                    built = call.build()
                arguments = {name: kwargs[name] for name in (p.name for p in plain)} | built
                if "as_json" in signature.parameters:
                    arguments["as_json"] = kwargs["as_json"]
                with rendering(enabled=not kwargs["as_json"]):
                    return func(**arguments)
            except UserError as error:  # the same one line as app.main, also for typer's own test runner
                print_error(str(error))
                raise typer.Exit(2) from None

        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        wrapper.generated_options = options  # type: ignore[attr-defined]
        wrapper.sections = path  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _common_parameters(config_file: bool) -> list[inspect.Parameter]:
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


class _Invocation:
    """One run of a generated command: the values its flags and file gave, and the settings built from them."""

    def __init__(
        self,
        context: typer.Context,
        options: list[GeneratedOption],
        sections: Sections,
        defaults: dict[str, Any],
        kwargs: dict[str, Any],
    ):
        self.context, self.sections, self.defaults, self.kwargs = context, sections, defaults, kwargs
        self.used = [option for option in options if self._from_command_line(option.param)]
        for option in self.used:
            if option.hidden:  # a flag of an older release: one line naming its new spelling
                raise UserError(option.notice)
        self.given = [(option, option.value(kwargs.get(option.param))) for option in self.used]
        for option in options:
            kwargs.pop(option.param, None)
        self.overrides = override_values(context.meta.get(META_KEY, []), sections)
        self.file_layer: dict = {}

    def _from_command_line(self, name: str) -> bool:
        source = self.context.get_parameter_source(name)
        return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")

    def flag_values(self) -> dict[str, Given]:
        """What the overrides and flags gave, as a config file's keys (each names its override or flag); a
        flag over an override of the same setting."""
        values = dict(self.overrides)
        for option, value in self.given:
            for section in option.targets if option.kind != "key" else ():
                values[f"{section}.{option.name}"] = Given(value, option.flag, flag=True)
        return values

    def key_values(self) -> dict[str, Given]:
        """What the flags of one key of a mapping gave (`--model`: engine_options' `model`), a layer over the
        flags: merged into the mapping the layers below make."""
        return {
            f"{section}.{option.name}": Given(value, option.flag, flag=True)
            for option, value in self.given
            if option.kind == "key"
            for section in option.targets
        }

    def read_file(self, path: Path | None, plain_names: list[str]) -> None:
        """The file's settings; it may also set a command's own options (e.g. `out`), below the flags."""
        if path is None:
            return
        self.file_layer, plain_values = self.sections.layer(read_settings_file(path), str(path), plain=plain_names)
        params = {param.name: param for param in self.context.command.params}
        for name, value in plain_values.items():
            param = params.get(name)
            if param is None or self._from_command_line(name) or param.param_type_name == "argument":
                continue
            try:
                self.kwargs[name] = param.type_cast_value(self.context, value)
            except Exception as error:  # click's BadParameter: a value the option's type refuses
                raise UserError(f"{path}: {name}: {getattr(error, 'message', error)}") from None

    def layers(self) -> list[Layer]:
        """The command's defaults < the file < the overrides and flags < the flags of a mapping's key (`--model`)."""
        defaults, _ = self.sections.layer(self.defaults)
        flags, keys = self.sections.layer(self.flag_values())[0], self.sections.layer(self.key_values())[0]
        return [defaults, self.file_layer, flags, keys]

    def build(self) -> dict[str, Any]:
        return self.sections.build(self.layers())
