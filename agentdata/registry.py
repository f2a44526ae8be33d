"""Registries by name, with dotted-path plug-ins: how engines, protocols, tools, rewards and
filter steps are found.

Each extension point owns one `Registry`. A built-in registers under a short name, either
the object itself or a `"module:attr"` string that is imported only when first asked for
(so registering vLLM costs nothing until someone uses it):

    ENGINES = Registry("engine")
    ENGINES.register("vllm", "agentdata.engines.vllm_engine:VLLMEngine")

    @REWARDS.register("brevity")
    def brevity(prompts, completions, **kwargs): ...

A user names either a registered entry or a plug-in by path, with no registration at all:
`mypkg.rewards:brevity` (an importable module) or `path/to/file.py:brevity` (a file).
An unknown name is a `UserError` that lists the known ones.

This module imports nothing of the package but `errors`, so every part may use it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any, Generic, TypeVar

from agentdata.errors import UserError

T = TypeVar("T")
_PACKAGE_DIR = str(Path(__file__).resolve().parent)  # frames in here are agentdata's, not the plug-in's


def is_plugin_path(name: str) -> bool:
    """`module:attr` or `path/to/file.py:attr`: a module path before the colon, not a bare kind."""
    module, sep, attr = name.partition(":")
    return bool(sep and attr and module) and ("." in module or "/" in module or module.endswith(".py"))


def load_object(spec: str) -> Any:
    """The object `spec` names: `package.module:attr` (importable) or `some/file.py:attr` (a file).

    `attr` may be dotted (`module:Class.method`). Raises UserError naming what is missing.
    """
    location, sep, attr = spec.partition(":")
    if not sep or not location or not attr:
        raise UserError(f"plug-in {spec!r}: expected module:attr or path/to/file.py:attr")
    module = _load_file(location, spec) if location.endswith(".py") else _import(location, spec)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PluginError(spec, f"{location} has no attribute {attr!r}") from None
    return target


def _import(module_name: str, spec: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):  # the plug-in itself, not one of its imports
            raise UserError(f"plug-in {spec!r}: no module named {module_name!r} (is it on PYTHONPATH?)") from None
        raise PluginError(spec, f"importing {module_name} failed: {_described(error)}") from None
    except Exception as error:  # whatever the plug-in's module does when imported is its own fault
        raise PluginError(spec, f"importing {module_name} failed: {_described(error)}") from None


class PluginError(UserError):
    """A plug-in is broken (it does not import, is of the wrong kind, raises, returns the wrong thing):
    the user's to fix, named as the plug-in's fault rather than reported as agentdata's own bug."""

    def __init__(self, spec: str, problem: str):
        self.spec = spec
        super().__init__(f"plug-in {spec!r}: {problem}")


def _described(error: BaseException) -> str:
    """`Type: message (file, line N)`: where in the plug-in it went wrong, for a one-line error."""
    text = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    if isinstance(error, SyntaxError):
        return text  # its message already names the file and line
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if not frame.filename.startswith(("<frozen", _PACKAGE_DIR))]
    if own:
        text += f" (at {Path(own[-1].filename).name}, line {own[-1].lineno})"
    return text


def is_builtin(obj: Any) -> bool:
    """Defined in agentdata itself (a failure there is our bug), not in a plug-in."""
    module = getattr(obj, "__module__", None) or getattr(type(obj), "__module__", "")
    return module == "agentdata" or module.startswith("agentdata.")


def check_call(spec: str, kind: str, called_as: str, function: Any, /, *args: Any, **kwargs: Any) -> None:
    """The plug-in `spec` can be called as `function(*args, **kwargs)`, nothing called: else a PluginError
    naming it and how its kind is called (`called_as`): what can be known before anything is built."""
    article = "an" if kind[:1] in "aeiou" else "a"
    if not callable(function):
        raise PluginError(
            spec, f"is {type(function).__name__}, not callable: {article} {kind} is called as {called_as}"
        )
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError as error:
        raise PluginError(
            spec, f"{article} {kind} is called as {called_as}, which it does not take ({error})"
        ) from None
    except ValueError:  # no signature to read (a C function): the call will tell
        pass


def call_plugin(spec: str, kind: str, called_as: str, function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` for the plug-in `spec` (a constructor, a factory, a step's function);
    a call its signature does not take, or any exception it raises, is a PluginError naming it and how
    a {kind} is called (`called_as`). A built-in's own failures are not dressed up: they are bugs."""
    if is_builtin(function):
        return function(*args, **kwargs)
    check_call(spec, kind, called_as, function, *args, **kwargs)
    try:
        return function(*args, **kwargs)
    except UserError:
        raise
    except Exception as error:
        raise PluginError(spec, f"raised {_described(error)} when called as {called_as}") from None


def _load_file(location: str, spec: str) -> Any:
    try:
        path = Path(location).expanduser().resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        raise UserError(f"plug-in {spec!r}: {location} is a loop of symbolic links") from None
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "is not a regular file" if path.exists() else "does not exist"
        raise UserError(f"plug-in {spec!r}: {location} {what}: give a Python file")
    # One module per file, named after its path, so loading it twice gives the same objects.
    module_name = f"agentdata_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise UserError(f"plug-in {spec!r}: cannot load {location} as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # before exec: dataclasses and pickling look the module up
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:  # a syntax error, a failed import, anything its top level raises
        del sys.modules[module_name]
        raise PluginError(spec, f"importing {location} failed: {_described(error)}") from None
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


class Registry(Generic[T]):
    """Named entries of one kind (`kind` is what error messages call them, e.g. "reward")."""

    def __init__(self, kind: str, parent: Registry[T] | None = None):
        """`parent`: a registry whose entries this one also has, under its own of the same name
        (a stage's built-in filter steps over the shared ones)."""
        self.kind, self.parent = kind, parent
        self._entries: dict[str, T | str] = {}
        self._retired: dict[str, str] = {}  # old name -> the name it is now

    def register(self, name: str, target: T | str | None = None) -> Any:
        """Register `target` (an object, or a lazy "module:attr" string) under `name`.

        Without `target` it is a decorator: `@REGISTRY.register("name")`.
        """
        if target is None:

            def decorate(obj: T) -> T:
                self._entries[name] = obj
                return obj

            return decorate
        self._entries[name] = target
        return target

    def retire(self, old: str, new: str) -> None:
        """`old` named the entry now called `new` in an older release: asked for, it is one UserError naming
        `new` (a 0.x package keeps no silent aliases); `names()` lists only `new`."""
        self._retired[old] = new

    def names(self) -> tuple[str, ...]:
        inherited = self.parent.names() if self.parent is not None else ()
        return (*self._entries, *(name for name in inherited if name not in self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries or (self.parent is not None and name in self.parent)

    def get(self, name: str) -> T:
        """The entry called `name`, or the plug-in `name` points at; a UserError otherwise."""
        if name in self._retired:
            raise UserError(f"{self.kind} {name!r} is now {self._retired[name]!r}: write that (see CHANGELOG.md)")
        if name in self._entries:
            entry = self._entries[name]
            if isinstance(entry, str):  # a lazy built-in: import it once
                entry = self._entries[name] = load_object(entry)
            return entry
        if self.parent is not None and name in self.parent:
            return self.parent.get(name)
        if is_plugin_path(name):
            return load_object(name)
        raise UserError(
            f"unknown {self.kind} {name!r}: use one of {', '.join(self.names())} "
            f"or a plug-in as module:attr or path/to/file.py:attr"
        )
