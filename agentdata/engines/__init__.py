"""Model backends behind one async interface, chosen by a spec string.

engine = load_engine("smollm2")                        # the embedded default (CPU)
engine = load_engine("hf:/models/qwen")                # any local transformers model
engine = load_engine("vllm:/models/qwen", tensor_parallel_size=2)
engine = load_engine("openai:http://a:8000/v1,http://b:8000/v1", model="qwen")
generation = await engine.generate(GenerationRequest(messages=[...], stop=("</tool_call>",)))
"""

from __future__ import annotations

from agentdata.engines.base import Engine, Generation, GenerationRequest, cut_at_first_stop, error_generation
from agentdata.engines.smollm2 import cache_root, smollm2_model_dir
from agentdata.engines.spec import ENGINE_KINDS, load_engine

__all__ = [
    "ENGINE_KINDS",
    "Engine",
    "Generation",
    "GenerationRequest",
    "cache_root",
    "cut_at_first_stop",
    "error_generation",
    "load_engine",
    "smollm2_model_dir",
]
