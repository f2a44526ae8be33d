"""vLLM's async engine: continuous batching on GPUs, tensor / data parallel by its own options.

vLLM is optional and imported only here, when a `vllm:` spec is loaded.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from agentdata.engines.base import Engine, Generation, GenerationRequest, error_generation
from agentdata.engines.hf_generate import render_prompt
from agentdata.engines.prompt_template import apply_prompt_template
from agentdata.engines.vllm_mapping import completion_generation, failed_generation, sampling_params
from agentdata.errors import MissingDependencyError, UserError


def import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError("vLLM (the vllm: engine)", "agentdata[vllm]") from exc
    return vllm


class VLLMEngine(Engine):
    """Each request goes straight into vLLM's scheduler, which batches continuously.

    Every option (tensor_parallel_size, data_parallel_size, gpu_memory_utilization,
    max_model_len, dtype, enforce_eager, ...) is passed to `vllm.AsyncEngineArgs`, except
    `prompt_template` (engines.prompt_template: a base model gets the plain template).
    The engine is started on first use, inside the running event loop.
    """

    def __init__(
        self, model_path: str | Path, *, spec: str | None = None, prompt_template: str = "auto", **engine_options
    ):
        self._vllm = import_vllm()
        from transformers import AutoTokenizer

        self.model_path = (
            str(Path(model_path).expanduser()) if Path(model_path).expanduser().exists() else str(model_path)
        )
        self.spec = spec or f"vllm:{model_path}"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        except OSError as exc:
            raise UserError(f"{model_path}: cannot load a tokenizer ({exc})") from exc
        apply_prompt_template(self.tokenizer, prompt_template, model=str(model_path))
        self.engine_options = engine_options
        self._engine = None
        self._request_ids = itertools.count()

    def _started_engine(self):
        if self._engine is None:
            vllm = self._vllm
            args = vllm.AsyncEngineArgs(model=self.model_path, **self.engine_options)
            self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        return self._engine

    async def generate(self, request: GenerationRequest) -> Generation:
        prompt_ids: list[int] = []
        try:
            prompt_ids = self.tokenizer(render_prompt(self.tokenizer, request), add_special_tokens=False)["input_ids"]
            engine = self._started_engine()
            final = None
            request_id = f"agentdata-{next(self._request_ids)}"
            params = sampling_params(self._vllm.SamplingParams, request)
            async for output in engine.generate({"prompt_token_ids": prompt_ids}, params, request_id):
                final = output
            if final is None or not final.outputs:
                return error_generation("vLLM returned no output", prompt_tokens=len(prompt_ids))
            return completion_generation(final.outputs[0], request, len(prompt_ids))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never raise for one request; a prompt that fills the context is `context`
            return failed_generation(exc, prompt_tokens=len(prompt_ids))

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is None:
            return
        for name in ("shutdown", "shutdown_background_loop"):
            stop = getattr(engine, name, None)
            if callable(stop):
                result = stop()
                if asyncio.iscoroutine(result):
                    await result
                return
