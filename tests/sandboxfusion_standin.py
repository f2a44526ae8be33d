"""A stand-in for a stock SandboxFusion server: its `/run_code` and `/v1/ping`, nothing more.

Copied from SandboxFusion's own source (bytedance/SandboxFusion: sandbox/server/sandbox_api.py,
sandbox/runners/types.py, sandbox/runners/base.py), not from agentdata's service:
- the request is `RunCodeRequest` (`language` required; `run_timeout` 10, `memory_limit_MB`
  -1, `files` path -> base64 or null (skipped), `fetch_files`, ...); a missing `code` or
  `language` is FastAPI's HTTP 422;
- the code runs as a fresh `python` script in a temporary directory (stateless);
- `run_result` is a `CommandRunResult`: `Finished` with the return code, or
  `TimeLimitExceeded` with `return_code` null; `status` is `Success` only when every return
  code is 0, else `Failed` with an empty `message`;
- `files` holds the base64 content of each existing `fetch_files` path.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LANGUAGES = ("python", "cpp", "nodejs", "go", "java", "bash")  # part of SandboxFusion's Language literal


def _validation_error(message: str) -> JSONResponse:
    return JSONResponse({"detail": [{"type": "missing", "msg": message}]}, status_code=422)


def run_python(body: dict, folder: str) -> dict:
    for name, content in (body.get("files") or {}).items():
        if isinstance(content, str):  # restore_files skips null contents
            path = os.path.join(folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(base64.b64decode(content))
    with open(os.path.join(folder, "main.py"), "w") as handle:
        handle.write(body["code"])
    started = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "main.py"],
            cwd=folder,
            input=(body.get("stdin") or "").encode(),
            capture_output=True,
            timeout=float(body.get("run_timeout", 10)),
        )
    except subprocess.TimeoutExpired as expired:
        return {
            "status": "TimeLimitExceeded",
            "execution_time": time.time() - started,
            "return_code": None,
            "stdout": (expired.stdout or b"").decode(errors="replace"),
            "stderr": (expired.stderr or b"").decode(errors="replace"),
        }
    return {
        "status": "Finished",
        "execution_time": time.time() - started,
        "return_code": done.returncode,
        "stdout": done.stdout.decode(errors="replace"),
        "stderr": done.stderr.decode(errors="replace"),
    }


def build_standin(calls: list | None = None) -> Starlette:
    """`calls` (when given) collects every request body, so tests can see what was sent."""

    async def run_code(request: Request) -> JSONResponse:
        body = await request.json()
        if "code" not in body or "language" not in body:
            return _validation_error("Field required: code and language")
        if body["language"] not in LANGUAGES:
            return _validation_error(f"Input should be one of {LANGUAGES}")
        if calls is not None:
            calls.append(body)
        with tempfile.TemporaryDirectory() as folder:
            run = run_python(body, folder)
            fetched = {}
            for name in body.get("fetch_files") or []:
                path = os.path.abspath(os.path.join(folder, name))
                if os.path.isfile(path):
                    with open(path, "rb") as handle:
                        fetched[name] = base64.b64encode(handle.read()).decode()
        ok = run["status"] == "Finished" and run["return_code"] == 0
        return JSONResponse(
            {
                "status": "Success" if ok else "Failed",
                "message": "",
                "compile_result": None,
                "run_result": run,
                "executor_pod_name": None,
                "files": fetched,
            }
        )

    async def ping(request: Request) -> JSONResponse:
        return JSONResponse("pong")

    return Starlette(routes=[Route("/run_code", run_code, methods=["POST"]), Route("/v1/ping", ping, methods=["GET"])])


class Arrivals:
    """An ASGI app around another that notes when each request (but a /v1/ping) reached it: the spacing
    a per-endpoint cap (`--sandbox-max-rps`) gives, timed at the server (tests/test_sandbox_cap.py, the
    fleet benchmark)."""

    def __init__(self, app):
        self.app, self.times = app, []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] != "/v1/ping":
            self.times.append(time.monotonic())
        await self.app(scope, receive, send)

    def gaps(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.times, self.times[1:])]


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServedApp:
    """An ASGI app served by uvicorn on a thread at 127.0.0.1:`port` until `stop()`."""

    def __init__(self, app, port: int | None = None):
        import threading

        import uvicorn

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
