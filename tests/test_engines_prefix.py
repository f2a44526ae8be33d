"""The shared prompt prefix of a batch: computed once, given to every row, same text as without it.

The training tests' tiny random Llama (2 layers, hidden 64, tests/train_fixtures.py) with the real
SmolLM2 tokenizer; the prompts share a long system prompt, as the prompts of a collect or GRPO batch do.
"""

from __future__ import annotations

import pytest

from agentdata.engines import GenerationRequest, hf_generate
from agentdata.engines.hf_batch import generate_batch
from agentdata.engines.hf_generate import padded_batch, render_prompt, sampling_key, shared_prefix_length

SYSTEM = {
    "role": "system",
    "content": "Solve the problem. Run Python in a fenced block when it helps; "
    "its output comes back in an output block. " * 3,
}
QUESTIONS = ["What is 2+2?", "Name a prime number larger than ten, please.", "Hi", "Explain recursion briefly."]


def tiny_llama(model_dir):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(model_dir).eval()


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return tiny_llama(tiny_model_dir)


def requests_and_ids(tokenizer, temperature=0.0):
    requests = [
        GenerationRequest(
            messages=[SYSTEM, {"role": "user", "content": question}],
            max_new_tokens=10 + row,
            temperature=temperature,
            seed=row,
        )
        for row, question in enumerate(QUESTIONS)
    ]
    ids = [tokenizer(render_prompt(tokenizer, request), add_special_tokens=False)["input_ids"] for request in requests]
    return requests, ids


def forward_lengths(model):
    """Record the (rows, tokens) of every forward pass of the model."""
    seen: list[tuple[int, int]] = []

    def record(module, args, kwargs):
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is not None:
            seen.append(tuple(input_ids.shape))

    handle = model.register_forward_pre_hook(record, with_kwargs=True)
    return seen, handle


def test_shared_prefix_length_is_the_common_start_with_one_own_token_per_row():
    common = list(range(100, 140))
    assert shared_prefix_length([common + [1, 2], common + [3]]) == 40
    assert shared_prefix_length([common, common + [5]]) == 39  # the shorter row keeps one token of its own
    assert shared_prefix_length([common + [1]]) == 0  # one row: nothing to share
    assert shared_prefix_length([list(range(10)) + [1], list(range(10)) + [2]]) == 0  # too short to pay
    assert shared_prefix_length([[1] + common, [2] + common]) == 0


def test_padding_goes_between_the_prefix_and_each_rows_own_tokens():
    prefix = [7, 8, 9]
    input_ids, mask = padded_batch([prefix + [1], prefix + [1, 2, 3]], pad_token_id=0, device="cpu", prefix_length=3)
    assert input_ids.tolist() == [[7, 8, 9, 0, 0, 1], [7, 8, 9, 1, 2, 3]]
    assert mask.tolist() == [[1, 1, 1, 0, 0, 1], [1, 1, 1, 1, 1, 1]]
    left, left_mask = padded_batch([[1], [1, 2, 3]], pad_token_id=0, device="cpu")
    assert left.tolist() == [[0, 0, 1], [1, 2, 3]] and left_mask.tolist() == [[0, 0, 1], [1, 1, 1]]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_sharing_the_prefix_gives_the_same_text_as_not_sharing(model, tokenizer, monkeypatch, temperature):
    requests, ids = requests_and_ids(tokenizer, temperature)
    assert shared_prefix_length(ids) > 30
    key = sampling_key(requests[0])
    shared = generate_batch(model, tokenizer, requests, ids, key)
    monkeypatch.setattr(hf_generate, "MIN_SHARED_PREFIX", 10**9)
    unshared = generate_batch(model, tokenizer, requests, ids, key)
    assert [g.text for g in shared] == [g.text for g in unshared]
    assert [g.completion_tokens for g in shared] == [g.completion_tokens for g in unshared]
    assert [g.prompt_tokens for g in shared] == [len(row) for row in ids]


def test_the_prefix_runs_once_and_each_row_prefills_only_its_own_tokens(model, tokenizer):
    requests, ids = requests_and_ids(tokenizer)
    prefix = shared_prefix_length(ids)
    seen, handle = forward_lengths(model)
    try:
        generate_batch(model, tokenizer, requests, ids, sampling_key(requests[0]))
    finally:
        handle.remove()
    own_width = max(len(row) for row in ids) - prefix
    assert seen[:2] == [(1, prefix), (len(ids), own_width)]
    steps = seen[2:]  # then one token per step, for the rows still going (hf_stream drops the rest)
    assert all(width == 1 for _, width in steps)
    assert [rows for rows, _ in steps] == sorted((rows for rows, _ in steps), reverse=True)


def test_a_lora_wrapped_policy_shares_the_prefix_too(tiny_model_dir, tokenizer):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_llama(tiny_model_dir), LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).eval()
    requests, ids = requests_and_ids(tokenizer)
    seen, handle = forward_lengths(model.get_base_model())
    try:
        generations = generate_batch(model, tokenizer, requests, ids, sampling_key(requests[0]))
    finally:
        handle.remove()
    assert seen[0] == (1, shared_prefix_length(ids))
    single = [
        generate_batch(model, tokenizer, [request], [row], sampling_key(request))[0]
        for request, row in zip(requests, ids)
    ]
    assert [g.text for g in generations] == [g.text for g in single]
