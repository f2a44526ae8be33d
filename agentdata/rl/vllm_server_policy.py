"""Rollouts from a vLLM server that TRL keeps in sync with the policy (TRL's `vllm_mode: server`).

For runs where generation gets GPUs of its own (other GPUs of the node, or other nodes):
`trl vllm-serve --model M` (vLLM's server in its dev mode) runs there, and GRPOTrainer pushes
the training weights to it over NCCL before each step's rollouts. This engine sends the agent
loop's requests to that server with TRL's own client (`VLLMClient.generate`, vLLM's
`/v1/completions` with token ids), so rollouts stay on-policy.

Requests go through one queue with a single consumer (`engines.batching.RequestBatcher`), as
for the colocated engine: the requests waiting at a moment become one HTTP call per sampling
setting (temperature, top_p, stop strings), generated to the largest budget among them; each
row is then cut to its own budget (the same as generating it with that budget: sampling is
left to right). Prompts are rendered with the trainer's tokenizer and sent as token ids, so the
server adds nothing (no second BOS). TRL's client sends no per-request seed: one call shares one
seed, and the members of a GRPO group (the same prompt) would all sample the same completion.
agentdata's own client (`rl.vllm_completions.CompletionsClient`, the CPU build's path) sends seeded
requests one a prompt, each with its seed, so a seed reproduces the rollouts there.

VLLMClient returns token ids only; the text is decoded here and the finish reason judged from
it: a stop string in the text, or the end-of-sequence token, is a stop; reaching the budget is
`length`; an earlier end that shows neither is a stop whose kind is unknown (`stop_known=False`,
the agent loop judges from the text, as for servers that do not say). A prompt that does not fit
the model's context fails the server's whole call (vLLM's "maximum context length" answer): the
call's requests are then sent one by one and only the prompts too long end as `context`
(`engines.vllm_mapping.failed_generation`).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from agentdata.engines.base import Generation, GenerationRequest, cut_at_first_stop
from agentdata.engines.batching import BatchedEngine, RequestBatcher
from agentdata.engines.hf_generate import render_prompt
from agentdata.engines.vllm_mapping import failed_generation, is_context_overflow

MAX_BATCH_SIZE = 1024


def server_client(args: Any) -> Any:
    """TRL's VLLMClient for the server a GRPOConfig names (base URL, else host and port)."""
    from trl.generation.vllm_client import VLLMClient

    if args.vllm_server_base_url:
        return VLLMClient(base_url=args.vllm_server_base_url, connection_timeout=args.vllm_server_timeout)
    return VLLMClient(
        host=args.vllm_server_host, server_port=args.vllm_server_port, connection_timeout=args.vllm_server_timeout
    )


class ServerVLLMEngine(BatchedEngine):
    """The agent loop's engine over TRL's `VLLMClient` (`client.generate(prompts=token ids, ...)`)."""

    def __init__(
        self, client: Any, tokenizer: Any, *, spec: str = "policy-vllm-server", max_batch_size: int = MAX_BATCH_SIZE
    ):
        self.client = client
        self.tokenizer = tokenizer
        self.spec = spec
        self.generation_s = 0.0
        self.generate_calls = 0
        self._eos_ids = {tokenizer.eos_token_id} - {None}
        self._batcher = RequestBatcher(self._run_batch, max_batch_size=max_batch_size)

    @classmethod
    def for_trainer(cls, trainer: Any) -> ServerVLLMEngine:
        """The main process reuses the client TRL syncs weights with; the others open their own."""
        client = getattr(trainer.vllm_generation, "vllm_client", None) or server_client(trainer.args)
        return cls(client, trainer.processing_class)

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        started = time.perf_counter()
        results: dict[int, Generation] = {}
        try:
            by_setting = sorted(range(len(requests)), key=lambda i: _setting(requests[i]))
            for _, group in itertools.groupby(by_setting, key=lambda i: _setting(requests[i])):
                group = list(group)
                results.update(zip(group, self._generate_group([requests[i] for i in group])))
        finally:
            self.generation_s += time.perf_counter() - started
        return [results[index] for index in range(len(requests))]

    def _generate_group(self, requests: list[GenerationRequest]) -> list[Generation]:
        """One `generate` call for requests that share temperature, top_p and stop strings (seeded requests one
        a prompt, where the client can)."""
        first = requests[0]
        try:
            prompts = [
                self.tokenizer(render_prompt(self.tokenizer, request), add_special_tokens=False)["input_ids"]
                for request in requests
            ]
            self.generate_calls += 1
            stop = {"stop": list(first.stop)} if first.stop else None
            if hasattr(self.client, "generate_seeded") and first.seed is not None:  # a group is all seeded or none
                output = self.client.generate_seeded(
                    prompts,
                    [request.seed for request in requests],
                    [request.max_new_tokens for request in requests],
                    temperature=first.temperature,
                    top_p=first.top_p,
                    generation_kwargs=stop,
                )
            else:
                output = self.client.generate(
                    prompts=prompts,
                    n=1,
                    temperature=first.temperature,
                    top_p=first.top_p,
                    max_tokens=max(request.max_new_tokens for request in requests),
                    logprobs=None,
                    generation_kwargs=stop,
                )
            completions = output["completion_ids"]
            if len(completions) != len(requests):
                raise RuntimeError(f"the server returned {len(completions)} completions for {len(requests)} prompts")
            return [
                self._row(request, list(ids), len(prompt))
                for request, ids, prompt in zip(requests, completions, prompts)
            ]
        except Exception as exc:  # a lost server fails this call's requests, not the run
            if len(requests) > 1 and is_context_overflow(exc):  # one prompt too long fails the call: find it
                return [generation for request in requests for generation in self._generate_group([request])]
            return [failed_generation(exc) for _ in requests]

    def _row(self, request: GenerationRequest, ids: list[int], prompt_tokens: int) -> Generation:
        ids = ids[: request.max_new_tokens]
        text, matched = cut_at_first_stop(self.tokenizer.decode(ids, skip_special_tokens=True), tuple(request.stop))
        done = dict(stop_reason=matched, prompt_tokens=prompt_tokens, completion_tokens=len(ids))
        if matched is not None or (ids and ids[-1] in self._eos_ids):
            return Generation(text=text, finish_reason="stop", **done)
        if len(ids) >= request.max_new_tokens:
            return Generation(text=text, finish_reason="length", **done)
        return Generation(text=text, finish_reason="stop", stop_known=False, **done)


def _setting(request: GenerationRequest) -> tuple:
    """What one call shares: the sampling fields, and whether its requests carry seeds (sent one a prompt)."""
    return (float(request.temperature), float(request.top_p), tuple(request.stop), request.seed is None)
