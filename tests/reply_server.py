"""A loopback server that answers every POST with the raw body a script gives it: a judge or a PRM that answers
what no well-behaved server would (a cut JSON body, an empty one, `false`), for the tests that a failure is never
read as a score. `GET .../models` lists one model, so an engine's readiness check and model lookup succeed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Script = Callable[[dict], str]  # the request's JSON body -> the raw text answered (HTTP 200)


def chat_completion(content: str, finish_reason: str = "stop") -> str:
    """An OpenAI chat-completions answer holding `content`."""
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
    usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    return json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [choice], "usage": usage})


def pooling(rows: list) -> str:
    """A vLLM pooling answer holding `rows` (one per step tag)."""
    return json.dumps({"object": "list", "model": "m", "data": [{"index": 0, "object": "pooling", "data": rows}]})


class ReplyServer:
    def __init__(self, script: Script):
        self.script = script
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ReplyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(server: ReplyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._send(json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            self._send(server.script(body))

        def _send(self, text: str) -> None:
            payload = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler
