"""`load_engine(spec, **options)`: a spec string names the backend and where its model is."""

from __future__ import annotations

from agentdata.engines.base import Engine
from agentdata.errors import UserError

ENGINE_KINDS = ("smollm2", "hf", "vllm", "openai")
SPEC_HELP = "use smollm2, hf:PATH, vllm:PATH or openai:URL[,URL...]"


def load_engine(spec: str, **options) -> Engine:
    """Build the engine a spec names; `options` go to that engine (e.g. model=, device=, concurrency=)."""
    spec = (spec or "smollm2").strip()
    kind, _, target = spec.partition(":")
    if kind == "smollm2" and not target:
        from agentdata.engines.hf import HFEngine
        from agentdata.engines.smollm2 import smollm2_model_dir

        try:
            return HFEngine(smollm2_model_dir(), spec="smollm2", **options)
        except TypeError as exc:
            raise UserError(f"engine 'smollm2' does not take that option: {exc}") from exc
    if kind not in ENGINE_KINDS or kind == "smollm2":
        raise UserError(f"unknown engine {spec!r}: {SPEC_HELP}")
    if not target:
        raise UserError(f"engine {spec!r} needs a target after '{kind}:': {SPEC_HELP}")
    try:
        return _build(kind, target, spec, options)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise UserError(f"engine {spec!r} does not take that option: {exc}") from exc


def _build(kind: str, target: str, spec: str, options: dict) -> Engine:
    if kind == "hf":
        from agentdata.engines.hf import HFEngine

        return HFEngine(target, spec=spec, **options)
    if kind == "vllm":
        from agentdata.engines.vllm_engine import VLLMEngine

        return VLLMEngine(target, spec=spec, **options)
    from agentdata.engines.openai_compat import OpenAIEngine

    return OpenAIEngine(target, spec=spec, **options)
