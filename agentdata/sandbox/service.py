"""The sandbox as an HTTP service: SandboxFusion's `POST /run_code`, plus sessions.

`/run_code` follows SandboxFusion's request and response (bytedance/SandboxFusion,
sandbox/server/sandbox_api.py), so its client (`sandbox_fusion.run_code`, tested), verl's
sandbox tool and Open-AgentRL configs work unchanged: `run_result.status` is `Finished` or
`TimeLimitExceeded` (then `return_code` is null), `status` is `Success` or `Failed` (with an
empty `message`, as SandboxFusion leaves it), and `fetch_files` come back base64 in `files`.
`/v1/run` and `/v1/sessions/{id}` are agentdata's extension for stateful use; `RemoteSandbox` speaks them.

Requests beyond the workers wait in the pool's queue; nothing is refused for load. Every field is
checked first (`sandbox/fields.py`: HTTP 400 naming the field); the server's `--timeout` and
`--memory-mb` are ceilings a request may lower, never raise; a client that hangs up has its call
cancelled and its process killed, so it holds no worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
import uuid
from collections.abc import Coroutine
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentdata.errors import UserError
from agentdata.sandbox.fields import BadField, run_code_call, session_call
from agentdata.sandbox.languages import LANGUAGES, script_for
from agentdata.sandbox.local import Sandbox
from agentdata.sandbox.result import ExecResult

logger = logging.getLogger(__name__)

# ExecResult.status -> SandboxFusion's run_result.status
_RUN_STATUS = {
    "ok": "Finished",
    "error": "Finished",
    "oom": "Finished",
    "killed": "Finished",
    "timeout": "TimeLimitExceeded",
}


MAX_BODY_BYTES = 64 * 1024 * 1024  # code, stdin and files of one call; more is refused with 413


def _bad_request(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse(
        {
            "status": "SandboxError",
            "message": message,
            "compile_result": None,
            "run_result": None,
            "executor_pod_name": None,
            "files": {},
        },
        status_code=status,
    )


class _RequestRefused(Exception):
    def __init__(self, message: str, status: int = 400):
        self.status = status
        super().__init__(message)


async def _json_body(request: Request) -> Any:
    """The request's JSON, read within MAX_BODY_BYTES; NaN and Infinity are refused as JSON does."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _RequestRefused(f"body: more than {MAX_BODY_BYTES // 2**20} MiB", 413)
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks), parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise _RequestRefused(f"body: not valid JSON ({' '.join(str(error).split())[:120]})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def _unless_disconnected(request: Request, call: Coroutine[Any, Any, Any]) -> Any:
    """`call`'s result; if the client hangs up first, the call is cancelled (its process killed) and None."""
    running = asyncio.ensure_future(call)
    watching = asyncio.ensure_future(_disconnect(request))
    try:
        done, _ = await asyncio.wait({running, watching}, return_when=asyncio.FIRST_COMPLETED)
        if running in done:
            return running.result()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        logger.info("a client hung up: its call was cancelled and its process killed")
        return None
    finally:
        watching.cancel()
        if not running.done():  # the handler itself was cancelled (the server shutting down)
            running.cancel()


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone; the body has been read, so the next message is the hang-up."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def sandboxfusion_response(result: ExecResult, files: dict[str, str] | None = None) -> dict[str, Any]:
    finished_ok = result.status == "ok" and result.exit_code == 0
    timed_out = _RUN_STATUS[result.status] == "TimeLimitExceeded"
    return {
        "status": "Success" if finished_ok else "Failed",
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": _RUN_STATUS[result.status],
            "execution_time": result.duration_s,
            "return_code": None if timed_out else result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
        },
        "executor_pod_name": None,
        "files": files or {},
    }


# Run after the code, in the same session, to read back `fetch_files` from its working dir.
FETCH_CELL = """import base64 as _b64, json as _json, os as _os
print(_json.dumps({_name: _b64.b64encode(open(_name, "rb").read()).decode()
                   for _name in %s if _os.path.isfile(_name)}))"""


async def run_fetching(sandbox: Sandbox, code: str, fetch: list[str], **options: Any) -> tuple[ExecResult, dict]:
    """Run a script; with `fetch_files`, run it in a throwaway session so its files can be read after."""
    if not fetch:
        return await sandbox.arun(code, display_last=False, **options), {}
    session = f"run_code-{uuid.uuid4().hex}"
    try:
        result = await sandbox.arun(code, session_id=session, display_last=False, **options)
        listing = await sandbox.arun(
            FETCH_CELL % json.dumps([str(name) for name in fetch]), session_id=session, timeout=30, display_last=False
        )
        files = json.loads(listing.stdout) if listing.ok else {}
    finally:
        await sandbox.aclose_session(session)
    return result, files


def build_app(sandbox: Sandbox) -> Starlette:
    limits = sandbox.config

    async def run_code(request: Request) -> JSONResponse:
        try:
            call = run_code_call(await _json_body(request), limits)
        except (_RequestRefused, BadField) as error:
            return _bad_request(str(error), getattr(error, "status", 400))
        if call.language not in LANGUAGES:
            return _bad_request(
                f"language {call.language!r} is not supported; this sandbox runs {', '.join(LANGUAGES)}"
            )
        outcome = await _unless_disconnected(
            request,
            run_fetching(  # a script, as SandboxFusion runs it: no echo of a last expression
                sandbox,
                script_for(call.language, call.code),
                call.fetch_files,
                timeout=call.timeout,
                stdin=call.stdin,
                files=call.files,
                memory_mb=call.memory_mb,
            ),
        )
        if outcome is None:
            return _bad_request("the client hung up", 499)
        result, fetched = outcome
        return JSONResponse(sandboxfusion_response(result, fetched))

    async def run(request: Request) -> JSONResponse:
        try:
            call = session_call(await _json_body(request), limits)
        except (_RequestRefused, BadField) as error:
            return JSONResponse({"error": str(error)}, status_code=getattr(error, "status", 400))
        result = await _unless_disconnected(
            request,
            sandbox.arun(
                call.code,
                session_id=call.session_id,
                timeout=call.timeout,
                stdin=call.stdin,
                files=call.files,
                memory_mb=call.memory_mb,
                display_last=call.display_last,
            ),
        )
        if result is None:
            return JSONResponse({"error": "the client hung up"}, status_code=499)
        return JSONResponse(result.as_dict())

    async def close_session(request: Request) -> JSONResponse:
        await sandbox.aclose_session(request.path_params["session_id"])
        return JSONResponse({"closed": request.path_params["session_id"]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "workers": sandbox.config.workers, "isolation": sandbox.isolation})

    return Starlette(
        routes=[
            Route("/run_code", run_code, methods=["POST"]),
            Route("/v1/run", run, methods=["POST"]),
            Route("/v1/sessions/{session_id}", close_session, methods=["DELETE"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/ping", health, methods=["GET"]),
        ]
    )


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound before any worker starts; a taken port is a UserError."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as error:
        raise UserError(f"--host {host}: {error.strerror or error}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except (OSError, OverflowError) as error:
        sock.close()
        reason = getattr(error, "strerror", None) or str(error)
        if getattr(error, "errno", None) == errno.EADDRINUSE:
            reason += " (another service listens there: stop it or choose another --port)"
        raise UserError(f"--host {host} --port {port}: cannot listen there: {reason}") from None
    return sock


def serve(sandbox: Sandbox, sock: socket.socket, log_level: str = "warning") -> None:
    """Serve on `sock` (from `listen`) until interrupted. The sandbox and the socket are the caller's to close."""
    import uvicorn

    config = uvicorn.Config(build_app(sandbox), log_level=log_level, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
