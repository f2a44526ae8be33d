"""One batch of requests that share sampling settings, generated to its end (prompts already tokenized).

A model whose cache rows can leave (hf_stream.can_stream: plain key/value layers) decodes in a
`RunningBatch`: each row leaves the batch as soon as it is done, so no step works on padding.
Other models (recurrent or custom-cache architectures, sliding windows) go through
`model.generate`, which pads finished rows to the longest one; so does the baseline of
bench/bench_prefix.py (`DROP_FINISHED_ROWS` off).
"""

from __future__ import annotations

import copy
from functools import partial

import torch
from transformers import StoppingCriteriaList

from agentdata.engines.base import Generation, GenerationRequest
from agentdata.engines.hf_generate import (
    PerRowStopping,
    RowStop,
    SamplingKey,
    StopCheck,
    eos_token_ids,
    generation_seed,
    has_plain_cache,
    pad_token,
    padded_batch,
    prefix_cache,
    row_generation,
    shared_prefix_length,
    stop_between_layers,
)
from agentdata.engines.hf_stream import Row, RunningBatch, can_stream

# Finished rows leave the batch; bench/bench_prefix.py turns it off for its baseline.
DROP_FINISHED_ROWS = True


def generate_batch(
    model,
    tokenizer,
    requests: list[GenerationRequest],
    prompt_ids: list[list[int]],
    key: SamplingKey,
    should_stop: StopCheck | None = None,
) -> list[Generation]:
    """Generate for `requests` (all sharing `key`) in one batch, each row cut where it stopped.
    `should_stop` says True: every row ends where it is, within a token (within a layer in a prefill)."""
    seed = generation_seed(requests)
    if seed is not None:  # for rows without a seed of their own, and generate's whole batch
        torch.manual_seed(seed)
    with torch.inference_mode(), stop_between_layers(model, should_stop):
        if DROP_FINISHED_ROWS and can_stream(model):
            return _decode(model, tokenizer, requests, prompt_ids, key, should_stop)
        return _generate(model, tokenizer, requests, prompt_ids, key, should_stop)


def _decode(model, tokenizer, requests, prompt_ids, key: SamplingKey, should_stop: StopCheck | None):
    eos = eos_token_ids(model, tokenizer)
    results: list[Generation | None] = [None] * len(requests)
    rows = [
        Row(request, ids, RowStop(tokenizer, request, eos), partial(results.__setitem__, index), lambda: False)
        for index, (request, ids) in enumerate(zip(requests, prompt_ids))
    ]
    batch = RunningBatch(model, tokenizer, key, pad_token(tokenizer))
    batch.admit(rows)
    while len(batch) and not (should_stop is not None and should_stop()):
        batch.step()
    return [result if result is not None else row.generation(tokenizer) for result, row in zip(results, rows)]


def _generate(model, tokenizer, requests, prompt_ids, key: SamplingKey, should_stop: StopCheck | None):
    """`model.generate` with every row to the batch's largest budget (the shared prefix's cache given to it)."""
    pad_token_id = pad_token(tokenizer)
    prefix_length = shared_prefix_length(prompt_ids) if has_plain_cache(model) else 0
    input_ids, attention_mask = padded_batch(prompt_ids, pad_token_id, model.device, prefix_length)
    stopping = PerRowStopping(tokenizer, requests, input_ids.shape[1], eos_token_ids(model, tokenizer), should_stop)
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
    cache = prefix_cache(model, prompt_ids[0][:prefix_length], len(prompt_ids)) if prefix_length else None
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        generation_config=generation_config,
        stopping_criteria=StoppingCriteriaList([stopping]),
        **({"cache": cache} if cache is not None else {}),
    )
    generated = output[:, input_ids.shape[1] :].tolist()
    return [
        row_generation(tokenizer, generated[row], request, stopping.rows[row], prompt_ids[row])
        for row, request in enumerate(requests)
    ]
