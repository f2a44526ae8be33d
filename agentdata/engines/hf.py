"""Local transformers models (CPU, or the GPU when there is one), with request batching.

`ModelEngine` generates with a model and tokenizer it is given: the hf engine loads them
from a dir (`HFEngine`), GRPO passes the model being trained (`rl.policy.PolicyEngine`).
Requests join the running batch between two decode steps and each returns as soon as it is done
(engines.streaming, engines.hf_stream); a model whose cache cannot take rows of other lengths
runs whole batches instead (engines.batching, engines.hf_batch).
A prompt longer than the model's context is refused before anything is generated
(`finish_reason="context"`), and no row generates past the context.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from agentdata.engines.base import Generation, GenerationRequest, context_generation, error_generation
from agentdata.engines.batching import BatchedEngine, RequestBatcher
from agentdata.engines.hf_batch import generate_batch
from agentdata.engines.hf_generate import (
    RowStop,
    eos_token_ids,
    pad_token,
    render_prompt,
    sampling_key,
    stop_between_layers,
)
from agentdata.engines.hf_model import check_model_dir, context_length, default_device, load_model_and_tokenizer
from agentdata.engines.hf_stream import Row, RunningBatch, can_stream
from agentdata.engines.streaming import Job, StreamingBatcher

__all__ = ["HFEngine", "ModelEngine", "default_device", "load_model_and_tokenizer"]


class ModelEngine(BatchedEngine):
    """Generates with `model` and `tokenizer`, up to `max_batch_size` requests at a time.

    A batch holds requests of one temperature/top_p; others wait for it to drain (or, for whole
    batches, go into one call per setting). A model in training mode is switched to eval mode while
    it generates (no dropout) and back.
    """

    label = "transformers"

    def __init__(self, model: Any, tokenizer: Any, *, spec: str = "model", max_batch_size: int = 32):
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.context_tokens = context_length(model)
        self.generate_calls = 0  # how many prefills (joins of a batch) ran: batching at work
        self.generation_s = 0.0  # wall time generating, for GRPO's step-time breakdown
        self._longest_token_chars = _longest_token_chars(tokenizer)
        self._closing = threading.Event()
        self.max_batch_size = max_batch_size
        self.set_streaming(can_stream(model))

    def set_streaming(self, on: bool) -> None:
        """Let requests join the running batch (the default where the model's cache allows it), or run
        whole batches (bench/'s baselines and replays switch it). Only while nothing is generating."""
        if on and not can_stream(self.model):
            raise ValueError(f"{self.spec}: this model's cache cannot take rows of other lengths")
        if on:
            self._batcher = StreamingBatcher(
                self._open_batch, sampling_key, self._generating, self._closing, max_batch_size=self.max_batch_size
            )
        else:
            self._batcher = RequestBatcher(self._run_batch, max_batch_size=self.max_batch_size)

    def _open_batch(self, key: Hashable) -> _JobBatch:
        return _JobBatch(self, key)

    @contextmanager
    def _eval_mode(self) -> Iterator[None]:
        """The model in eval mode while it generates (and back after), the time counted in generation_s."""
        started = time.perf_counter()
        was_training = bool(getattr(self.model, "training", False))
        self.model.eval()
        try:
            yield
        finally:
            if was_training:
                self.model.train()
            self.generation_s += time.perf_counter() - started

    @contextmanager
    def _generating(self) -> Iterator[None]:
        """While the streaming worker runs: eval mode, no autograd, a stop check before every layer."""
        with self._eval_mode(), torch.inference_mode(), stop_between_layers(self.model, self._should_stop):
            yield

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        with self._eval_mode():
            return self._generate_all(requests)

    def _generate_all(self, requests: list[GenerationRequest]) -> list[Generation]:
        requests = list(requests)  # rows whose budget would pass the context get a smaller one
        results: dict[int, Generation] = {}
        prompt_ids: dict[int, list[int]] = {}
        for index, request in enumerate(requests):
            prepared = self._prepare(request)
            if isinstance(prepared, Generation):  # a bad or too long request fails alone, not its whole batch
                results[index] = prepared
            else:
                requests[index], prompt_ids[index] = prepared
        ready = sorted(prompt_ids, key=lambda index: sampling_key(requests[index]))
        for key, group in itertools.groupby(ready, key=lambda index: sampling_key(requests[index])):
            group = list(group)
            self.generate_calls += 1
            try:
                generations = generate_batch(
                    self.model,
                    self.tokenizer,
                    [requests[i] for i in group],
                    [prompt_ids[i] for i in group],
                    key,
                    should_stop=self._should_stop,
                )
            except Exception as exc:
                generations = [error_generation(f"{type(exc).__name__}: {exc}") for _ in group]
            results.update(zip(group, generations))
        return [results[index] for index in range(len(requests))]

    def _should_stop(self) -> bool:
        """Stop generating when the engine closes or when every caller of the batch was cancelled."""
        return self._closing.is_set() or self._batcher.abandoned()

    def _prepare(self, request: GenerationRequest) -> tuple[GenerationRequest, list[int]] | Generation:
        """The request with its budget kept inside the context, and its prompt's ids; or why it cannot run."""
        prepared = self._prompt_ids(request)
        if isinstance(prepared, Generation):
            return prepared
        return self._within_context(request, len(prepared)), prepared

    def _prompt_ids(self, request: GenerationRequest) -> list[int] | Generation:
        """The request's prompt as token ids, or why it cannot be generated for."""
        try:
            prompt = render_prompt(self.tokenizer, request)
        except Exception as exc:
            return error_generation(f"chat template failed: {type(exc).__name__}: {exc}")
        context = self.context_tokens
        if context and len(prompt) > context * self._longest_token_chars:
            # Cannot fit whatever it tokenizes to; tokenizing a huge prompt would take long by itself.
            return context_generation(
                f"the prompt ({len(prompt):,} characters) is longer than the model's context of {context:,} tokens"
            )
        # The chat template already holds any BOS token, so the tokenizer must not add another.
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if context and len(ids) >= context:
            return context_generation(
                f"the prompt ({len(ids):,} tokens) leaves no room in the model's context of {context:,} tokens",
                prompt_tokens=len(ids),
            )
        return ids

    def _within_context(self, request: GenerationRequest, prompt_tokens: int) -> GenerationRequest:
        room = self.context_tokens - prompt_tokens if self.context_tokens else request.max_new_tokens
        return request if request.max_new_tokens <= room else dataclasses.replace(request, max_new_tokens=room)

    async def aclose(self) -> None:
        self._closing.set()  # a batch still generating stops at its next token (or layer, in a prefill)
        await super().aclose()


class _JobBatch:
    """The streaming batcher's jobs fed to a `RunningBatch`: each prompt is checked and tokenized first
    (a bad or too long one fails alone), and its budget kept inside the context."""

    def __init__(self, engine: ModelEngine, key: Hashable):
        self.engine, self.key = engine, key
        self.eos = eos_token_ids(engine.model, engine.tokenizer)
        self.running = RunningBatch(engine.model, engine.tokenizer, key, pad_token(engine.tokenizer))

    def __len__(self) -> int:
        return len(self.running)

    def admit(self, jobs: list[Job]) -> None:
        rows = []
        for job in jobs:
            prepared = self.engine._prepare(job.request)
            if isinstance(prepared, Generation):
                job.deliver(prepared)
                continue
            request, prompt_ids = prepared
            stop = RowStop(self.engine.tokenizer, request, self.eos)
            rows.append(Row(request, prompt_ids, stop, job.deliver, job.cancelled))
        if rows:
            self.engine.generate_calls += 1
            self.running.admit(rows)

    def step(self) -> None:
        self.running.step()

    def fail_all(self, generation: Generation) -> None:
        self.running.fail_all(generation)

    def all_cancelled(self) -> bool:
        return self.running.all_cancelled()


class HFEngine(ModelEngine):
    """The transformers model in a local dir (`hf:DIR`); `prompt_template` as in engines.prompt_template."""

    @staticmethod
    def check_target(target: str) -> None:
        """What is known before the model loads (engines.spec.check_engine): the dir holds a transformers model."""
        check_model_dir(target)

    def __init__(
        self,
        model_dir: str | Path,
        *,
        spec: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        max_batch_size: int = 32,
        prompt_template: str = "auto",
    ):
        self.model_dir = Path(model_dir).expanduser()
        model, tokenizer = load_model_and_tokenizer(
            self.model_dir, device=device, dtype=dtype or "auto", prompt_template=prompt_template
        )
        super().__init__(model, tokenizer, spec=spec or f"hf:{model_dir}", max_batch_size=max_batch_size)


def _longest_token_chars(tokenizer: Any) -> int:
    """An upper bound of the characters one token covers (its vocabulary entry is at least as long)."""
    try:
        return max(map(len, tokenizer.get_vocab()), default=1) or 1
    except Exception:  # a tokenizer without a vocabulary to list: no shortcut, always tokenize
        return 1 << 30
