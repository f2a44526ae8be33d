"""`auto:DIR`: a local model dir on the faster engine this machine has — vLLM where it is installed
(engines/vllm_server.vllm_by_default: `.venv-vllm`, or vLLM in this process, and AGENTDATA_VLLM not off),
else transformers. What the quickstart evaluates its trained model with; `hf:DIR` and `vllm:DIR` name one
engine outright. Any option keeps transformers, as it does for the bare `smollm2`: the two engines take
different options. The engine built records the spec it resolved to (`vllm:DIR` or `hf:DIR`)."""

from __future__ import annotations

from typing import Any

from agentdata.engines.base import Engine


def auto_engine(target: str, *, spec: str | None = None, **options: Any) -> Engine:
    from agentdata.engines.spec import ENGINES  # the registry imports this module
    from agentdata.engines.vllm_server import local_engine_kind

    kind = local_engine_kind(options)
    return ENGINES.get(kind)(target, spec=f"{kind}:{target}", **options)


def auto_check_target(target: str) -> None:
    from agentdata.engines.hf import HFEngine

    HFEngine.check_target(target)  # a model dir either way: the same check before any work


auto_engine.check_target = auto_check_target  # type: ignore[attr-defined]
