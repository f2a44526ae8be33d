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
import sys
from pathlib import Path
from typing import Any, Generic, TypeVar

from agentdata.errors import UserError

T = TypeVar("T")


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
            raise UserError(f"plug-in {spec!r}: {location} has no attribute {attr!r}") from None
    return target


def _import(module_name: str, spec: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):  # the plug-in itself, not one of its imports
            raise UserError(f"plug-in {spec!r}: no module named {module_name!r} (is it on PYTHONPATH?)") from None
        raise


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

    def names(self) -> tuple[str, ...]:
        inherited = self.parent.names() if self.parent is not None else ()
        return (*self._entries, *(name for name in inherited if name not in self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries or (self.parent is not None and name in self.parent)

    def get(self, name: str) -> T:
        """The entry called `name`, or the plug-in `name` points at; a UserError otherwise."""
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
