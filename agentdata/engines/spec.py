"""`load_engine(spec, **options)`: a spec string names the backend and where its model is.

A spec is `KIND:TARGET` with KIND a registered engine (`hf:/models/qwen`, `openai:URL`), the
bare `smollm2`, or a plug-in `module:Factory[:TARGET]` / `path/to/file.py:Factory[:TARGET]`.
An engine factory is called as `factory(target, spec=spec, **options)` and returns an
`Engine`; an engine class with that constructor is its own factory.

`ModelSpec.parse(text)` is the one reading of a spec: its kind and target, and what the rest of agentdata asks
of a model spec (the local dir its weights are in, whether it is served or shown worked examples). The text
stays what the user gave: manifests record it and caches key on it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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
    """(kind, target): the kind is a registry name or a plug-in path (`module:attr`). The one reading of a spec
    string's parts: `ModelSpec.parse` for engines, `judge.prm.load_prm` for process reward models."""
    if is_plugin_path(spec):
        location, _, rest = spec.partition(":")
        attr, _, target = rest.partition(":")
        return f"{location}:{attr}", target
    kind, _, target = spec.partition(":")
    return kind, target


# Kinds whose target is a local model dir, and the embedded model's kinds (its weights are one packaged dir).
LOCAL_KINDS = ("hf", "vllm", "auto")
EMBEDDED_KINDS = TARGETLESS_KINDS
TIR_KIND = "tir"
SHOWN_EXAMPLES_KINDS = (TIR_KIND, "smollm2-tir")  # engines.demonstrated: shown smollm2-tir's worked examples
SERVED_KIND = "openai"
BLANK_SPEC = "smollm2"  # what an empty spec names


@dataclass(frozen=True)
class ModelSpec:
    """An engine spec, read once: `text` as given (what manifests record and caches key on: `str(spec)` is
    it), its `kind` (a registered engine or a plug-in path) and `target` (a dir, URLs, or the inner spec of
    `tir:`). Every question about a spec (which dir holds its weights, is it served, is it shown worked
    examples) is a property here, so no other module splits a spec string."""

    text: str
    kind: str
    target: str

    @classmethod
    def parse(cls, spec: str | ModelSpec | None) -> ModelSpec:
        """The spec `spec` names; a ModelSpec as it is, None or blank the plain embedded model (as `load_engine`
        has always read them)."""
        if isinstance(spec, ModelSpec):
            return spec
        text = (spec or "").strip() or BLANK_SPEC
        return cls(text, *parse_spec(text))

    def __str__(self) -> str:
        return self.text

    @property
    def plugin(self) -> bool:
        return is_plugin_path(self.kind)

    @property
    def served(self) -> bool:
        """An OpenAI-compatible server's model: no weights here."""
        return self.kind == SERVED_KIND

    @property
    def shows_examples(self) -> bool:
        """The engine is shown smollm2-tir's worked examples (`smollm2-tir`, `tir:SPEC`)."""
        return self.kind in SHOWN_EXAMPLES_KINDS

    @property
    def embedded(self) -> bool:
        """The packaged SmolLM2 (`smollm2`, `smollm2-tir`): its weights are `engines.smollm2_model_dir()`."""
        return self.kind in EMBEDDED_KINDS

    @property
    def path(self) -> Path:
        """The path a local kind's target names, or the whole text read as a path (a bare model dir)."""
        return Path(self.target if self.kind in LOCAL_KINDS and self.target else self.text).expanduser()

    @property
    def local_dir(self) -> Path | None:
        """The local model dir an `hf:` / `vllm:` / `auto:` spec (or a bare path) names, when it holds a model
        (config.json); None for servers, hub ids, the embedded model and the rest. What a model's fingerprint and
        its trained prompt (agentdata.json) are read from."""
        return self.path if (self.path / "config.json").is_file() else None

    @property
    def named_dir(self) -> str | None:
        """The model dir this spec names, as written, whether it exists or not: a local kind's target, the inner
        spec's of `tir:`, or a bare path; None for the embedded model, a server, a plug-in."""
        if self.kind == TIR_KIND:
            return ModelSpec.parse(self.target).named_dir if self.target else None
        if self.kind in LOCAL_KINDS:
            return self.target or None
        bare_path = not self.plugin and not self.target and self.text.startswith(("/", ".", "~"))
        return self.text if bare_path else None

    def weights_dir(self, flag: str = "--model") -> Path:
        """The local transformers dir of this spec's weights (what training loads); a spec with none is a
        UserError naming `flag`, the option it came from. Not for the embedded model, whose weights are
        converted on first use (`training.model.resolve_model_dir` asks `engines.smollm2_model_dir()`)."""
        if self.served:
            raise UserError(f"{flag} {self}: a served model has no weights here to load; give its weights as hf:DIR")
        if not (self.path / "config.json").is_file():
            raise UserError(f"{flag} {self}: {self.path} is not a transformers model dir (no config.json)")
        return self.path


def check_engine_spec(spec: str | ModelSpec) -> tuple[str, str]:
    """(kind, target) of a spec, checked, a plug-in imported, nothing built (a built-in's module stays
    unimported): what can be known of a teacher before a model loads."""
    model = ModelSpec.parse(spec)
    spec, kind, target = model.text, model.kind, model.target
    if kind not in ENGINES and not is_plugin_path(kind):
        raise UserError(f"unknown engine {spec!r}: {SPEC_HELP}")
    if kind in TARGETLESS_KINDS and target:
        raise UserError(f"engine {kind!r} takes no target: {SPEC_HELP}")
    if kind in ENGINES and kind not in TARGETLESS_KINDS and not target:
        raise UserError(f"engine {spec!r} needs a target after '{kind}:': {SPEC_HELP}")
    if is_plugin_path(kind) and not callable(factory := ENGINES.get(kind)):
        raise PluginError(kind, f"is {type(factory).__name__}, not callable: an engine is a class or a factory")
    return kind, target


def check_engine(spec: str | ModelSpec, options: dict[str, Any], flag: str = "--engine-option") -> None:
    """A spec and the types of its options (given by `flag`) checked, the engine's module imported, its target
    checked where a built-in engine can do that cheaply (`check_target`: a model dir that is not one, a URL that
    is not http), nothing built: what a command checks before it writes anything (collect before its run dir)."""
    model = ModelSpec.parse(spec)
    spec, (kind, target) = model.text, check_engine_spec(model)
    factory = ENGINES.get(kind)
    check_option_types(factory, options, spec, flag)
    if is_plugin_path(kind):  # a plug-in class whose constructor does not take the call, named now
        check_call(kind, "engine", ENGINE_CALL, factory, target, spec=spec, **options)
    elif callable(check_target := getattr(factory, "check_target", None)):  # a built-in's cheap target check
        check_target(target)


def load_engine(spec: str | ModelSpec, **options: Any) -> Engine:
    """Build the engine a spec names; `options` go to that engine (e.g. model=, device=, concurrency=)."""
    model = ModelSpec.parse(spec)
    spec, (kind, target) = model.text, check_engine_spec(model)
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
