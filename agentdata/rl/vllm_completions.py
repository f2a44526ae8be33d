"""A client for a vLLM server's `/v1/completions` with token-id prompts, shaped like TRL's `VLLMClient.generate`.

TRL's client refuses to be built unless vLLM imports in this process; where vLLM lives in an environment of
its own (engines/vllm_server.py) the rollout engine (`rl.vllm_server_policy.ServerVLLMEngine`) talks to the
server through this one instead. It sends what TRL's sends (`prompt` as token-id lists, `return_token_ids`,
the sampling fields) and returns the same `completion_ids`, prompt-major.

`generate_seeded` sends each prompt as a request of its own with its own seed, all at once (vLLM batches them
itself): one call of many prompts carries one seed, which would give the members of a GRPO group (one prompt) one
completion, so TRL's client sends none and a rerun samples other rollouts. With a seed a prompt, the managed CPU
server (float32: a row's logits do not depend on its batch-mates) samples the same rollouts again.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentdata.engines.base import DEFAULT_TOP_P, ROLLOUT_TEMPERATURE

MAX_REQUESTS_IN_FLIGHT = 64  # seeded requests sent at once (each a blocking HTTP call on a thread)


def post_json(url: str, body: dict, timeout: float = 600.0) -> Any:
    """POST `body` as JSON to one of the server's endpoints; its JSON answer, or None for an empty one."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        payload = response.read()
    return json.loads(payload) if payload.strip() else None


class CompletionsClient:
    def __init__(self, base_url: str, timeout_s: float = 600.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.model = self._get("/v1/models")["data"][0]["id"]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base_url}{path}", timeout=self.timeout_s) as response:
            return json.loads(response.read())

    def _post(self, path: str, body: dict) -> Any:
        try:
            return post_json(f"{self.base_url}{path}", body, self.timeout_s)
        except urllib.error.HTTPError as exc:  # vLLM's error body names the cause (a prompt too long, ...)
            raise RuntimeError(f"HTTP {exc.code}: {exc.read().decode(errors='replace')}") from exc

    def generate(
        self,
        prompts: list[list[int]],
        n: int = 1,
        temperature: float = ROLLOUT_TEMPERATURE,
        top_p: float = DEFAULT_TOP_P,
        max_tokens: int = 16,
        logprobs: int | None = None,
        generation_kwargs: dict | None = None,
    ) -> dict[str, list[list[int]]]:
        body = {
            "model": self.model,
            "prompt": prompts,
            "return_token_ids": True,
            "n": n,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "logprobs": logprobs,
            **(generation_kwargs or {}),
        }
        choices = self._post("/v1/completions", body)["choices"]
        return {
            "prompt_ids": [choice.get("prompt_token_ids") for choice in choices[::n]],
            "completion_ids": [choice["token_ids"] for choice in choices],
        }

    def generate_seeded(
        self,
        prompts: Sequence[list[int]],
        seeds: Sequence[int],
        max_tokens: Sequence[int],
        temperature: float = ROLLOUT_TEMPERATURE,
        top_p: float = DEFAULT_TOP_P,
        generation_kwargs: dict | None = None,
    ) -> dict[str, list[list[int]]]:
        """`generate` with a seed and a token budget for each prompt (see the module doc)."""

        def one(prompt: list[int], seed: int, budget: int) -> dict[str, list[list[int]]]:
            extra = {**(generation_kwargs or {}), "seed": seed}
            return self.generate([prompt], 1, temperature, top_p, budget, None, extra)

        with ThreadPoolExecutor(max_workers=max(1, min(len(prompts), MAX_REQUESTS_IN_FLIGHT))) as pool:
            outputs = list(pool.map(one, prompts, seeds, max_tokens))
        return {
            "prompt_ids": [output["prompt_ids"][0] for output in outputs],
            "completion_ids": [output["completion_ids"][0] for output in outputs],
        }
