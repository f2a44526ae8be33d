"""The policy being trained, served as an agentdata `Engine` for the agent loop.

On the CPU (and on a GPU without vLLM) rollouts must come from the current weights, so the
engine wraps the trainer's own model instead of loading a copy: requests waiting at a
moment are batched into one `generate` call, exactly as the hf engine does.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from agentdata.engines.base import Engine, Generation, GenerationRequest, error_generation
from agentdata.engines.batching import RequestBatcher
from agentdata.engines.hf_generate import generate_batch, render_prompt, sampling_key


class PolicyEngine(Engine):
    """Generates with `model` (a live, training model) and `tokenizer`."""

    def __init__(self, model: Any, tokenizer: Any, spec: str = "policy", max_batch_size: int = 64):
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.generation_s = 0.0  # wall time inside generate calls, for the step-time breakdown
        self._batcher = RequestBatcher(self._run_batch, max_batch_size=max_batch_size)

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self._batcher.submit(request)

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        started = time.perf_counter()
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling
        padding_side, self.tokenizer.padding_side = self.tokenizer.padding_side, "left"
        try:
            prompts = [render_prompt(self.tokenizer, request) for request in requests]
            results: dict[int, Generation] = {}
            order = sorted(range(len(requests)), key=lambda i: str(sampling_key(requests[i])))
            for key, group in itertools.groupby(order, key=lambda i: sampling_key(requests[i])):
                group = list(group)
                try:
                    generations = generate_batch(self.model, self.tokenizer, [requests[i] for i in group],
                                                 [prompts[i] for i in group], key)
                except Exception as exc:  # one failed batch fails its requests, not the training run
                    generations = [error_generation(f"{type(exc).__name__}: {exc}") for _ in group]
                results.update(zip(group, generations))
            return [results[i] for i in range(len(requests))]
        finally:
            self.tokenizer.padding_side = padding_side
            if was_training:
                self.model.train()
            self.generation_s += time.perf_counter() - started

    async def aclose(self) -> None:
        await self._batcher.aclose()
