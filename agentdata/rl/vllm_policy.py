"""Rollouts from the colocated vLLM engine that GRPOTrainer keeps in sync with the policy.

With `use_vllm` (TRL's `vllm_mode: colocate`), TRL builds `trainer.vllm_generation.llm` and
syncs the training weights into it before each rollout batch; this engine sends the agent
loop's requests to that same `vllm.LLM`, so generation is fast and still on-policy.

`LLM.generate` is a blocking call that must not run twice at once, while a GRPO batch has
many rollouts in flight, each asking for its next turn whenever its tool call returns. The
requests therefore go through one queue with a single consumer (`engines.batching.RequestBatcher`):
the requests waiting at a moment become one `generate` call (one `SamplingParams` each, so every
request keeps its own budget, stop strings and seed), and the requests that arrive meanwhile
make the next call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentdata.engines.base import Generation, GenerationRequest, cut_at_first_stop, error_generation
from agentdata.engines.batching import BatchedEngine, RequestBatcher
from agentdata.engines.hf_generate import render_prompt

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
            sampling_params = self._sampling_params or vllm_sampling_params()
            prompts = [render_prompt(self.tokenizer, request) for request in requests]
            params = [
                sampling_params(
                    max_tokens=r.max_new_tokens,
                    temperature=r.temperature,
                    top_p=r.top_p,
                    stop=list(r.stop),
                    seed=r.seed,
                )
                for r in requests
            ]
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
            return [request_output_generation(output, request) for output, request in zip(outputs, requests)]
        except Exception as exc:
            return [error_generation(f"{type(exc).__name__}: {exc}") for _ in requests]
        finally:
            self.generation_s += time.perf_counter() - started


def request_output_generation(output: Any, request: GenerationRequest) -> Generation:
    """A vLLM RequestOutput -> Generation (vLLM leaves a matched stop string out of the text and names it)."""
    choice = output.outputs[0]
    stop = choice.stop_reason if isinstance(choice.stop_reason, str) else None
    text, matched = cut_at_first_stop(choice.text, tuple(request.stop))
    finish = "length" if choice.finish_reason == "length" else "stop"
    return Generation(
        text=text,
        stop_reason=stop or matched,
        finish_reason=finish,
        prompt_tokens=len(output.prompt_token_ids or []),
        completion_tokens=len(choice.token_ids),
    )
