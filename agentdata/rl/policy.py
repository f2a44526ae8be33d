"""The policy being trained, served as an agentdata `Engine` for the agent loop.

On the CPU (and on a GPU without vLLM) rollouts must come from the current weights, so the
engine wraps the trainer's own model instead of loading a copy. It is the hf engine's
`ModelEngine`: requests waiting at a moment are batched into one `generate` call, and the
model is put in eval mode while it samples.
"""

from __future__ import annotations

from typing import Any

from agentdata.engines.hf import ModelEngine


class PolicyEngine(ModelEngine):
    """Generates with `model` (a live, training model) and `tokenizer`."""

    def __init__(self, model: Any, tokenizer: Any, spec: str = "policy", max_batch_size: int = 64):
        super().__init__(model, tokenizer, spec=spec, max_batch_size=max_batch_size)
