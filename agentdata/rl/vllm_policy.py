"""Rollouts from the colocated vLLM engine that GRPOTrainer keeps in sync with the policy.

With `use_vllm`, TRL builds `trainer.vllm_generation.llm` (colocate mode) and syncs the
training weights into it before each rollout batch; this engine sends the agent loop's
requests to that same `LLM`, so generation is fast and still on-policy.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentdata.engines.base import Engine, Generation, GenerationRequest, cut_at_first_stop, error_generation
from agentdata.engines.hf_generate import render_prompt


class ColocatedVLLMEngine(Engine):
    def __init__(self, trainer: Any, spec: str = "policy-vllm"):
        self.trainer = trainer
        self.tokenizer = trainer.processing_class
        self.spec = spec
        self.generation_s = 0.0
        self._pending: list[tuple[GenerationRequest, asyncio.Future]] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        await asyncio.sleep(0)  # let every rollout of this tick queue its request, then serve them together
        if self._pending:
            batch, self._pending = self._pending, []
            results = await asyncio.to_thread(self._run_batch, [request for request, _ in batch])
            for (_, waiting), result in zip(batch, results):
                waiting.set_result(result)
        return await future

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        from vllm import SamplingParams

        started = time.perf_counter()
        try:
            prompts = [render_prompt(self.tokenizer, request) for request in requests]
            params = [SamplingParams(max_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p,
                                     stop=list(r.stop), seed=r.seed) for r in requests]
            outputs = self.trainer.vllm_generation.llm.generate(prompts, params, use_tqdm=False)
            return [self._to_generation(output, request) for output, request in zip(outputs, requests)]
        except Exception as exc:
            return [error_generation(f"{type(exc).__name__}: {exc}") for _ in requests]
        finally:
            self.generation_s += time.perf_counter() - started

    @staticmethod
    def _to_generation(output: Any, request: GenerationRequest) -> Generation:
        choice = output.outputs[0]
        stop = choice.stop_reason if isinstance(choice.stop_reason, str) else None
        text, matched = cut_at_first_stop(choice.text, tuple(request.stop))
        finish = "length" if choice.finish_reason == "length" else "stop"
        return Generation(text=text, stop_reason=stop or matched, finish_reason=finish,
                          prompt_tokens=len(output.prompt_token_ids), completion_tokens=len(choice.token_ids))
