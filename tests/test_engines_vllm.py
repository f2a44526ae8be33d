"""The vllm: engine. Needs vLLM and a CUDA GPU; skipped (with the reason) otherwise.

Runs standalone on a GPU machine:

    python -m pytest tests/test_engines_vllm.py -q

It builds a tiny random Llama (head size 64, which every vLLM attention backend takes)
with the SmolLM2 tokenizer, or uses the model dir in $AGENTDATA_VLLM_TEST_MODEL.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import torch

from agentdata.engines import GenerationRequest, load_engine
from agentdata.engines import smollm2 as smollm2_module
from agentdata.engines.hf_generate import render_prompt

try:
    import vllm  # noqa: F401

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not installed (pip install agentdata[vllm])"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="the vllm engine needs a CUDA GPU"),
]

GREEDY = dict(temperature=0.0)
PROMPTS = ["What is 2+2?", "Name a prime number larger than ten, please.", "Hi", "Explain recursion briefly."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    given = os.environ.get("AGENTDATA_VLLM_TEST_MODEL")
    if given:
        return given
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = smollm2_module.load_smollm2_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny-llama-vllm")
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


def run_session(model_dir, body):
    """Start the engine, run `body(engine)` in one event loop, shut it down."""

    async def go():
        engine = load_engine(f"vllm:{model_dir}", gpu_memory_utilization=0.2, max_model_len=1024, enforce_eager=True)
        try:
            return await body(engine)
        finally:
            await engine.aclose()

    return asyncio.run(go())


def test_vllm_engine_end_to_end(model_dir):
    async def body(engine):
        free = await engine.generate_many([ask(text, max_new_tokens=16, **GREEDY) for text in PROMPTS])
        stop = free[0].text[4:7]
        stopped, budget = await engine.generate_many(
            [ask(PROMPTS[0], max_new_tokens=16, stop=(stop,), **GREEDY), ask(PROMPTS[1], max_new_tokens=5, **GREEDY)]
        )
        messages = [{"role": "user", "content": "Say something."}, {"role": "assistant", "content": "Sure, here"}]
        continued = await engine.generate(
            GenerationRequest(messages=messages, continue_final=True, max_new_tokens=4, **GREEDY)
        )
        many = await engine.generate_many([ask(f"question {i}", max_new_tokens=8, **GREEDY) for i in range(32)])
        too_long = await engine.generate(ask("word " * 1100, max_new_tokens=4))  # max_model_len is 1024
        return engine, free, stop, stopped, budget, continued, many, messages, too_long

    engine, free, stop, stopped, budget, continued, many, messages, too_long = run_session(model_dir, body)
    tokenizer = engine.tokenizer

    assert all(g.error is None and g.finish_reason in ("stop", "length") for g in free)
    assert len(stop) == 3
    assert stopped.text == free[0].text[: free[0].text.index(stop)]
    assert (stopped.stop_reason, stopped.finish_reason) == (stop, "stop")
    assert (budget.finish_reason, budget.completion_tokens) == ("length", 5)
    rendered = render_prompt(tokenizer, ask(PROMPTS[1], max_new_tokens=5))
    assert budget.prompt_tokens == len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    continued_prompt = render_prompt(tokenizer, GenerationRequest(messages=messages, continue_final=True))
    assert continued_prompt.endswith("Sure, here")
    assert continued.prompt_tokens == len(tokenizer(continued_prompt, add_special_tokens=False)["input_ids"])
    assert len(many) == 32 and all(g.error is None for g in many)
    assert too_long.finish_reason == "context" and too_long.prompt_tokens > 1024, too_long.error
