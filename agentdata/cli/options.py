"""Command-line options generated from the settings dataclasses, the way TRL's HfArgumentParser does.

A command declares the settings it needs as parameters annotated with their dataclass:

    @settings_command()
    def command(problems_file: ..., out: ..., *, config: CollectConfig, as_json: bool = False): ...

and gets one option per field (`--max-turns`, help and default from the field), plus
`--config FILE.yaml|json` and `--json`. A new field in a dataclass is a new flag with no
other change. Values come from: the field's default < the command's default < the file <
the flag. A flag shared by two dataclasses of one command (filter's `--seed`) feeds both.
A value out of its range ends the command with one line naming the flag.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agentdata.errors import UserError
from agentdata.registry import load_object
from agentdata.settings import (
    SettingError,
    build,
    coerce,
    cut,
    default_of,
    is_settings,
    leaf_fields,
    read_settings_file,
    unnest,
    value_type,
)

CONFIG_HELP = "YAML or JSON file of settings (names as the flags, with _ for -); flags override it."
CONTEXT = "_typer_context"
JSON_HELP = "Print the summary as JSON (machine-readable) instead of tables."


@dataclass
class GeneratedOption:
    name: str  # the field's name: a Python parameter and the key in files and records
    flag: str
    aliases: tuple[str, ...]
    annotation: Any  # what the CLI parses (a str for lists and pairs)
    default: Any
    help: str
    field_type: Any  # the dataclass field's own type
    kind: str  # "plain", "bool", "joined" (A,B), "repeat" (a list), "pairs" (KEY=VALUE)
    split: bool = True  # a repeated option also takes comma-separated values
    append: bool = False  # a repeated option adds to the file's (or default) list instead of replacing it
    parse: str = ""  # "module:function" turning the flag's text into the value (metadata "parse")

    def parameter(self) -> inspect.Parameter:
        decls = [f"{self.flag}/--no-{self.flag[2:]}"] if self.kind == "bool" else [self.flag, *self.aliases]
        shown = (
            _shown_default(self.default)
            if self.kind in ("joined", "repeat", "pairs", "parsed")
            else self.default is not None
        )
        info = typer.Option(*decls, help=self.help, show_default=shown)
        default = self.default if self.kind in ("plain", "bool") else None
        return inspect.Parameter(
            self.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[self.annotation, info]
        )

    def value(self, raw: Any) -> Any:
        """The flag's value in the field's terms."""
        if self.kind == "pairs":
            return parse_key_values(raw or [], self.flag)
        if self.kind == "parsed":  # a field with its own text form, e.g. --domain-mix math=0.5,code=0.5
            return load_object(self.parse)(raw, self.flag)
        if self.kind == "repeat" and self.split:
            parts = [part.strip() for value in raw or [] for part in value.split(",") if part.strip()]
            if raw and not parts:
                raise UserError(f"{self.flag} {','.join(raw)}: give at least one value")
            return parts
        return raw


def _shown_default(value: Any) -> str | bool:
    if value is None or value == [] or value == {}:
        return False
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def generated_options(
    config_types: list[type],
    flags: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    exclude: tuple[str, ...] = (),
) -> list[GeneratedOption]:
    """One option per field of the given settings dataclasses (a name shared by two gives one option)."""
    flags, defaults = flags or {}, defaults or {}
    options: dict[str, GeneratedOption] = {}
    for config_type in config_types:
        base = config_type()
        for path, item, annotation in leaf_fields(config_type):
            name = path[-1]
            if name in exclude or name in options or item.metadata.get("cli") is False:
                continue
            default = defaults.get(name, _nested_default(base, path, item))
            options[name] = _option(name, item, annotation, default, flags.get(name))
    return list(options.values())


def _nested_default(base: Any, path: tuple[str, ...], item: dataclasses.Field) -> Any:
    value = base
    for part in path:
        value = getattr(value, part, MISSING)
    return default_of(item) if value is MISSING else value


def _option(name: str, item: dataclasses.Field, annotation: Any, default: Any, flag: Any) -> GeneratedOption:
    declared = flag or item.metadata.get("flag") or "--" + name.replace("_", "-")
    names = (declared,) if isinstance(declared, str) else tuple(declared)
    aliases = tuple(item.metadata.get("aliases", ())) + names[1:]
    help_text = item.metadata.get("help", "")
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
        split=item.metadata.get("split", True),
        append=item.metadata.get("append", False),
        parse=item.metadata.get("parse", ""),
    )


def _cli_kind(annotation: Any) -> tuple[str, Any]:
    inner, optional = value_type(annotation)
    origin = typing.get_origin(inner)
    if inner is bool:
        return "bool", bool
    if origin is dict or inner is dict:
        return "pairs", Optional[list[str]]
    if origin is list:
        return "repeat", Optional[list[str]]
    if origin is tuple:
        return "joined", Optional[str]
    if inner in (int, float, str):
        return "plain", Optional[inner] if optional else inner
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
        options[key] = _json_or_text(raw.strip(), f"{flag} {pair}")
    return options


def _json_or_text(raw: str, where: str) -> Any:
    if raw[:1] in ("{", "[", '"'):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as error:
            raise UserError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, (int, float)) or value is None else raw


# ------------------------------------------------------------------ the decorator
def settings_command(
    flags: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    exclude: tuple[str, ...] = (),
    config_file: bool = True,
) -> Callable:
    """Give a command its generated settings options, `--config` and `--json` (see the module doc)."""

    def decorate(func: Callable) -> Callable:
        signature = inspect.signature(func, eval_str=True)
        configs = {name: p.annotation for name, p in signature.parameters.items() if is_settings(p.annotation)}
        plain = [p for name, p in signature.parameters.items() if name not in configs and name != "as_json"]
        options = generated_options(list(configs.values()), flags, defaults, exclude)
        clash = {p.name for p in plain} & {o.name for o in options}
        if clash:
            raise TypeError(f"{func.__name__}: parameters {sorted(clash)} are also settings fields")
        extra = [option.parameter() for option in options]
        if config_file:
            extra.append(
                inspect.Parameter(
                    "config_file",
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[Path | None, typer.Option("--config", help=CONFIG_HELP)],
                )
            )
        extra.append(
            inspect.Parameter(
                "as_json",
                inspect.Parameter.KEYWORD_ONLY,
                default=False,
                annotation=Annotated[bool, typer.Option("--json", help=JSON_HELP)],
            )
        )
        # typer hands the command's context to a parameter annotated typer.Context (typer vendors its own click)
        extra.append(inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in plain] + extra

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            from agentdata.cli.common import print_error
            from agentdata.cli.progress import rendering

            try:
                arguments = _arguments(kwargs)
                with rendering(enabled=not kwargs["as_json"]):
                    return func(**arguments)
            except UserError as error:  # the same one line as app.main, also for typer's own test runner
                print_error(str(error))
                raise typer.Exit(2) from None

        def _arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
            call = _Invocation(kwargs.pop(CONTEXT), options, configs, defaults or {}, kwargs)
            call.read_file(kwargs.pop("config_file", None))
            call.apply_file_to_plain([p.name for p in plain])
            built = call.build_configs()
            call.check_file_used()
            arguments = {name: kwargs[name] for name in (p.name for p in plain)}
            if "as_json" in signature.parameters:
                arguments["as_json"] = kwargs["as_json"]
            return {**arguments, **built}

        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        wrapper.generated_options = options  # type: ignore[attr-defined]
        return wrapper

    return decorate


class _Invocation:
    """One run of a generated command: where each setting's value comes from."""

    def __init__(
        self,
        context: typer.Context,
        options: list[GeneratedOption],
        configs: dict[str, type],
        defaults: dict[str, Any],
        kwargs: dict[str, Any],
    ):
        self.context, self.options, self.configs, self.defaults, self.kwargs = (
            context,
            options,
            configs,
            defaults,
            kwargs,
        )
        self.by_name = {option.name: option for option in options}
        self.file: dict[str, Any] = {}
        self.file_path: Path | None = None
        self.used: set[str] = set()
        self.given = {
            option.name: option.value(kwargs.pop(option.name))
            for option in options
            if self._from_command_line(option.name)
        }
        for option in options:
            kwargs.pop(option.name, None)

    def _from_command_line(self, name: str) -> bool:
        source = self.context.get_parameter_source(name)
        return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")

    def read_file(self, path: Path | None) -> None:
        if path is not None:
            self.file_path = path
            self.file = unnest(read_settings_file(path), list(self.configs.values()))

    def apply_file_to_plain(self, names: list[str]) -> None:
        """A file may also set a command's own options (e.g. `out`), below the flags."""
        params = {param.name: param for param in self.context.command.params}
        for name in names:
            if name in self.file and name in params and not self._from_command_line(name):
                self.used.add(name)
                param = params[name]
                if param.param_type_name == "argument":
                    continue
                try:
                    self.kwargs[name] = param.type_cast_value(self.context, self.file[name])
                except Exception as error:  # click's BadParameter: a value the option's type refuses
                    raise UserError(f"{self.file_path}: {name}: {getattr(error, 'message', error)}") from None

    def build_configs(self) -> dict[str, Any]:
        built = {}
        for param_name, config_type in self.configs.items():
            names = {path[-1] for path, _, _ in leaf_fields(config_type)}
            values = {name: value for name, value in self.defaults.items() if name in names}
            for name in names & set(self.file):
                values[name] = self.file[name]
                self.used.add(name)
            for name, value in self.given.items():
                if name in names:
                    values[name] = self._appended(name, values.get(name), value)
            built[param_name] = self._build(config_type, values)
        return built

    def _appended(self, name: str, below: Any, given: Any) -> Any:
        """An `append` option's names after the file's list (or the default one); others replace it."""
        option = self.by_name.get(name)
        if option is None or not option.append:
            return given
        base = list(below if below is not None else option.default or [])
        return base + [item for item in given if item not in base]

    def _build(self, config_type: type, values: dict[str, Any]) -> Any:
        try:
            for name, value in list(values.items()):
                if name in self.by_name:
                    values[name] = coerce(name, self.by_name[name].field_type, value)
            return build(config_type, values)
        except SettingError as error:
            raise UserError(self._describe(error)) from None

    def _describe(self, error: SettingError) -> str:
        option = self.by_name.get(error.name)
        if error.name in self.given and option is not None:
            return f"{option.flag} {_flag_text(self.given[error.name])}: {error.reason}"
        if error.name in self.file:
            return f"{self.file_path}: {error.name} {_flag_text(self.file[error.name])}: {error.reason}"
        flag = option.flag if option else error.name
        return f"{flag} {_flag_text(error.value)}: {error.reason}"

    def check_file_used(self) -> None:
        unknown = sorted(set(self.file) - self.used)
        if unknown:
            raise UserError(
                f"{self.file_path}: unknown setting(s) {', '.join(unknown)} for this command; "
                "see `--help` or docs/settings.md"
            )


def _flag_text(value: Any) -> str:
    """A value as an error line shows it: cut, so a 10 MB value is named, not echoed."""
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return cut(text)


def field_option(config_type: type, name: str, *decls: str, note: str = "") -> Any:
    """A hand-placed option whose help comes from the field (for commands like `train` that pick a few)."""
    for path, item, _ in leaf_fields(config_type):
        if path[-1] == name:
            help_text = " ".join(filter(None, [item.metadata.get("help", ""), note]))
            if item.metadata.get("range"):
                help_text += f" Range {item.metadata['range']}."
            return typer.Option(*(decls or ("--" + name.replace("_", "-"),)), help=help_text)
    raise KeyError(f"{config_type.__name__} has no field {name}")
