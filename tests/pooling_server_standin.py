"""A scripted stand-in for vLLM's pooling endpoint serving a process reward model (`vllm serve PRM --runner pooling`).

It copies the shape of vLLM's API (vllm/entrypoints/pooling/pooling/protocol.py): `POST /pooling` with
`{"model", "messages"}` (chat form) or `{"model", "input"}` (text), answered
`{"id": "pool-...", "object": "list", "created", "model", "data": [{"index": 0, "object": "pooling",
"data": [[p_wrong, p_right], ...]}], "usage": {...}}` with one row per step tag in the assistant's text,
as Qwen2.5-Math-PRM's STEP pooler returns; `GET /v1/models` lists the model. Where vLLM runs the model,
this scores a step 0.1 when it holds the word "wrong" and 0.9 otherwise, so tests know every score.

It fails on purpose: `fail_first` statuses for the first requests, `fail_every` (every Nth request
answers 500), and `mismatch_word` (a request holding it gets one row too few: a server whose step tag
is not the client's).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STEP_TAG = "<extra_0>"


def step_probability(step: str) -> float:
    return 0.1 if "wrong" in step.lower() else 0.9


class PoolingServer:
    def __init__(
        self,
        model: str = "tiny-prm",
        fail_first: list[int] | None = None,
        fail_every: int = 0,
        mismatch_word: str | None = None,
        latency: float = 0.0,
    ):
        self.model = model
        self.fail_first = list(fail_first or [])
        self.fail_every = fail_every
        self.mismatch_word = mismatch_word
        self.latency = latency
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = _Listener(("127.0.0.1", 0), _handler(self))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> PoolingServer:
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, body: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            failure = self.fail_first.pop(0) if self.fail_first else None
        time.sleep(self.latency)
        if failure is None and self.fail_every and number % self.fail_every == 0:
            failure = 500
        if failure is not None:
            return failure, {"object": "error", "message": f"injected failure {failure}", "code": failure}
        if body.get("model") != self.model:
            return 404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist.", "code": 404}
        if "messages" in body:
            text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "assistant")
        elif isinstance(body.get("input"), str):
            text = body["input"]
        else:
            return 400, {"object": "error", "message": "give messages or input", "code": 400}
        steps = text.split(STEP_TAG)[:-1]  # each step ends at its tag
        rows = [[round(1 - step_probability(step), 4), step_probability(step)] for step in steps]
        if self.mismatch_word and self.mismatch_word in json.dumps(body):
            rows = rows[:-1]
        prompt_tokens = len(text.split())
        return 200, {
            "id": f"pool-{number}",
            "object": "list",
            "created": int(time.time()),
            "model": self.model,
            "data": [{"index": 0, "object": "pooling", "data": rows}],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens, "completion_tokens": 0},
        }


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def _handler(server: PoolingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path.rstrip("/") != "/pooling":
                self._send(404, {"detail": "Not Found"})
                return
            self._send(*server.answer(body))

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
