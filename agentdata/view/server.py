"""The viewer's web server: starlette, read-only, answering only about the artifacts it was given.

GET only. The page and its two assets come from the package; every other answer is JSON (or an
artifact's own PNG plot) built by `ViewerData` from artifact keys and row numbers, so no request can
name a file. A strict Content-Security-Policy lets the page run only its own script, and a Host check
refuses requests for other names (a web page elsewhere cannot reach the server through DNS rebinding).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from agentdata.errors import UserError
from agentdata.view.api import NotFound, ViewerData
from agentdata.view.query import QueryError

log = logging.getLogger("agentdata.view")
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class DataResponse(JSONResponse):
    """JSON of plain data; a NaN or infinity (a mean over nothing) is null, anything else unknown a string."""

    def render(self, content: Any) -> bytes:
        return json.dumps(plain(content), ensure_ascii=False, default=str, allow_nan=False).encode("utf-8")


def plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def asset(name: str) -> bytes:
    return resources.files("agentdata.view").joinpath("static", name).read_bytes()


def create_app(data: ViewerData, hosts: list[str] | None = None) -> Starlette:
    """The app; `hosts`: the names it answers to (default: this machine's loopback names)."""

    def answer(build: Callable[[Request], Any]) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:  # polars work runs in a thread: a long search does not hold up the other requests
                return DataResponse(await run_in_threadpool(build, request), headers=HEADERS)
            except NotFound:
                return DataResponse({"error": "not found"}, status_code=404, headers=HEADERS)
            except QueryError as error:
                return DataResponse({"error": str(error)}, status_code=400, headers=HEADERS)
            except UserError as error:  # a damaged file found while reading it: one line, page and log
                line = " ".join(str(error).split())
                log.warning(line)
                return DataResponse({"error": line}, status_code=422, headers=HEADERS)
            except Exception as error:  # noqa: BLE001 - one line for the page; the log keeps the traceback
                line = f"unexpected {type(error).__name__}: {' '.join(str(error).split())[:300]}"
                log.exception(line)
                return DataResponse({"error": line}, status_code=500, headers=HEADERS)

        return endpoint

    def key(request: Request) -> str:
        return request.path_params["key"]

    def row(request: Request) -> int:
        return int(request.path_params["row"])

    def problem(request: Request) -> str:
        return request.path_params["problem_id"]

    def compare(request: Request) -> dict[str, Any]:
        first, second = request.path_params["first"], request.path_params["second"]
        return data.compare(first, second, request.query_params.get("show", "flipped"))

    async def index(request: Request) -> Response:
        return Response(asset("index.html"), media_type="text/html; charset=utf-8", headers=HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response("not found", status_code=404, headers=HEADERS)
        return Response(asset(name), media_type=ASSETS[name], headers=HEADERS)

    async def plot(request: Request) -> Response:
        try:
            path = data.plot(key(request), int(request.path_params["number"]))
        except NotFound:
            return Response("not found", status_code=404, headers=HEADERS)
        return FileResponse(path, media_type="image/png", headers=HEADERS)

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/artifacts", answer(lambda r: data.artifacts())),
        Route("/api/a/{key}", answer(lambda r: data.summary(data.artifact(key(r))))),
        Route("/api/a/{key}/rows", answer(lambda r: data.rows(key(r), dict(r.query_params)))),
        Route("/api/a/{key}/rows/{row:int}", answer(lambda r: data.record(key(r), row(r)))),
        Route("/api/a/{key}/rows/{row:int}/mask", answer(lambda r: data.mask(key(r), row(r)))),
        Route(
            "/api/a/{key}/problem/{problem_id:path}",
            answer(lambda r: data.problem(key(r), r.path_params["problem_id"])),
        ),
        Route("/api/a/{key}/curate", answer(lambda r: data.curate(key(r)))),
        Route("/api/a/{key}/train", answer(lambda r: data.train(key(r)))),
        Route("/api/a/{key}/eval", answer(lambda r: data.evaluation(key(r)))),
        Route("/api/a/{key}/plot/{number:int}", plot),
        Route(
            "/api/compare/{first}/{second}",
            answer(
                lambda r: data.compare(
                    r.path_params["first"], r.path_params["second"], r.query_params.get("show", "flipped")
                )
            ),
        ),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return DataResponse({"error": "not found"}, status_code=404, headers=HEADERS)

    async def not_allowed(request: Request, exc: Exception) -> Response:  # the viewer changes nothing
        return DataResponse({"error": "read-only: GET only"}, status_code=405, headers=HEADERS)

    allowed = hosts or ["127.0.0.1", "localhost", "[::1]"]
    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed)],
        exception_handlers={404: not_found, 405: not_allowed},
    )


def serve(app: Starlette, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
