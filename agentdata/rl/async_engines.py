"""The engines the asynchronous GRPO stage rolls out with, and how each scores a rollout's tokens.

In the asynchronous stage the rollouts of the next steps run while the trainer trains, so they cannot come from
the model being trained (its weights change under them). They come from an engine holding a published version of
the policy, which TRL's weight-sync schedule refreshes after every step (rl/weight_transfer.py):

- `CopyEngine` (the transformers path, `use_vllm: no`): a second copy of the policy in this process, generating in
  the rollout worker's thread; one batch at a time under a lock the weight transfer takes to swap weights in;
- the vLLM server fed by files (`use_vllm: yes|auto` without CUDA): `rl.vllm_server_policy.ServerVLLMEngine`, as in
  the synchronous stage.

TRL's loss takes the probability ratio against the log-probabilities of the policy that generated a sample
(`old_log_probs`). A rollout is trained on its re-rendered conversation (rl/rollout.py), so those are the
engine's log-probabilities of the re-rendered tokens, computed right after the rollout (`score`): the copy by
a forward pass, vLLM through `prompt_logprobs` of `/v1/completions`. A version published while a rollout's later
turns ran is not tracked per token: a sample is tagged with the version its batch started from (its staleness is
counted from there, the conservative end).
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from agentdata.engines.base import Engine, Generation, GenerationRequest


class CopyEngine(Engine):
    """A copy of the policy, served to the agent loop; `lock` is held while it generates or scores.

    It does not expose its model as `model`: `AgentRollout` would swap a trainer's model into such an engine."""

    def __init__(self, copy: Any, tokenizer: Any, temperature: float = 1.0):
        from agentdata.rl.policy import PolicyEngine

        self.inner = PolicyEngine(copy, tokenizer, spec="policy-copy")
        self.inner.set_streaming(False)  # whole batches, each under the batcher's lock, which pause() takes
        self.copy = copy.eval()
        self.tokenizer = tokenizer
        self.spec = "policy-copy"
        self.temperature = temperature

    @property
    def lock(self) -> threading.Lock:
        return self.inner._batcher._model_lock

    @property
    def generation_s(self) -> float:
        return self.inner.generation_s

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self.inner.generate(request)

    def wait_idle(self) -> None:
        self.inner.wait_idle()

    def cancel(self) -> None:
        """Stop generating for good: a batch in flight ends at its next token (its rollouts fail)."""
        self.inner._closing.set()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def score(self, sequences: list[list[int]]) -> list[list[float]]:
        """Each token's log-probability under the copy at the sampling temperature (the first token's: 0)."""
        with self.lock, torch.inference_mode():
            return [
                sequence_logprobs(self.copy(torch.tensor([ids])).logits[0], ids, self.temperature) for ids in sequences
            ]


def sequence_logprobs(logits: torch.Tensor, ids: list[int], temperature: float) -> list[float]:
    """Log-probabilities of ids[1:] under `logits` (one row per position), 0.0 for the first token."""
    scaled = torch.log_softmax(logits[:-1].float() / temperature, dim=-1)
    picked = scaled.gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1)
    return [0.0, *picked.tolist()]


class ServerScorer:
    """Scores token sequences on a vLLM server: `prompt_logprobs` of `/v1/completions` (one token generated)."""

    def __init__(self, client: Any):
        self.client = client  # rl.vllm_completions.CompletionsClient

    def score(self, sequences: list[list[int]]) -> list[list[float]]:
        body = {"model": self.client.model, "prompt": sequences, "max_tokens": 1, "prompt_logprobs": 0}
        choices = sorted(self.client._post("/v1/completions", body)["choices"], key=lambda choice: choice["index"])
        return [prompt_logprobs(choice["prompt_logprobs"], ids) for choice, ids in zip(choices, sequences)]


def prompt_logprobs(entries: list[dict[str, Any] | None], ids: list[int]) -> list[float]:
    """vLLM's `prompt_logprobs` (None first, then {token_id: {"logprob": ...}} per position) as the logprob of
    each token the prompt holds."""
    values = [0.0]
    for entry, token in zip(entries[1:], ids[1:]):
        values.append(float(entry[str(token)]["logprob"]))
    return values
