"""Requests join the running batch between steps and return as soon as they are done (engines.streaming).

The engine is `ModelEngine` on a tiny random Llama whose greedy text varies (tests/train_fixtures.py),
so a wrong position, mask or cache row after a join shows up as different text.
"""

from __future__ import annotations

import asyncio

import pytest

from agentdata.engines import GenerationRequest
from agentdata.engines.hf import ModelEngine
from agentdata.engines.hf_generate import RowStop, eos_token_ids, pad_token, render_prompt, sampling_key
from agentdata.engines.hf_stream import Row, RunningBatch
from agentdata.engines.streaming import StreamingBatcher
from tests.train_fixtures import varied_llama

GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def model(tokenizer):
    return varied_llama(tokenizer)


@pytest.fixture
def engine(model, tokenizer):
    engine = ModelEngine(model, tokenizer, spec="test", max_batch_size=8)
    assert isinstance(engine._batcher, StreamingBatcher)
    yield engine
    asyncio.run(engine.aclose())


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


@pytest.fixture
def steps(model):
    """The rows of every forward pass of `model`, as it runs."""
    rows: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    yield rows
    handle.remove()


def alone(engine, request) -> str:
    return asyncio.run(engine.generate(request)).text


async def join_after(engine, first: GenerationRequest, later: list[GenerationRequest], steps: list[int], after: int):
    """Start `first`, then send `later` once `after` forward passes ran; every generation, in order."""
    task = asyncio.create_task(engine.generate(first))
    while len(steps) < after:
        await asyncio.sleep(0.005)
    return [await task, *await asyncio.gather(*(engine.generate(request) for request in later))]


def test_a_request_sent_during_a_long_batch_returns_before_the_long_row_ends(engine, steps):
    long, short = ask("tell me everything", max_new_tokens=300, **GREEDY), ask("hi", max_new_tokens=3, **GREEDY)

    async def go():
        task = asyncio.create_task(engine.generate(long))
        while len(steps) < 20:
            await asyncio.sleep(0.005)
        quick = await engine.generate(short)
        return quick, len(steps), await task

    quick, steps_when_quick_returned, slow = asyncio.run(go())
    assert quick.completion_tokens == 3 and slow.completion_tokens == 300
    assert steps_when_quick_returned < 60  # it did not wait for the 300-token row
    assert max(steps) == 2  # it joined the long row's batch


@pytest.mark.parametrize("later_prompt", ["hi", "a much longer prompt than the first one, " * 6])
def test_a_row_that_joins_mid_batch_generates_what_it_would_alone(engine, steps, later_prompt):
    """Shorter and longer prompts than the running cache: both sides of the left padding."""
    first = ask("What is the capital of France?", max_new_tokens=40, **GREEDY)
    later = [ask(later_prompt, max_new_tokens=25, **GREEDY), ask("Name a prime.", max_new_tokens=10, **GREEDY)]
    joined = asyncio.run(join_after(engine, first, later, steps, after=8))
    assert [g.text for g in joined] == [alone(engine, request) for request in [first, *later]]


def test_a_seeded_sampled_row_is_the_same_joined_or_alone(engine, steps):
    first = ask("Write a poem.", max_new_tokens=30, temperature=1.0, seed=5)
    later = [ask("And a story.", max_new_tokens=20, temperature=1.0, seed=6)]
    joined = asyncio.run(join_after(engine, first, later, steps, after=5))
    assert [g.text for g in joined] == [alone(engine, request) for request in [first, *later]]


def test_the_cache_shrinks_to_its_longest_row_when_rows_leave(model, tokenizer):
    key = sampling_key(ask("x", **GREEDY))
    batch, delivered = RunningBatch(model, tokenizer, key, pad_token(tokenizer)), []

    def row(text: str, budget: int) -> Row:
        request = ask(text, max_new_tokens=budget, **GREEDY)
        ids = tokenizer(render_prompt(tokenizer, request), add_special_tokens=False)["input_ids"]
        stop = RowStop(tokenizer, request, eos_token_ids(model, tokenizer))
        return Row(request, ids, stop, delivered.append, lambda: False)

    long, short = row("a long question about many things, " * 5, 12), row("hi", 30)
    batch.admit([long])
    for _ in range(4):
        batch.step()
    batch.admit([short])
    assert batch.mask.shape[1] == len(long.prompt_ids) + 4  # the short row is padded to the long one's length
    while len(batch) == 2:
        batch.step()
    assert [g.completion_tokens for g in delivered] == [12]
    assert batch.mask.shape[1] == len(short.prompt_ids) + len(short.tokens) - 1  # its padding left with the long row
    assert bool(batch.mask.all())


