"""One run of a settings command read: its arguments, the values its flags, overrides and `--config` file gave,
and the settings built from them in layers. What the flags are is declared by cli/flags.py.

A command declares the settings it needs as parameters annotated with their dataclass:

    @settings_command()
    def command(problems_file: ..., out: ..., *, config: CollectConfig, as_json: bool = False): ...

and gets their flags (cli/flags.py), `--config FILE.yaml|json`, `--print-config` and `--json`. Its command class
(`SettingsCommand`) takes the `KEY=VALUE` overrides (cli/overrides.py) out of the arguments before click parses
the rest, so a value of an option (`--engine-option a=1`) is never one, and a mistyped key where a command's input
paths go is told as a key, not as a missing file. Values come from: the field's default < the command's
default < the file < overrides < flags. A value out of its range ends the command with one line naming the
flag; a flag of an older release stops with one line naming its new spelling.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from agentdata.cli.console import print_error
from agentdata.cli.flags import CONTEXT, GeneratedOption, common_parameters, generated_options
from agentdata.cli.overrides import (
    META_KEY,
    OVERRIDE,
    json_or_text,
    known_keys,
    override_key,
    override_values,
    print_config,
)
from agentdata.cli.progress import rendering
from agentdata.errors import UserError
from agentdata.registry import load_object
from agentdata.settings import Append, Extra, Given, Layer, Sections, is_settings, read_settings_file


# ------------------------------------------------------------------ the arguments
class SettingsCommand(TyperCommand):
    """A command that also takes `KEY=VALUE` overrides among its arguments (see the module doc)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        sections = getattr(self.callback, "sections", None)
        known = known_keys(sections) if sections is not None else set()
        rest, overrides = split_overrides(args, self.params, known)
        refuse_repeated_options(rest, self.params)
        ctx.meta[META_KEY] = overrides
        return super().parse_args(ctx, rest)


def split_overrides(
    args: Sequence[str], params: Sequence[Any], known: set[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """(the arguments click parses, the `KEY=VALUE` overrides): an option's value is never an override.

    A `KEY=VALUE` is an override, except in the place of a single argument of a command that also takes a
    variadic one (eval's `base=smollm2` model): there only a key it knows, or a dotted one, is. Where the
    variadic argument's paths go, it is an override unless such a path exists, so a mistyped key is told as
    an unknown key, not as a missing input file."""
    arguments = [param for param in params if param.param_type_name == "argument"]
    variadic = any(param.nargs == -1 for param in arguments)
    takes_value = {
        name
        for param in params
        if param.param_type_name == "option" and not getattr(param, "is_flag", False) and not getattr(param, "count", 0)
        for name in param.opts
    }
    rest, overrides, value_next, positionals = [], [], False, 0
    for index, arg in enumerate(args):
        if arg == "--":
            rest += args[index:]
            break
        if value_next or arg.startswith("-"):
            value_next = not value_next and arg in takes_value
            rest.append(arg)
        elif OVERRIDE.match(arg) and _is_override(arg, known, variadic, _slot(arguments, positionals)):
            overrides.append(arg)
        else:
            rest.append(arg)
            positionals += 1
    return rest, overrides


def refuse_repeated_options(args: Sequence[str], params: Sequence[Any]) -> None:
    """A setting's flag given twice (`--max-steps 3 --max-steps 4`, `--lora --no-lora`) is refused as a key given
    twice is: which one was meant? A repeatable option (`--tool`, `--compare`) adds, so it may repeat."""
    once = {
        name: param
        for param in params
        if param.param_type_name == "option" and not param.multiple and not getattr(param, "count", False)
        for name in (*param.opts, *param.secondary_opts)
    }
    seen: dict[str, str] = {}
    for word in args:
        if word == "--":
            return
        flag = word.partition("=")[0]
        param = once.get(flag) if word.startswith("-") else None
        if param is None:
            continue
        if param.name in seen and seen[param.name] == flag:
            raise UserError(f"{flag} is given twice on the command line; keep one")
        if param.name in seen:
            raise UserError(f"{seen[param.name]} and {flag} set one setting; keep one")
        seen[param.name] = flag


def _slot(arguments: Sequence[Any], taken: int) -> Any:
    """The argument the next positional word fills (None: every one is filled)."""
    for param in arguments:
        if param.nargs == -1 or taken < param.nargs:
            return param
        taken -= param.nargs
    return None


def _is_override(arg: str, known: set[str], variadic: bool, slot: Any) -> bool:
    key = override_key(arg)
    if key in known or "." in key or not variadic or slot is None:
        return True
    return slot.nargs == -1 and not Path(arg).exists()  # a file named `a=b.jsonl` stays a path


# ------------------------------------------------------------------ a flag's value
def flag_value(option: GeneratedOption, raw: Any) -> Any:
    """What `option` was given on the command line (`raw`, as click parsed it), in its field's terms."""
    if option.kind == "pairs":
        return parse_key_values(raw or [], option.flag)
    if option.kind == "key":  # one key of a mapping, merged into what is below it (an empty one: nothing)
        return Extra({option.key: raw} if raw else {})
    if option.kind == "parsed":  # a field with its own text form (metadata "parse")
        return load_object(option.parse)(raw, option.flag)
    if option.kind == "repeat" and option.split:
        parts = [part.strip() for value in raw or [] for part in value.split(",") if part.strip()]
        if raw and not parts:
            raise UserError(f"{option.flag} {','.join(raw)}: give at least one value")
        return Append(parts) if option.append else parts
    if option.kind == "repeat" and option.append:
        return Append(raw or [])
    return raw


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
    """Give a command its generated settings options, `--config`, `--print-config` and `--json` (cli/flags.py), and
    read each run of it (see the module doc).

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
        parameters += [option.parameter() for option in options] + common_parameters(config_file)

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
        self.given = [(option, flag_value(option, kwargs.get(option.param))) for option in self.used]
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
