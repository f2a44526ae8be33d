"""The pieces of generating with a local transformers model: prompts, stopping, padding, the prefix cache.

Each row keeps its own stop strings and token budget (`RowStop`): a row is done at its own stop
string, end of turn or budget, and its text is cut there (`row_generation`). hf_stream decodes
with them, hf_batch runs one batch.

The prompts of a batch usually begin alike (the system prompt, a tool list, worked
examples): that shared prefix is run through the model once and its key/value cache is
given to every row (`shared_prefix`), instead of once per row. On a CPU the prompts' prefill
is most of the generation time, so this is where batching pays (bench/bench_prefix.py).

A stop check (the engine is closing, or nobody waits for the batch any more: Ctrl-C,
SIGTERM) ends the call within a token, and within one layer during a long prompt's
prefill, which is a single forward pass.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache, StoppingCriteria

from agentdata.engines.base import Generation, GenerationRequest, cut_at_first_stop
from agentdata.engines.tool_prompt import ignores_tools, with_tools_in_text

StopCheck = Callable[[], bool]  # called from the generating thread: True means stop now
# A shorter common start is not worth a separate forward pass.
MIN_SHARED_PREFIX = 16


class GenerationAborted(RuntimeError):
    """The engine was closed, or its callers went away, while this call was generating."""


@dataclass(frozen=True, order=True)
class SamplingKey:
    """Settings that one `generate` call applies to all its rows."""

    do_sample: bool
    temperature: float
    top_p: float


def sampling_key(request: GenerationRequest) -> SamplingKey:
    if request.temperature <= 0:
        return SamplingKey(do_sample=False, temperature=0.0, top_p=1.0)
    return SamplingKey(do_sample=True, temperature=float(request.temperature), top_p=float(request.top_p))


def render_prompt(tokenizer, request: GenerationRequest) -> str:
    """The chat template applied to the request's messages (and tools, for native tool calling), as text.
    A template that ignores tools gets them written into the conversation instead (engines/tool_prompt.py)."""
    options = {"tools": request.tools} if request.tools else {}
    messages = template_messages(request.messages)
    if request.tools and ignores_tools(tokenizer):
        messages, options = with_tools_in_text(messages, request.tools), {}
    if request.continue_final:
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=False, continue_final_message=True, **options
        )
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **options)


def template_messages(messages: list[dict]) -> list[dict]:
    """Tool-call arguments as mappings: most chat templates iterate them, and many fail on a JSON string."""
    rendered = []
    for message in messages:
        if message.get("tool_calls"):
            calls = [
                {**call, "function": {**call["function"], "arguments": _arguments(call["function"])}}
                for call in message["tool_calls"]
            ]
            message = {**message, "tool_calls": calls}
        rendered.append(message)
    return rendered


def _arguments(function: dict):
    arguments = function.get("arguments")
    return json.loads(arguments) if isinstance(arguments, str) else arguments


class RowStop:
    """When one row is done: at a stop string, an end-of-turn token or its token budget.

    It records how many tokens the row had generated when it stopped, and why, because after a
    row is done `model.generate` fills it with padding (often the same id as EOS).
    """

    def __init__(self, tokenizer, request: GenerationRequest, eos_token_ids: set[int]):
        self.tokenizer = tokenizer
        self.stops = tuple(request.stop)
        self.budget = request.max_new_tokens
        self.eos_token_ids = eos_token_ids
        # Enough trailing tokens to contain the longest stop string (a token is at least one
        # character, and a few extra cover tokens that decode to partial characters).
        self.window = max((len(stop) for stop in self.stops), default=0) + 4
        self.done_at: int | None = None
        self.reason: str | None = None

    def observe(self, tokens) -> bool:
        """Whether the row is done, given the tokens it has generated so far (recording when and why)."""
        if self.done_at is None:
            reason = self._stop_reason(tokens)
            if reason is not None:
                self.done_at, self.reason = len(tokens), reason
        return self.done_at is not None

    def _stop_reason(self, tokens) -> str | None:
        if int(tokens[-1]) in self.eos_token_ids:
            return "eos"
        if self.stops:
            tail = self.tokenizer.decode(tokens[-self.window :], skip_special_tokens=True)
            if any(stop in tail for stop in self.stops):
                return "stop_string"
        if len(tokens) >= self.budget:
            return "length"
        return None


class PerRowStopping(StoppingCriteria):
    """Every row's `RowStop`: `observe(row, tokens)` for the decode loop, and `model.generate`'s criterion."""

    def __init__(
        self,
        tokenizer,
        requests: list[GenerationRequest],
        prompt_length: int,
        eos_token_ids: set[int],
        should_stop: StopCheck | None = None,
    ):
        self.rows = [RowStop(tokenizer, request, eos_token_ids) for request in requests]
        self.prompt_length = prompt_length
        self.eos_token_ids = eos_token_ids
        self.should_stop = should_stop

    def __deepcopy__(self, memo):
        # generate() deep-copies its criteria; the copy must share our records.
        return self

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        generated = input_ids[:, self.prompt_length :]
        if self.should_stop is not None and self.should_stop():
            # The engine is closing (Ctrl-C, kill): end every row now rather than finish a long batch.
            return torch.ones(generated.shape[0], dtype=torch.bool, device=input_ids.device)
        done = [self.observe(row, generated[row]) for row in range(generated.shape[0])]
        return torch.tensor(done, device=input_ids.device)

    def observe(self, row: int, tokens) -> bool:
        return self.rows[row].observe(tokens)


def generation_seed(requests: list[GenerationRequest]) -> int | None:
    """One seed for a batch, derived from its requests' seeds: a re-run with the same batches repeats."""
    seeds = [request.seed for request in requests if request.seed is not None]
    if not seeds:
        return None
    digest = hashlib.sha256(",".join(map(str, seeds)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def pad_token(tokenizer) -> int:
    """The id that pads a batch: the tokenizer's pad token, else its end-of-sequence token."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def shared_prefix_length(prompt_ids: list[list[int]]) -> int:
    """How many leading tokens every prompt of the batch has in common, leaving each row at least one
    token of its own (generate needs a new token to start from); 0 when sharing would not pay."""
    if len(prompt_ids) < 2:
        return 0
    first, shortest = prompt_ids[0], min(len(ids) for ids in prompt_ids)
    length = 0
    while length < shortest - 1 and all(ids[length] == first[length] for ids in prompt_ids):
        length += 1
    return length if length >= MIN_SHARED_PREFIX else 0


def padded_batch(
    prompt_ids: list[list[int]], pad_token_id: int, device, prefix_length: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of prompts as [shared prefix][padding][the row's own tokens].

    Padding goes between the prefix and the rest (at the left when there is no prefix), so every
    row's last prompt token meets its first new one and the prefix's cache fits every row;
    generate derives each token's position from the attention mask, so the gap changes nothing.
    """
    width = prefix_length + max(len(ids) - prefix_length for ids in prompt_ids)
    input_ids = torch.full((len(prompt_ids), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for row, ids in enumerate(prompt_ids):
        own = ids[prefix_length:]
        input_ids[row, :prefix_length] = torch.tensor(ids[:prefix_length], dtype=torch.long)
        attention_mask[row, :prefix_length] = 1
        if own:
            input_ids[row, width - len(own) :] = torch.tensor(own, dtype=torch.long)
            attention_mask[row, width - len(own) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def prefix_cache(model, prefix: list[int], rows: int) -> DynamicCache:
    """The key/value cache of `prefix`, computed once and repeated for `rows` rows."""
    cache = DynamicCache(config=model.config)
    model(
        input_ids=torch.tensor([prefix], dtype=torch.long, device=model.device),
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    cache.batch_repeat_interleave(rows)
    return cache


def has_plain_cache(model) -> bool:
    """Models whose generate starts from a plain DynamicCache (decoder-only transformers, not
    recurrent or custom-cache architectures) can take a precomputed prefix and drop rows from it."""
    supports = getattr(model, "_supports_default_dynamic_cache", None)
    return bool(supports and supports()) and not getattr(model.config, "is_encoder_decoder", False)


@contextmanager
def stop_between_layers(model, should_stop: StopCheck | None):
    """Check `should_stop` before every layer: a long prompt's prefill is one forward pass, which
    the per-token stopping criterion only sees once it is over (minutes for a long prompt on a CPU).

    The hooks are the model's, seen by every thread, and the check is the generation's: only the thread
    that entered this block is stopped. GRPO's trainer runs the same model's forward right after its
    rollouts, while the streaming worker may still be inside this block with its last row delivered
    (every caller gone, so `should_stop` says True): that forward must not be aborted."""
    if should_stop is None:
        yield
        return
    generating_thread = threading.get_ident()

    def check(module, args):
        if threading.get_ident() == generating_thread and should_stop():
            raise GenerationAborted("the engine was closed during generation")

    # The repeated blocks (decoder layers) live in ModuleLists whatever the architecture.
    handles = [
        layer.register_forward_pre_hook(check)
        for layers in model.modules()
        if isinstance(layers, torch.nn.ModuleList)
        for layer in layers
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def row_generation(tokenizer, tokens, request: GenerationRequest, stop: RowStop, prompt_ids: list[int]) -> Generation:
    """A row's tokens as its generation: cut where it stopped, then at its first stop string; the prompt
    as the model read it (its tokens decoded) goes with it."""
    done_at = stop.done_at if stop.done_at is not None else len(tokens)
    text = tokenizer.decode(tokens[:done_at], skip_special_tokens=True)
    text, matched = cut_at_first_stop(text, tuple(request.stop))
    finish_reason = "stop" if matched is not None or stop.reason == "eos" else "length"
    return Generation(
        text=text,
        stop_reason=matched,
        finish_reason=finish_reason,
        prompt_tokens=len(prompt_ids),
        completion_tokens=int(done_at),
        prompt=tokenizer.decode(prompt_ids, skip_special_tokens=False),
    )


def eos_token_ids(model, tokenizer) -> set[int]:
    """End-of-turn ids from the generation config and the tokenizer (chat models often have several)."""
    ids: set[int] = set()
    configured = model.generation_config.eos_token_id
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
