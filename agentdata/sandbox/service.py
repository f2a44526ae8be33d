"""The sandbox as an HTTP service: SandboxFusion's `POST /run_code`, plus sessions.

`/run_code` follows SandboxFusion's request and response (bytedance/SandboxFusion,
sandbox/server/sandbox_api.py), so its client (`sandbox_fusion.run_code`, tested), verl's
sandbox tool and Open-AgentRL configs work unchanged: `run_result.status` is `Finished` or
`TimeLimitExceeded` (then `return_code` is null), `status` is `Success` or `Failed` (with an
empty `message`, as SandboxFusion leaves it), and `fetch_files` come back base64 in `files`.
`/v1/run` and `/v1/sessions/{id}` are agentdata's extension for stateful use; `RemoteSandbox` speaks them.

Requests beyond the workers wait in the pool's queue; nothing is refused for load.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentdata.sandbox.local import Sandbox
from agentdata.sandbox.result import ExecResult

PYTHON_LANGUAGES = ("python", "python3")

# ExecResult.status -> SandboxFusion's run_result.status
_RUN_STATUS = {
    "ok": "Finished",
    "error": "Finished",
    "oom": "Finished",
    "killed": "Finished",
    "timeout": "TimeLimitExceeded",
}


def _bad_request(message: str) -> JSONResponse:
    return JSONResponse(
        {
            "status": "SandboxError",
            "message": message,
            "compile_result": None,
            "run_result": None,
            "executor_pod_name": None,
            "files": {},
        },
        status_code=400,
    )


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


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


def _decode_files(files: Any) -> dict[str, bytes]:
    """name -> base64 content; a null content is skipped, as SandboxFusion's restore_files does."""
    if not files:
        return {}
    if not isinstance(files, dict):
        raise ValueError("files must be an object of name -> base64 content")
    return {
        str(name): base64.b64decode(content, validate=True)
        for name, content in files.items()
        if isinstance(content, str)
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
        fetch = body.get("fetch_files") or []
        if not isinstance(fetch, list):
            return _bad_request("fetch_files must be a list of paths")
        result, fetched = await run_fetching(  # a script, as SandboxFusion runs it: no echo of a last expression
            sandbox,
            body["code"],
            fetch,
            timeout=float(body.get("run_timeout") or sandbox.config.timeout_s),
            stdin=body.get("stdin") or None,
            files=files,
            memory_mb=int(memory) if memory and int(memory) > 0 else None,
        )
        return JSONResponse(sandboxfusion_response(result, fetched))

    async def run(request: Request) -> JSONResponse:
        body = await _json_body(request)
        if body is None or not isinstance(body.get("code"), str):
            return JSONResponse({"error": "the body must be JSON with a string `code`"}, status_code=400)
        try:
            files = _decode_files(body.get("files"))
        except (ValueError, binascii.Error) as error:
            return JSONResponse({"error": f"bad files: {error}"}, status_code=400)
        result = await sandbox.arun(
            body["code"],
            session_id=body.get("session_id"),
            timeout=body.get("timeout"),
            stdin=body.get("stdin"),
            files=files,
            memory_mb=body.get("memory_mb"),
            display_last=bool(body.get("display_last", True)),
        )
        return JSONResponse(result.to_dict())

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


def serve(sandbox: Sandbox, host: str = "127.0.0.1", port: int = 8080, log_level: str = "warning") -> None:
    """Serve until interrupted. The sandbox is the caller's to close."""
    import uvicorn

    uvicorn.run(build_app(sandbox), host=host, port=port, log_level=log_level, access_log=False)
