"""A stand-in for the generation endpoints of `trl vllm-serve` (vLLM's server in dev mode) on 127.0.0.1.

It copies what TRL's `VLLMClient` calls to generate: `GET /health`, `GET /v1/models`, and
`POST /v1/completions` with `prompt` as a list of token-id lists, `n`, `max_tokens`, `stop`,
`return_token_ids` — answering `choices` in prompt order, each with `prompt_token_ids`,
`token_ids`, `text`, `finish_reason`, `stop_reason` and `logprobs`. Like vLLM, the tokens of a
matched stop string stay in `token_ids` while the text ends before it, and given a `max_model_len`
a request with one prompt longer is refused whole with HTTP 400 and vLLM's error body. The completion text comes
from `respond(prompt_text)`; weight sync (NCCL) is not copied: it needs GPUs. The development endpoints the file
push calls (`/collective_rpc`, `/reset_prefix_cache`) answer as vLLM's do in dev mode, and load nothing: `calls`
lists every POST's path in order, so a test sees which requests came before the first weight push.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# vLLM's answers in dev mode (vllm/entrypoints/serve/dev/): `reload_weights` returns None from its one worker
DEV_ENDPOINTS = {"/collective_rpc": {"results": [None]}, "/reset_prefix_cache": {"success": True}}


class VLLMServerStandIn:
    def __init__(
        self, tokenizer, respond: Callable[[str], str], model: str = "policy", max_model_len: int | None = None
    ):
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.respond = respond
        self.model = model
        self.requests: list[dict] = []  # every completion request, answered or refused
        self.calls: list[str] = []  # every POST's path, in order
        self.refuse_with: int | None = None  # an HTTP status to answer every completion with (400: not retried)
        self.active = 0
        self.most_active = 0
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> VLLMServerStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()

    def complete(self, body: dict) -> dict:
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            return {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": self.model,
                "choices": [self._choice(index, ids, body) for index, ids in enumerate(body["prompt"])],
            }
        finally:
            with self._lock:
                self.active -= 1

    def _choice(self, index: int, prompt_ids: list[int], body: dict) -> dict:
        text = self.respond(self.tokenizer.decode(prompt_ids))
        stop_reason, finish_reason = None, "stop"
        for stop in body.get("stop") or []:
            if stop in text:
                text, stop_reason = text[: text.index(stop)], stop
                kept = text + stop
                break
        else:
            kept = text
        ids = self.tokenizer(kept, add_special_tokens=False)["input_ids"]
        if stop_reason is None:
            ids.append(self.tokenizer.eos_token_id)
        if len(ids) > body["max_tokens"]:
            ids, stop_reason, finish_reason = ids[: body["max_tokens"]], None, "length"
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return {
            "index": index,
            "text": text,
            "prompt_token_ids": prompt_ids,
            "token_ids": ids,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": stop_reason,
        }

    def too_long(self, body: dict) -> dict | None:
        """vLLM's answer to a prompt longer than the model's context (serving_engine's input check)."""
        longest = max((len(prompt) for prompt in body["prompt"]), default=0)
        if self.max_model_len is None or longest < self.max_model_len:
            return None
        message = (
            f"This model's maximum context length is {self.max_model_len} tokens. However, your request has "
            f"{longest} input tokens. Please reduce the length of the input messages."
        )
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return None

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": standin.model, "object": "model"}]})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with standin._lock:
                    standin.calls.append(self.path)
                    if self.path == "/v1/completions":
                        standin.requests.append(body)
                if standin.refuse_with is not None:
                    self._send(standin.refuse_with, {"detail": "refused"})
                elif self.path in DEV_ENDPOINTS:
                    self._send(200, DEV_ENDPOINTS[self.path])
                elif self.path != "/v1/completions":
                    self._send(404, {"detail": "Not Found"})
                elif body.get("n", 1) != 1 or not all(isinstance(p, list) for p in body["prompt"]):
                    self._send(400, {"detail": "the stand-in takes n=1 and token-id prompts"})
                elif (too_long := standin.too_long(body)) is not None:
                    self._send(400, too_long)
                else:
                    self._send(200, standin.complete(body))

        return Handler
