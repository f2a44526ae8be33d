"""One batched generation for requests that share sampling settings.

Each row keeps its own stop strings and token budget: a row is done at its own stop string,
end of turn or budget, leaves the batch there (hf_decode: the rows still going make the next
step alone), and its text is cut there. Models without a plain key/value cache (recurrent or
custom-cache architectures) go through `model.generate` instead, which pads finished rows.

The prompts of a batch usually begin alike (the system prompt, a tool list, worked
examples): that shared prefix is run through the model once and its key/value cache is
given to every row (`shared_prefix`), instead of once per row. On a CPU the prompts' prefill
is most of the generation time, so this is where batching pays (bench/bench_prefix.py).

A stop check (the engine is closing, or nobody waits for the batch any more: Ctrl-C,
SIGTERM) ends the call within a token, and within one layer during a long prompt's
prefill, which is a single forward pass.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache, StoppingCriteria, StoppingCriteriaList

from agentdata.engines.base import Generation, GenerationRequest, cut_at_first_stop
from agentdata.engines.hf_decode import decode, next_token_picker

StopCheck = Callable[[], bool]  # called from the generating thread: True means stop now
# A shorter common start is not worth a separate forward pass.
MIN_SHARED_PREFIX = 16
# Finished rows leave the batch (hf_decode); bench/bench_prefix.py turns it off for its baseline.
DROP_FINISHED_ROWS = True


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
    """The chat template applied to the request's messages (and tools, for native tool calling), as text."""
    options = {"tools": request.tools} if request.tools else {}
    messages = template_messages(request.messages)
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


class PerRowStopping(StoppingCriteria):
    """Marks each row done at its own stop string, end-of-turn token or token budget.

    It records how many tokens each row had generated when it stopped, and why: `observe` for the
    decode loop, `__call__` as `model.generate`'s criterion (which fills a done row with padding,
    often the same id as EOS).
    """

    def __init__(
        self,
        tokenizer,
        requests: list[GenerationRequest],
        prompt_length: int,
        eos_token_ids: set[int],
        should_stop: StopCheck | None = None,
    ):
        self.tokenizer = tokenizer
        self.should_stop = should_stop
        self.prompt_length = prompt_length
        self.stops = [tuple(request.stop) for request in requests]
        self.budgets = [request.max_new_tokens for request in requests]
        self.eos_token_ids = eos_token_ids
        # Enough trailing tokens to contain the longest stop string (a token is at least one
        # character, and a few extra cover tokens that decode to partial characters).
        self.windows = [max((len(s) for s in stops), default=0) + 4 for stops in self.stops]
        self.done_at: list[int | None] = [None] * len(requests)
        self.reasons: list[str | None] = [None] * len(requests)

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
        """Whether `row` is done, given the tokens it has generated so far (recording when and why)."""
        if self.done_at[row] is None:
            reason = self._row_stop_reason(tokens, row)
            if reason is not None:
                self.done_at[row], self.reasons[row] = len(tokens), reason
        return self.done_at[row] is not None

    def _row_stop_reason(self, tokens, row: int) -> str | None:
        if int(tokens[-1]) in self.eos_token_ids:
            return "eos"
        if self.stops[row]:
            tail = self.tokenizer.decode(tokens[-self.windows[row] :], skip_special_tokens=True)
            if any(stop in tail for stop in self.stops[row]):
                return "stop_string"
        if len(tokens) >= self.budgets[row]:
            return "length"
        return None


def generation_seed(requests: list[GenerationRequest]) -> int | None:
    """One seed for a batch, derived from its requests' seeds: a re-run with the same batches repeats."""
    seeds = [request.seed for request in requests if request.seed is not None]
    if not seeds:
        return None
    digest = hashlib.sha256(",".join(map(str, seeds)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


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
    the per-token stopping criterion only sees once it is over (minutes for a long prompt on a CPU)."""
    if should_stop is None:
        yield
        return

    def check(module, args):
        if should_stop():
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


def generate_batch(
    model,
    tokenizer,
    requests: list[GenerationRequest],
    prompt_ids: list[list[int]],
    key: SamplingKey,
    should_stop: StopCheck | None = None,
) -> list[Generation]:
    """Generate for `requests` (all sharing `key`; prompts already tokenized) in one batch and cut each row."""
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    plain_cache = has_plain_cache(model)
    prefix_length = shared_prefix_length(prompt_ids) if plain_cache else 0
    input_ids, attention_mask = padded_batch(prompt_ids, pad_token_id, model.device, prefix_length)
    eos_token_ids = _eos_token_ids(model, tokenizer)
    stopping = PerRowStopping(tokenizer, requests, input_ids.shape[1], eos_token_ids, should_stop)
    seed = generation_seed(requests)
    if seed is not None:  # for rows without a seed of their own, and generate's whole batch
        torch.manual_seed(seed)
    with torch.inference_mode(), stop_between_layers(model, should_stop):
        cache = prefix_cache(model, prompt_ids[0][:prefix_length], len(prompt_ids)) if prefix_length else None
        if plain_cache and DROP_FINISHED_ROWS:
            seeds = [request.seed for request in requests]
            picker = next_token_picker(key.do_sample, key.temperature, key.top_p, seeds)
            generated = decode(
                model, input_ids, attention_mask, picker, stopping.observe, cache=cache, should_stop=should_stop
            )
        else:
            generated = _generate(model, input_ids, attention_mask, key, stopping, pad_token_id, requests, cache)
    return [
        _row_generation(tokenizer, generated[row], request, stopping, row, len(prompt_ids[row]))
        for row, request in enumerate(requests)
    ]


def _generate(
    model, input_ids, attention_mask, key: SamplingKey, stopping: PerRowStopping, pad_token_id, requests, cache
):
    """`model.generate` with every row to the batch's largest budget, each row's new tokens as a list."""
    generation_config = copy.deepcopy(model.generation_config)
    generation_config.update(
        max_new_tokens=max(request.max_new_tokens for request in requests),
        do_sample=key.do_sample,
        temperature=key.temperature if key.do_sample else None,
        top_p=key.top_p if key.do_sample else None,
        top_k=None,
        use_cache=True,  # a model prepared for training may have turned its cache off
        pad_token_id=pad_token_id,
        eos_token_id=sorted(stopping.eos_token_ids),
    )
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        generation_config=generation_config,
        stopping_criteria=StoppingCriteriaList([stopping]),
        **({"cache": cache} if cache is not None else {}),
    )
    return output[:, input_ids.shape[1] :].tolist()


def _row_generation(tokenizer, tokens, request, stopping: PerRowStopping, row: int, prompt_tokens: int) -> Generation:
    done_at = stopping.done_at[row] if stopping.done_at[row] is not None else len(tokens)
    text = tokenizer.decode(tokens[:done_at], skip_special_tokens=True)
    text, matched = cut_at_first_stop(text, tuple(request.stop))
    reason = stopping.reasons[row]
    if matched is not None or reason == "eos":
        finish_reason = "stop"
    else:
        finish_reason = "length"
    return Generation(
        text=text,
        stop_reason=matched,
        finish_reason=finish_reason,
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(done_at),
    )


def _eos_token_ids(model, tokenizer) -> set[int]:
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
