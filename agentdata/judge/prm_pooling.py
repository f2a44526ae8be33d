"""`openai:URL` process reward models: a PRM served by an OpenAI-compatible server's pooling endpoint.

vLLM serves the public PRMs with `vllm serve MODEL --runner pooling` (Qwen2.5-Math-PRM's STEP
pooler reads the `<extra_0>` step tags; Math-Shepherd needs `--override-pooler-config` with its
`step_tag_id` and `returned_token_ids`). One request per trajectory:

    POST {root}/pooling   {"model": M, "messages": [system, user: question, assistant: "s1<extra_0>s2<extra_0>"]}
    -> {"object": "list", "data": [{"index": 0, "object": "pooling", "data": [[p_wrong, p_right], ...]}], ...}

one row per step tag (`positive_index` picks the column: 1 for Qwen's [wrong, right]; 0 for
Math-Shepherd's [good, bad] token ids) or one number per step. `request=text` sends the plain
`input` text instead of `messages`, for a PRM without a chat template. A server that answers
429, 5xx, times out or drops the connection is tried again with backoff; a reply whose rows do
not match the steps (the server's step tag is not `step_token`) is a failure, never a score.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import aiohttp

from agentdata.engines.openai_compat import RETRYABLE_STATUS
from agentdata.errors import UserError
from agentdata.judge.prm import DEFAULT_SYSTEM, ProcessRewardModel, ScoreFailure, StepsInput
from agentdata.pacing import backoff_delay

REQUEST_FORMS = ("chat", "text")


def pooling_url(base_url: str) -> str:
    """`http://host:8000`, `.../v1` or the full endpoint: vLLM's pooling endpoint is at the root."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"openai PRM: {base_url!r} is not an http(s) URL")
    if url.endswith("/pooling"):
        return url
    return url.removesuffix("/v1") + "/pooling"


NAME_THE_MODEL = """prm_options='{"model": "NAME"}'"""  # the override that names the served model


class PoolingRewardModel(ProcessRewardModel):
    def __init__(
        self,
        target: str,
        *,
        spec: str,
        model: str | None = None,
        step_token: str = "<extra_0>",
        positive_index: int = 1,
        request: str = "chat",
        system: str = DEFAULT_SYSTEM,
        concurrency: int = 16,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 8,
    ):
        if request not in REQUEST_FORMS:
            raise UserError(f"{spec}: request must be one of {', '.join(REQUEST_FORMS)}")
        if concurrency < 1:
            raise UserError(f"{spec}: concurrency must be at least 1")
        self.spec, self.url = spec, pooling_url(target)
        self.model, self.step_token, self.positive_index = model, step_token, positive_index
        self.request, self.system = request, system
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.batch_rows = batch_size
        self.parallel = max(1, concurrency // batch_size)
        self._slots_size = concurrency
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.attempts = 0

    def identity(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "model": self.model,
            "step_token": self.step_token,
            "positive_index": self.positive_index,
            "request": self.request,
            "system": self.system,
        }

    async def score(self, inputs: list[StepsInput]) -> list[list[float] | ScoreFailure]:
        self._ready()
        return list(await asyncio.gather(*(self._score_one(item) for item in inputs)))

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()

    # ------------------------------------------------------------------ one trajectory

    def body(self, item: StepsInput, model: str) -> dict[str, Any]:
        steps = "".join(step + self.step_token for step in item.steps)
        if self.request == "text":
            return {"model": model, "input": f"{item.question}\n{steps}"}
        messages = [{"role": "user", "content": item.question}, {"role": "assistant", "content": steps}]
        if self.system:
            messages.insert(0, {"role": "system", "content": self.system})
        return {"model": model, "messages": messages}

    async def _score_one(self, item: StepsInput) -> list[float] | ScoreFailure:
        async with self._slots:
            try:
                payload = await self._post_with_retries(self.body(item, await self._model_name()))
                return self.step_scores(payload, len(item.steps))
            except (_Failed, ValueError, KeyError, IndexError, TypeError) as error:
                return ScoreFailure(f"{self.url}: {error}")

    def step_scores(self, payload: dict[str, Any], steps: int) -> list[float]:
        rows = payload["data"][0]["data"]
        if not isinstance(rows, list):
            raise ValueError(f"pooling data is {type(rows).__name__}, not a list")
        scores = [
            _probability(row[self.positive_index] if len(row) > 1 else row[0])
            if isinstance(row, list)
            else _probability(row)
            for row in rows
        ]
        if len(scores) != steps:
            raise ValueError(
                f"{len(scores)} scores for {steps} steps: the server's step tag must be {self.step_token!r} "
                "(vLLM: the pooler's step_tag_id)"
            )
        if not all(0.0 <= score <= 1.0 for score in scores):
            raise ValueError(f"scores outside [0, 1] ({min(scores)}..{max(scores)}): not probabilities")
        return scores

    async def _post_with_retries(self, body: dict[str, Any]) -> dict[str, Any]:
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(backoff_delay(attempt - 1, self.backoff_s, 30.0))
            self.attempts += 1
            try:
                async with self._session.post(self.url, json=body, headers=self._headers()) as response:
                    status, text = response.status, await response.text()
            except (asyncio.TimeoutError, aiohttp.ClientError) as error:
                last = f"{type(error).__name__}: {error}"
                continue
            if status in RETRYABLE_STATUS:
                last = f"HTTP {status}: {text[:200]}"
                continue
            if status >= 400:
                raise _Failed(f"HTTP {status}: {text[:300]}")
            return json.loads(text)
        raise _Failed(f"gave up after {self.max_retries + 1} attempts: {last}")

    # ------------------------------------------------------------------ setup

    def _ready(self) -> None:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self._slots_size)
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
            self._slots, self._loop = asyncio.Semaphore(self._slots_size), loop
            self._model_lock = asyncio.Lock()

    async def _model_name(self) -> str:
        if self.model:
            return self.model
        async with self._model_lock:
            if not self.model:
                models_url = self.url.removesuffix("/pooling") + "/v1/models"
                async with self._session.get(models_url, headers=self._headers()) as response:
                    if response.status >= 400:
                        raise _Failed(f"{models_url}: HTTP {response.status}; pass {NAME_THE_MODEL}")
                    listed = (await response.json(content_type=None)).get("data") or []
                if not listed:
                    raise _Failed(f"{models_url} lists no model; pass {NAME_THE_MODEL}")
                self.model = listed[0]["id"]
        return self.model

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def _probability(value: Any) -> float:
    """A step's score as the server wrote it: a JSON number, never true/false or a string (float(False) is 0.0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a step score is {json.dumps(value)[:40]}, not a number")
    return float(value)


class _Failed(Exception):
    """The server could not score this trajectory."""
