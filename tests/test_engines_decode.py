"""The decode loop drops finished rows: same tokens as `model.generate`, without the padding work.

A tiny random Llama with SmolLM2's real tokenizer whose greedy text varies (tests/train_fixtures.py);
the requests have different budgets, so rows finish at different steps.
"""

from __future__ import annotations

import pytest

from agentdata.engines import GenerationRequest, hf_batch
from agentdata.engines.hf_batch import generate_batch
from agentdata.engines.hf_generate import render_prompt, sampling_key
from tests.train_fixtures import varied_llama

QUESTIONS = ["What is 2+2?", "Name a prime.", "Hi", "Explain recursion briefly, with an example in Python."]


@pytest.fixture(scope="module")
def model(tokenizer):
    return varied_llama(tokenizer)


def batch(tokenizer, temperature=0.0, top_p=1.0, budgets=(3, 17, 9, 30), stop=()):
    requests = [
        GenerationRequest(
            messages=[{"role": "user", "content": question}],
            max_new_tokens=budget,
            temperature=temperature,
            top_p=top_p,
            seed=row,
            stop=stop,
        )
        for row, (question, budget) in enumerate(zip(QUESTIONS, budgets))
    ]
    ids = [tokenizer(render_prompt(tokenizer, r), add_special_tokens=False)["input_ids"] for r in requests]
    return requests, ids


def run(model, tokenizer, requests, ids, **options):
    return generate_batch(model, tokenizer, requests, ids, sampling_key(requests[0]), **options)


def with_generate(model, tokenizer, requests, ids, monkeypatch):
    """The same batch through `model.generate` (the path of models without a plain cache)."""
    with monkeypatch.context() as patch:
        patch.setattr(hf_batch, "can_stream", lambda model: False)
        return run(model, tokenizer, requests, ids)


def step_rows(model):
    """The number of rows of every forward pass."""
    rows: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    return rows, handle


def test_greedy_decoding_gives_what_generate_gives_row_by_row(model, tokenizer, monkeypatch):
    requests, ids = batch(tokenizer)
    ours = run(model, tokenizer, requests, ids)
    theirs = with_generate(model, tokenizer, requests, ids, monkeypatch)
    assert [g.text for g in ours] == [g.text for g in theirs]
    assert [g.completion_tokens for g in ours] == [g.completion_tokens for g in theirs]
    assert [g.finish_reason for g in ours] == [g.finish_reason for g in theirs]
    assert [g.completion_tokens for g in ours] == [3, 17, 9, 30]  # a random model runs to each budget
    assert len({g.text for g in ours}) == 4


def test_a_finished_row_leaves_the_batch_so_no_step_works_on_padding(model, tokenizer):
    requests, ids = batch(tokenizer)
    rows, handle = step_rows(model)
    try:
        generations = run(model, tokenizer, requests, ids)
    finally:
        handle.remove()
    prefix, *steps = rows  # the chat template's common start runs once, for one row
    assert prefix == 1
    # one step per new token, with the rows still going: 4 rows for 3 steps, then 3, 2, 1
    assert sum(steps) == sum(g.completion_tokens for g in generations) == 3 + 17 + 9 + 30
    assert steps == [4] * 3 + [3] * 6 + [2] * 8 + [1] * 13


def test_stop_strings_end_a_row_where_generate_ends_it(model, tokenizer, monkeypatch):
    requests, ids = batch(tokenizer, budgets=(40, 40, 40, 40))
    free = run(model, tokenizer, requests, ids)
    stop = next(text[5:8] for text in (g.text for g in free) if len(text.strip()) > 10)  # a string row text holds
    requests, ids = batch(tokenizer, budgets=(40, 40, 40, 40), stop=(stop,))
    ours = run(model, tokenizer, requests, ids)
    theirs = with_generate(model, tokenizer, requests, ids, monkeypatch)
    assert [(g.text, g.stop_reason) for g in ours] == [(g.text, g.stop_reason) for g in theirs]
    assert any(g.stop_reason == stop for g in ours)


def test_sampling_repeats_with_the_same_seeds_and_a_tiny_top_p_is_greedy(model, tokenizer):
    requests, ids = batch(tokenizer, temperature=1.0)
    first, again = run(model, tokenizer, requests, ids), run(model, tokenizer, requests, ids)
    assert [g.text for g in first] == [g.text for g in again]
    greedy = run(model, tokenizer, *batch(tokenizer))
    nucleus = run(model, tokenizer, *batch(tokenizer, temperature=1.0, top_p=1e-6))  # keeps only the top token
    assert [g.text for g in nucleus] == [g.text for g in greedy]
    assert [g.text for g in first] != [g.text for g in greedy]


def test_a_seeded_row_samples_the_same_text_whatever_else_is_in_its_batch(model, tokenizer):
    """The batches of a collect depend on timing; a row's own generator keeps its text from depending on them."""
    requests, ids = batch(tokenizer, temperature=1.0)
    together = run(model, tokenizer, requests, ids)
    alone = [run(model, tokenizer, [request], [row])[0] for request, row in zip(requests, ids)]
    reordered = run(model, tokenizer, requests[::-1], ids[::-1])[::-1]
    assert [g.text for g in together] == [g.text for g in alone] == [g.text for g in reordered]


def test_a_stop_check_ends_every_row_within_a_step(model, tokenizer):
    requests, ids = batch(tokenizer, budgets=(30, 30, 30, 30))
    passes: list[int] = []  # forward passes finished: the prefix's, then one per new token
    handle = model.register_forward_hook(lambda module, args, output: passes.append(1))
    try:
        generations = run(model, tokenizer, requests, ids, should_stop=lambda: len(passes) >= 6)
    finally:
        handle.remove()
    assert [g.completion_tokens for g in generations] == [5] * 4
    assert all(g.finish_reason == "length" for g in generations)
