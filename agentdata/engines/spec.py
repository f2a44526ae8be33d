"""`load_engine(spec, **options)`: a spec string names the backend and where its model is.

A spec is `KIND:TARGET` with KIND a registered engine (`hf:/models/qwen`, `openai:URL`), the
bare `smollm2`, or a plug-in `module:Factory[:TARGET]` / `path/to/file.py:Factory[:TARGET]`.
An engine factory is called as `factory(target, spec=spec, **options)` and returns an
`Engine`; an engine class with that constructor is its own factory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentdata.engines.base import Engine
from agentdata.engines.option_types import check_option_types
from agentdata.errors import UserError
from agentdata.registry import PluginError, Registry, call_plugin, check_call, is_plugin_path

ENGINES: Registry[Callable[..., Engine]] = Registry("engine")
ENGINES.register("smollm2", "agentdata.engines.smollm2:smollm2_engine")
# The tool-using default: SmolLM2 shown one worked codeblock example (engines.demonstrated).
ENGINES.register("smollm2-tir", "agentdata.engines.demonstrated:smollm2_tir_engine")
# Any engine shown those worked examples: `tir:hf:DIR` (a model GRPO trained from smollm2-tir).
ENGINES.register("tir", "agentdata.engines.demonstrated:tir_engine")
ENGINES.register("hf", "agentdata.engines.hf:HFEngine")
ENGINES.register("vllm", "agentdata.engines.vllm_engine:vllm_engine")
# A local model dir on vLLM where it is installed, else on transformers (the quickstart's trained model).
ENGINES.register("auto", "agentdata.engines.auto:auto_engine")
ENGINES.register("openai", "agentdata.engines.openai_compat:OpenAIEngine")

ENGINE_KINDS = ENGINES.names()
# Built-in kinds that take no target: the embedded model is one fixed model.
TARGETLESS_KINDS = ("smollm2", "smollm2-tir")
ENGINE_CALL = "factory(target, spec=spec, **engine options)"  # how a plug-in engine is built
SPEC_HELP = (
    "use smollm2, smollm2-tir, hf:PATH, vllm:PATH, openai:URL[,URL...], tir:SPEC (SPEC shown smollm2-tir's worked "
    "examples) or a plug-in module:Factory[:TARGET]"
)


def parse_spec(spec: str) -> tuple[str, str]:
    """(kind, target): the kind is a registry name or a plug-in path (`module:attr`)."""
    if is_plugin_path(spec):
        location, _, rest = spec.partition(":")
        attr, _, target = rest.partition(":")
        return f"{location}:{attr}", target
    kind, _, target = spec.partition(":")
    return kind, target


def check_engine_spec(spec: str) -> tuple[str, str]:
    """(kind, target) of a spec, checked, a plug-in imported, nothing built (a built-in's module stays
    unimported): what can be known of a teacher before a model loads."""
    kind, target = parse_spec(spec)
    if kind not in ENGINES and not is_plugin_path(kind):
        raise UserError(f"unknown engine {spec!r}: {SPEC_HELP}")
    if kind in TARGETLESS_KINDS and target:
        raise UserError(f"engine {kind!r} takes no target: {SPEC_HELP}")
    if kind in ENGINES and kind not in TARGETLESS_KINDS and not target:
        raise UserError(f"engine {spec!r} needs a target after '{kind}:': {SPEC_HELP}")
    if is_plugin_path(kind) and not callable(factory := ENGINES.get(kind)):
        raise PluginError(kind, f"is {type(factory).__name__}, not callable: an engine is a class or a factory")
    return kind, target


def check_engine(spec: str, options: dict[str, Any], flag: str = "--engine-option") -> None:
    """A spec and the types of its options (given by `flag`) checked, the engine's module imported, its target
    checked where a built-in engine can do that cheaply (`check_target`: a model dir that is not one, a URL that
    is not http), nothing built: what a command checks before it writes anything (collect before its run dir)."""
    spec = (spec or "smollm2").strip()
    kind, target = check_engine_spec(spec)
    factory = ENGINES.get(kind)
    check_option_types(factory, options, spec, flag)
    if is_plugin_path(kind):  # a plug-in class whose constructor does not take the call, named now
        check_call(kind, "engine", ENGINE_CALL, factory, target, spec=spec, **options)
    elif callable(check_target := getattr(factory, "check_target", None)):  # a built-in's cheap target check
        check_target(target)


def load_engine(spec: str, **options: Any) -> Engine:
    """Build the engine a spec names; `options` go to that engine (e.g. model=, device=, concurrency=)."""
    spec = (spec or "smollm2").strip()
    kind, target = check_engine_spec(spec)
    factory = ENGINES.get(kind)
    check_option_types(factory, options, spec)
    if is_plugin_path(kind):
        return _plugin_engine(kind, factory, target, spec, options)
    try:
        return factory(target, spec=spec, **options)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise UserError(f"engine {spec!r} does not take that option: {exc}") from exc


def _plugin_engine(kind: str, factory: Any, target: str, spec: str, options: dict[str, Any]) -> Engine:
    """A plug-in engine, built as `factory(target, spec=spec, **options)`: a constructor that does not take
    that call, raises, or builds something that cannot generate is the plug-in's fault, named."""
    engine = call_plugin(kind, "engine", ENGINE_CALL, factory, target, spec=spec, **options)
    if not inspect.iscoroutinefunction(getattr(engine, "generate", None)):
        raise PluginError(
            kind, f"built {type(engine).__name__}, not an engine: an Engine has `async def generate(self, request)`"
        )
    return engine
