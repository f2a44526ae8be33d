"""A stock SandboxFusion (`POST /run_code`, stateless) as a `CodeSandbox`.

SandboxFusion runs each request as a fresh script, so there are no sessions to keep
variables in. `FusionSandbox` emulates them by replay: it remembers the cells a session
ran and sends them all again, the earlier ones with their output silenced, before the new
one. What that means for the code:

- a cell sees the variables, imports and functions of the session's earlier cells;
- earlier cells *run again* on every call: their side effects (files written, random
  numbers drawn without a seed, time read, network) happen again and may differ; a cell
  that timed out is not replayed (it would time out every later call);
- each call costs the session's earlier cells again (their measured time is added to the
  call's time limit), so long sessions get slower call by call.

The wire format is SandboxFusion's own `RunCodeRequest` / `RunCodeResponse`
(sandbox/server/sandbox_api.py, sandbox/runners/types.py in bytedance/SandboxFusion):
`run_result.status` is `Finished`, `TimeLimitExceeded` or `Error`, `return_code` is null
after a timeout, and a top-level `SandboxError` means the sandbox failed, not the code.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from agentdata.sandbox.base import RemoteSandboxError
from agentdata.sandbox.http_client import RetryRule, SandboxHttpClient
from agentdata.sandbox.result import ExecResult

# Every transport failure is tried again (a stateless script may run twice), and so is SandboxFusion's own SandboxError.
RETRY = RetryRule((429, 500, 502, 503, 504), unreadable_answers=True)


def run_code_payload(
    code: str, timeout: float, stdin: str | None, files: dict[str, bytes | str] | None, memory_mb: int | None
) -> dict[str, Any]:
    """A SandboxFusion `RunCodeRequest`."""
    encoded = {
        name: base64.b64encode(data.encode() if isinstance(data, str) else data).decode()
        for name, data in (files or {}).items()
    }
    return {
        "code": code,
        "language": "python",
        "run_timeout": timeout,
        "compile_timeout": 10,
        "memory_limit_MB": memory_mb or -1,
        "stdin": stdin,
        "files": encoded,
        "fetch_files": [],
    }


def result_from_response(body: dict[str, Any], endpoint: str) -> ExecResult:
    """A SandboxFusion `RunCodeResponse` -> ExecResult; a sandbox-side failure raises."""
    if body.get("status") == "SandboxError":
        raise RemoteSandboxError(f"{endpoint}: SandboxError: {str(body.get('message'))[:200]}")
    run = body.get("run_result") or body.get("compile_result") or {}
    duration = float(run.get("execution_time") or 0.0)
    stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
    if run.get("status") == "TimeLimitExceeded":
        return ExecResult("timeout", stdout, stderr + "TimeoutError: the call ran past its time limit\n", -1, duration)
    if run.get("status") != "Finished":
        raise RemoteSandboxError(f"{endpoint}: run_result status {run.get('status')!r}: {stderr[:200]}")
    code = int(run.get("return_code") or 0)
    return ExecResult("ok" if code == 0 else "error", stdout, stderr, code, duration)


class FusionEndpoint:
    """One `/run_code` endpoint: stateless script runs, failures (its own SandboxError too) retried with backoff."""

    def __init__(self, url: str, retries: int = 2, backoff_s: float = 0.2, request_timeout_s: float = 60.0):
        self.http = SandboxHttpClient(url.rstrip("/").removesuffix("/run_code"), retries, backoff_s, request_timeout_s)
        self.url = self.http.url

    def _read(self, text: str) -> ExecResult:
        return result_from_response(json.loads(text), self.url)

    def run_script(self, payload: dict[str, Any]) -> ExecResult:
        return self.http.post("/run_code", payload, float(payload["run_timeout"]), RETRY, self._read)

    async def arun_script(self, payload: dict[str, Any]) -> ExecResult:
        return await self.http.apost("/run_code", payload, float(payload["run_timeout"]), RETRY, self._read)

    async def arelease(self) -> None:
        await self.http.arelease()

    def close(self) -> None:
        self.http.close()


# The script sent for a call: earlier cells replayed silently, then the new cell, run as the
# local sandbox runs a cell (a bare last expression displayed, tracebacks from the cell's own
# frames, named "<cell N>"). User code runs in its own namespace, never seeing these names.
REPLAY_SCRIPT = r"""
import ast as _ast, contextlib as _contextlib, io as _io, linecache as _linecache, sys as _sys, traceback as _traceback
_CELLS = json_cells
_NAMESPACE = {"__name__": "__main__", "__builtins__": __builtins__}
def _run(number, source, display):
    name = "<cell %d>" % number
    _linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    tree = _ast.parse(source, filename=name)
    last = tree.body[-1] if display and tree.body and isinstance(tree.body[-1], _ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    exec(compile(_ast.Module(body=body, type_ignores=[]), name, "exec"), _NAMESPACE)
    if last is not None:
        exec(compile(_ast.Interactive(body=[last]), name, "single"), _NAMESPACE)
for _number, (_source, _stdin) in enumerate(_CELLS[:-1], start=1):
    _sys.stdin = _io.StringIO(_stdin)
    with _contextlib.redirect_stdout(_io.StringIO()), _contextlib.redirect_stderr(_io.StringIO()):
        try:
            _run(_number, _source, False)
        except BaseException:
            pass
_sys.stdin = _sys.__stdin__
try:
    _run(len(_CELLS), _CELLS[-1][0], display_last)
except SystemExit:
    raise
except BaseException as _error:
    _tb = _error.__traceback__
    while _tb is not None and not _tb.tb_frame.f_code.co_filename.startswith("<cell"):
        _tb = _tb.tb_next
    _sys.stderr.write("".join(_traceback.format_exception(type(_error), _error, _tb)))
    _sys.exit(1)
"""


def replay_script(cells: list[tuple[str, str]], display_last: bool) -> str:
    """The script that replays `cells` (code, stdin) and runs the last one visibly."""
    # display_last first: the cells' own text (inserted second) may contain either placeholder word
    return REPLAY_SCRIPT.replace("display_last", str(bool(display_last))).replace("json_cells", json.dumps(cells))


@dataclass
class _Session:
    cells: list[tuple[str, str]] = field(default_factory=list)  # (code, stdin) of the cells to replay
    files: dict[str, bytes | str] = field(default_factory=dict)
    replay_s: float = 0.0  # the time the replayed cells took when they ran


class FusionSandbox:
    """The `CodeSandbox` API on stateless `/run_code` endpoints (one, or a `SpreadEndpoints`)."""

    def __init__(self, endpoint: Any, timeout_s: float = 30.0):
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._sessions: dict[str, _Session] = {}

    def _prepare(
        self,
        code: str,
        session_id: str | None,
        timeout: float | None,
        stdin: str | None,
        files: dict | None,
        memory_mb: int | None,
        display_last: bool,
    ) -> tuple[dict[str, Any], _Session]:
        session = self._sessions.setdefault(session_id, _Session()) if session_id else _Session()
        limit = (timeout or self.timeout_s) + session.replay_s
        all_files = {**session.files, **(files or {})}
        if not session.cells and not display_last:
            script = code  # exactly what SandboxFusion itself would run
        else:
            script = replay_script([*session.cells, (code, stdin or "")], display_last)
        return run_code_payload(script, limit, stdin, all_files, memory_mb), session

    @staticmethod
    def _remember(
        session: _Session, code: str, stdin: str | None, files: dict | None, result: ExecResult, session_id: str | None
    ) -> None:
        if session_id is None or result.status == "timeout":
            return
        session.cells.append((code, stdin or ""))
        session.files.update(files or {})
        session.replay_s += result.duration_s

    def run(
        self,
        code: str,
        session_id: str | None = None,
        timeout: float | None = None,
        *,
        stdin: str | None = None,
        files: dict[str, bytes | str] | None = None,
        memory_mb: int | None = None,
        display_last: bool = True,
    ) -> ExecResult:
        payload, session = self._prepare(code, session_id, timeout, stdin, files, memory_mb, display_last)
        result = self.endpoint.run_script(payload)
        self._remember(session, code, stdin, files, result, session_id)
        return result

    async def arun(
        self,
        code: str,
        session_id: str | None = None,
        timeout: float | None = None,
        *,
        stdin: str | None = None,
        files: dict[str, bytes | str] | None = None,
        memory_mb: int | None = None,
        display_last: bool = True,
    ) -> ExecResult:
        payload, session = self._prepare(code, session_id, timeout, stdin, files, memory_mb, display_last)
        result = await self.endpoint.arun_script(payload)
        self._remember(session, code, stdin, files, result, session_id)
        return result

    def close_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)  # nothing lives on the server

    async def aclose_session(self, session_id: str) -> None:
        self.close_session(session_id)

    async def arelease(self) -> None:
        await self.endpoint.arelease()

    def close(self) -> None:
        self._sessions.clear()
        self.endpoint.close()

    async def aclose(self) -> None:
        await self.arelease()
        self.close()

    def __enter__(self) -> FusionSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