def test_another_sampling_setting_waits_for_the_batch_to_drain(engine, steps):
    greedy = [ask(f"q{i}", max_new_tokens=30, **GREEDY) for i in range(2)]
    sampled = ask("s", max_new_tokens=5, temperature=0.9, seed=1)

    async def go():
        first = asyncio.create_task(engine.generate(greedy[0]))
        while len(steps) < 5:
            await asyncio.sleep(0.005)
        other = asyncio.create_task(engine.generate(sampled))
        await asyncio.sleep(0.05)
        same = asyncio.create_task(engine.generate(greedy[1]))  # sent after the sampled one: it waits too
        return await asyncio.gather(first, other, same)

    generations = asyncio.run(go())
    assert [g.completion_tokens for g in generations] == [30, 5, 30]
    assert engine.batch_sizes[-3:] == [1, 1, 1]
    assert max(steps) == 1  # never two settings, nor the late greedy one, in one batch with the first


def test_a_cancelled_caller_leaves_the_batch_and_the_others_go_on(engine, steps):

    async def go():
        doomed = asyncio.create_task(engine.generate(ask("long", max_new_tokens=500, **GREEDY)))
        kept = asyncio.create_task(engine.generate(ask("short", max_new_tokens=40, **GREEDY)))
        while len(steps) < 10:
            await asyncio.sleep(0.005)
        doomed.cancel()
        result = await kept
        with pytest.raises(asyncio.CancelledError):
            await doomed
        return result

    assert asyncio.run(go()).completion_tokens == 40
    assert len(steps) < 60 and steps[-1] == 1  # the cancelled row left: the last steps ran one row


def test_a_failing_step_fails_its_rows_and_the_engine_serves_the_next_request(model, engine):
    boom = {"left": 1}

    def fail_once(module, args, kwargs):
        if kwargs["input_ids"].shape[1] == 1 and boom["left"]:
            boom["left"] -= 1
            raise RuntimeError("device lost")

    handle = model.register_forward_pre_hook(fail_once, with_kwargs=True)
    try:
        failed = asyncio.run(engine.generate(ask("hello", max_new_tokens=5, **GREEDY)))
        served = asyncio.run(engine.generate(ask("hello", max_new_tokens=5, **GREEDY)))
    finally:
        handle.remove()
    assert failed.finish_reason == "error" and "device lost" in failed.error
    assert served.finish_reason == "length" and served.completion_tokens == 5


def test_a_closed_engine_refuses_new_requests(model, tokenizer):
    engine = ModelEngine(model, tokenizer, spec="test")
    asyncio.run(engine.aclose())
    refused = asyncio.run(engine.generate(ask("late", max_new_tokens=3, **GREEDY)))
    assert refused.finish_reason == "error" and "closed before" in refused.error


def test_the_stop_check_stops_the_generating_thread_only(model, tokenizer):
    # GRPO's trainer runs a forward on the same model while the worker may still hold its hooks
    import threading

    import torch

    from agentdata.engines.hf_generate import GenerationAborted, stop_between_layers

    ids = torch.tensor([tokenizer("hello")["input_ids"]])
    other_thread: list[object] = []
    with torch.no_grad(), stop_between_layers(model, should_stop=lambda: True):
        trainer = threading.Thread(target=lambda: other_thread.append(model(input_ids=ids).logits.shape))
        trainer.start()
        trainer.join()
        with pytest.raises(GenerationAborted):
            model(input_ids=ids)
    assert other_thread == [(1, ids.shape[1], model.config.vocab_size)]


def test_wait_idle_returns_once_the_worker_has_given_the_model_back(engine, model, monkeypatch):
    import time

    batcher = engine._batcher
    take = batcher._take

    def slow_to_leave():  # the worker lingers after delivering its last row, as a loaded machine makes it
        jobs = take()
        if jobs is None:
            time.sleep(0.5)
        return jobs

    monkeypatch.setattr(batcher, "_take", slow_to_leave)
    model.train()
    try:
        asyncio.run(engine.generate(ask("hello", max_new_tokens=3, **GREEDY)))
        engine.wait_idle()
        assert model.training  # back in training mode
        assert not any(layer._forward_pre_hooks for layer in model.modules())  # no stop checks left
    finally:
        model.eval()
