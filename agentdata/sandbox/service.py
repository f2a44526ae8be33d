"""The sandbox as an HTTP service: SandboxFusion's `POST /run_code`, plus sessions.

`/run_code` follows SandboxFusion's request and response, so its client, verl's sandbox
tool and Open-AgentRL configs work unchanged. `/v1/run` and `/v1/sessions/{id}` are
agentdata's extension for stateful use; `RemoteSandbox` speaks them.

Requests beyond the workers wait in the pool's queue; nothing is refused for load.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentdata.sandbox.local import Sandbox
from agentdata.sandbox.result import ExecResult

PYTHON_LANGUAGES = ("python", "python3")

# ExecResult.status -> SandboxFusion's run_result.status
_RUN_STATUS = {"ok": "Finished", "error": "Finished", "oom": "Finished", "killed": "Finished",
               "timeout": "TimeLimitExceeded"}


def _bad_request(message: str) -> JSONResponse:
    return JSONResponse({"status": "SandboxError", "message": message, "compile_result": None, "run_result": None,
                         "executor_pod_name": None, "files": {}}, status_code=400)


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def sandboxfusion_response(result: ExecResult) -> dict[str, Any]:
    finished_ok = result.status == "ok" and result.exit_code == 0
    return {
        "status": "Success" if finished_ok else "Failed",
        "message": "" if finished_ok else result.status,
        "compile_result": None,
        "run_result": {
            "status": _RUN_STATUS[result.status],
            "execution_time": result.duration_s,
            "return_code": result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
        },
        "executor_pod_name": None,
        "files": {},
    }


def _decode_files(files: Any) -> dict[str, bytes]:
    if not files:
        return {}
    if not isinstance(files, dict):
        raise ValueError("files must be an object of name -> base64 content")
    return {str(name): base64.b64decode(content or "", validate=True) for name, content in files.items()}


def build_app(sandbox: Sandbox) -> Starlette:
    async def run_code(request: Request) -> JSONResponse:
        body = await _json_body(request)
        if body is None or not isinstance(body.get("code"), str):
            return _bad_request("the body must be JSON with a string `code`")
        language = str(body.get("language") or "python").lower()
        if language not in PYTHON_LANGUAGES:
            return _bad_request(f"language {language!r} is not supported; this sandbox runs python")
        try:
            files = _decode_files(body.get("files"))
        except (ValueError, binascii.Error) as error:
            return _bad_request(f"bad files: {error}")
        memory = body.get("memory_limit_MB")
        result = await sandbox.arun(
            body["code"], timeout=float(body.get("run_timeout") or sandbox.config.timeout_s),
            stdin=body.get("stdin") or None, files=files,
            memory_mb=int(memory) if memory and int(memory) > 0 else None,
            display_last=False,  # /run_code runs a script, as SandboxFusion does
        )
        return JSONResponse(sandboxfusion_response(result))

    async def run(request: Request) -> JSONResponse:
        body = await _json_body(request)
        if body is None or not isinstance(body.get("code"), str):
            return JSONResponse({"error": "the body must be JSON with a string `code`"}, status_code=400)
        try:
            files = _decode_files(body.get("files"))
        except (ValueError, binascii.Error) as error:
            return JSONResponse({"error": f"bad files: {error}"}, status_code=400)
        result = await sandbox.arun(
            body["code"], session_id=body.get("session_id"), timeout=body.get("timeout"),
            stdin=body.get("stdin"), files=files, memory_mb=body.get("memory_mb"),
            display_last=bool(body.get("display_last", True)),
        )
        return JSONResponse(result.to_dict())

    async def close_session(request: Request) -> JSONResponse:
        await sandbox.aclose_session(request.path_params["session_id"])
        return JSONResponse({"closed": request.path_params["session_id"]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "workers": sandbox.config.workers, "isolation": sandbox.isolation})

    return Starlette(routes=[
        Route("/run_code", run_code, methods=["POST"]),
        Route("/v1/run", run, methods=["POST"]),
        Route("/v1/sessions/{session_id}", close_session, methods=["DELETE"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/ping", health, methods=["GET"]),
    ])


def serve(sandbox: Sandbox, host: str = "127.0.0.1", port: int = 8080, log_level: str = "warning") -> None:
    """Serve until interrupted. The sandbox is the caller's to close."""
    import uvicorn

    uvicorn.run(build_app(sandbox), host=host, port=port, log_level=log_level, access_log=False)
