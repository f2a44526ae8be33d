"""The one mapping between agentdata's requests and vLLM's, for every engine that talks to vLLM.

The `vllm:` engine (vLLM's async engine in this process), GRPO's colocated `vllm.LLM` and GRPO's
vLLM server (TRL's `VLLMClient`) all read a `GenerationRequest` the same way and answer with the
same `Generation`:

- `sampling_params`: a request's budget, temperature, top_p, stop strings and seed as vLLM's
  `SamplingParams`;
- `completion_generation`: a vLLM `CompletionOutput` as a `Generation` (vLLM leaves a matched
  stop string out of the text and names it in `stop_reason`; a stop string still in the text is
  cut there and named too);
- `failed_generation`: a call that raised. A prompt that does not fit the model's context
  (vLLM: "The decoder prompt (length N) is longer than the maximum model length of M") ends
  as `finish_reason="context"`, like every other engine's; anything else is an `error`.

vLLM itself is imported by the engines, never here: the mapping takes `SamplingParams` as an
argument, so it is tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentdata.engines.base import (
    Generation,
    GenerationRequest,
    context_generation,
    cut_at_first_stop,
    error_generation,
)
from agentdata.engines.overflow import context_overflow


def sampling_params(factory: Callable[..., Any], request: GenerationRequest) -> Any:
    """vLLM's `SamplingParams` (or anything called with its fields) for one request."""
    return factory(
        max_tokens=request.max_new_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stop=list(request.stop),
        seed=request.seed,
    )


def completion_generation(completion: Any, request: GenerationRequest, prompt_tokens: int) -> Generation:
    """A vLLM `CompletionOutput` (`text`, `token_ids`, `finish_reason`, `stop_reason`) -> Generation."""
    text, stop_in_text = cut_at_first_stop(completion.text, tuple(request.stop))
    stop_reason = completion.stop_reason if isinstance(completion.stop_reason, str) else stop_in_text
    return Generation(
        text=text,
        stop_reason=stop_reason,
        finish_reason="length" if completion.finish_reason == "length" else "stop",
        prompt_tokens=prompt_tokens,
        completion_tokens=len(completion.token_ids),
    )


def failed_generation(error: Exception, prompt_tokens: int = 0) -> Generation:
    """The answer to a request whose call raised: `context` for a prompt too long, else `error`."""
    overflow = context_overflow(str(error))
    if overflow is not None:
        return context_generation(overflow.message, prompt_tokens=overflow.prompt_tokens or prompt_tokens)
    return error_generation(f"{type(error).__name__}: {error}", prompt_tokens=prompt_tokens)


def is_context_overflow(error: Exception) -> bool:
    return context_overflow(str(error)) is not None
