"""Shared fixtures of the training tests: a tiny random Llama with SmolLM2's real tokenizer.

The tokenizer is read from the embedded GGUF (a few seconds, once per session); the model
has 2 layers of width 64, so a training step takes well under a second on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdata.records import CODE_TOOL, ToolCall, assistant_message, tool_message


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from agentdata.engines.smollm2 import GGUF_FILE, smollm2_gguf_path

    gguf = smollm2_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=GGUF_FILE)


@pytest.fixture(scope="session")
def tokenizer():
    return smollm2_tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    from bench.arms import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny-llama"), tokenizer)


def varied_llama(tokenizer):
    """A tiny random Llama whose weights are drawn wide enough that greedy text varies from token to token
    (`tiny_model_dir`'s repeats one newline, under which any two decoders agree), seeded, in eval mode."""
    import torch
    from transformers import LlamaForCausalLM

    from bench.arms import tiny_llama_config

    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_llama_config(tokenizer, initializer_range=0.3, pad_token_id=None)).eval()


def tool_conversation(question: str = "What is 17 * 23?", answer: str = "391") -> list[dict]:
    """A canonical two-round conversation: a tool call, its output, a boxed answer."""
    return [
        {"role": "user", "content": question},
        assistant_message("Let me compute it.", [ToolCall(code=f"print({question.split()[2]} * 23)")]),
        tool_message("call_0", answer),
        assistant_message(f"The product is \\boxed{{{answer}}}."),
    ]


def write_sft_set(path: Path, count: int = 8) -> Path:
    rows = [
        {"messages": tool_conversation(f"What is {10 + i} * 23?", str((10 + i) * 23)), "tools": json.dumps([CODE_TOOL])}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
