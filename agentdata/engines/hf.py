"""A local transformers model (CPU, or the GPU when there is one), with request batching."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from agentdata.engines.base import Engine, Generation, GenerationRequest, error_generation
from agentdata.engines.batching import RequestBatcher
from agentdata.engines.hf_generate import generate_batch, render_prompt, sampling_key
from agentdata.errors import UserError


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model_and_tokenizer(model_dir: str | Path, device: str | None = None, dtype: str | None = None):
    """The model in eval mode on `device` and its tokenizer, set up for left-padded batches."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir).expanduser()
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a transformers model directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.chat_template is None:
        raise UserError(f"{path}: the tokenizer has no chat template; use an instruct/chat model")
    # Left padding keeps every row's last prompt token next to its first generated one.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch_dtype = getattr(torch, dtype) if dtype else "auto"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    model.to(device or default_device())
    model.eval()
    return model, tokenizer


class HFEngine(Engine):
    """Runs a transformers model; all requests waiting at a moment go into one `generate` call.

    Requests in a batch that differ in temperature/top_p are split into one call per setting.
    """

    def __init__(self, model_dir: str | Path, *, spec: str | None = None, device: str | None = None,
                 dtype: str | None = None, max_batch_size: int = 32):
        self.spec = spec or f"hf:{model_dir}"
        self.model_dir = Path(model_dir).expanduser()
        self.model, self.tokenizer = load_model_and_tokenizer(self.model_dir, device=device, dtype=dtype)
        self.generate_calls = 0  # how many `model.generate` calls ran: batching at work
        self._closing = threading.Event()
        self._batcher = RequestBatcher(self._run_batch, max_batch_size=max_batch_size)

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self._batcher.submit(request)

    def _run_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        results: dict[int, Generation] = {}
        prompts: dict[int, str] = {}
        for index, request in enumerate(requests):
            try:
                prompts[index] = render_prompt(self.tokenizer, request)
            except Exception as exc:  # a bad request fails alone, not its whole batch
                results[index] = error_generation(f"chat template failed: {type(exc).__name__}: {exc}")
        ready = sorted(prompts, key=lambda index: _group_order(sampling_key(requests[index])))
        for key, group in itertools.groupby(ready, key=lambda index: sampling_key(requests[index])):
            group = list(group)
            self.generate_calls += 1
            try:
                generations = generate_batch(self.model, self.tokenizer, [requests[i] for i in group],
                                             [prompts[i] for i in group], key, abort=self._closing)
            except Exception as exc:
                generations = [error_generation(f"{type(exc).__name__}: {exc}") for _ in group]
            results.update(zip(group, generations))
        return [results[index] for index in range(len(requests))]

    @property
    def batch_sizes(self) -> list[int]:
        return self._batcher.batch_sizes

    async def aclose(self) -> None:
        self._closing.set()  # a batch still generating stops at its next token
        await self._batcher.aclose()


def _group_order(key) -> tuple:
    return (key.do_sample, key.temperature, key.top_p)
