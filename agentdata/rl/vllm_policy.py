"""Rollouts from the colocated vLLM engine that GRPOTrainer keeps in sync with the policy.

With `use_vllm` (TRL's `vllm_mode: colocate`), TRL builds `trainer.vllm_generation.llm` and
syncs the training weights into it before each rollout batch; this engine sends the agent
loop's requests to that same `vllm.LLM`, so generation is fast and still on-policy.

`LLM.generate` is a blocking call that must not run twice at once, while a GRPO batch has
many rollouts in flight, each asking for its next turn whenever its tool call returns. The
requests therefore go through one queue with a single consumer (`engines.batching.RequestBatcher`):
the requests waiting at a moment become one `generate` call (one `SamplingParams` each, so every
request keeps its own budget, stop strings and seed), and the requests that arrive meanwhile
make the next call. A prompt that does not fit the model's context fails vLLM's whole call; the
call's requests are then run one by one, so only the prompts too long end as `context`. Requests
and outputs are mapped as for the `vllm:` engine (`engines.vllm_mapping`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentdata.engines.base import Generation, GenerationRequest
from agentdata.engines.batching import BatchedEngine, RequestBatcher
from agentdata.engines.hf_generate import render_prompt
from agentdata.engines.vllm_mapping import (
    completion_generation,
    failed_generation,
    is_context_overflow,
    sampling_params,
)

MAX_BATCH_SIZE = 1024  # vLLM schedules within a call itself (max_num_seqs); this only bounds one call's list


def vllm_sampling_params() -> Callable[..., Any]:
    from vllm import SamplingParams

    return SamplingParams


class ColocatedVLLMEngine(BatchedEngine):
    """The agent loop's engine over a `vllm.LLM` (`llm.generate(prompts, sampling_params, use_tqdm=False)`)."""

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        *,
        spec: str = "policy-vllm",
        max_batch_size: int = MAX_BATCH_SIZE,
        sampling_params: Callable[..., Any] | None = None,
    ):
        self.llm = llm
        self.tokenizer = tokenizer
        self.spec = spec
        self.generation_s = 0.0  # wall time inside generate calls, for GRPO's step-time breakdown
        self._sampling_params = sampling_params
        self._batcher = RequestBatcher(self._run_batch, max_batch_size=max_batch_size)

    @classmethod
    def for_trainer(cls, trainer: Any) -> ColocatedVLLMEngine:
        return cls(trainer.vllm_generation.llm, trainer.processing_class)

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        started = time.perf_counter()
        try:
            return self._generate(requests)
        finally:
            self.generation_s += time.perf_counter() - started

    def _generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        try:
            factory = self._sampling_params or vllm_sampling_params()
            prompts = [render_prompt(self.tokenizer, request) for request in requests]
            params = [sampling_params(factory, request) for request in requests]
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as exc:
            if len(requests) > 1 and is_context_overflow(exc):  # one prompt too long fails them all: find it
                return [generation for request in requests for generation in self._generate([request])]
            return [failed_generation(exc) for _ in requests]
        return [
            completion_generation(output.outputs[0], request, len(output.prompt_token_ids or []))
            for output, request in zip(outputs, requests)
        ]
