"""`open_sandbox`: the sandbox a `--sandbox` spec names, local or the service(s) at one or more URLs.

A URL speaks one of two APIs, told apart by `/v1/ping`: `agentdata sandbox serve` (real sessions,
`RemoteSandbox`) or a stock SandboxFusion (`/run_code` only, sessions replayed by `FusionSandbox`).
Several URLs share the load and stand in for each other (`agentdata.sandbox.spread`); `max_rps`
(`--sandbox-max-rps`) caps the requests per second each URL gets, one URL's too.
"""

from __future__ import annotations

from typing import Any

import httpx

from agentdata.errors import UserError
from agentdata.pacing import check_max_rps
from agentdata.sandbox.remote import RemoteSandbox


def open_sandbox(spec: str = "local", max_rps: float | None = None, **options: Any):
    """ "local" -> a local `Sandbox` (options are SandboxConfig fields); one or more http(s) URLs, comma
    separated -> the service(s) there: `agentdata sandbox serve` (real sessions) or a stock SandboxFusion
    (`/run_code` only; sessions replayed by `FusionSandbox`), told apart by `/v1/ping`. Several URLs
    share the load and stand in for each other (`agentdata.sandbox.spread`). `max_rps`: requests per
    second each URL gets at most (None: no cap); a local sandbox has no URL to cap and refuses it."""
    max_rps = check_max_rps(max_rps, f"sandbox {spec!r}")
    if spec == "local":
        if max_rps is not None:
            raise UserError(
                f"sandbox max_rps={max_rps:g} caps requests to sandbox services, and the sandbox is 'local': "
                "give --sandbox URL(s), or leave --sandbox-max-rps unset"
            )
        from agentdata.sandbox.local import Sandbox

        return Sandbox(**options)
    urls = [url.strip() for url in spec.split(",") if url.strip()]
    if not urls or not all(url.startswith(("http://", "https://")) for url in urls):
        raise UserError(
            f"sandbox {spec!r}: expected 'local' or http(s):// URLs (comma separated) of "
            "`agentdata sandbox serve` or SandboxFusion"
        )
    apis = service_apis(urls)
    if all(api == "agentdata" for api in apis):
        members = [RemoteSandbox(url, **options) for url in urls]
        if len(members) == 1 and max_rps is None:
            return members[0]
        from agentdata.sandbox.spread import SpreadSandboxes

        return SpreadSandboxes(members, max_rps=max_rps)  # one member too: the cap lives in the spread
    from agentdata.sandbox.fusion import FusionEndpoint, FusionSandbox
    from agentdata.sandbox.spread import SpreadEndpoints

    endpoints = [FusionEndpoint(url, request_timeout_s=options.get("request_timeout_s", 60.0)) for url in urls]
    one_uncapped = len(endpoints) == 1 and max_rps is None
    return FusionSandbox(endpoints[0] if one_uncapped else SpreadEndpoints(endpoints, max_rps=max_rps))


def service_api(url: str, timeout_s: float = 5.0) -> str | None:
    """ "sandboxfusion" (a URL ending in /run_code, or /v1/ping answering "pong"), "agentdata" (our
    service's /v1/ping describes its workers), or None when the URL cannot be reached."""
    if url.rstrip("/").endswith("/run_code"):
        return "sandboxfusion"
    try:
        reply = httpx.get(f"{url.rstrip('/')}/v1/ping", timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        raise UserError(
            f"sandbox {url}: /v1/ping answered {reply.status_code}; expected `agentdata sandbox serve` "
            "or SandboxFusion (give SandboxFusion as URL/run_code to skip the check)"
        )
    body = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else reply.text
    return "agentdata" if isinstance(body, dict) and "workers" in body else "sandboxfusion"


def service_apis(urls: list[str]) -> list[str]:
    """Each URL's API; one that cannot be reached now is taken to speak what the others do."""
    apis = [service_api(url) for url in urls]
    known = [api for api in apis if api]
    if not known:
        raise UserError(f"sandbox {', '.join(urls)}: cannot be reached (is the service running?)")
    guess = "agentdata" if all(api == "agentdata" for api in known) else "sandboxfusion"
    return [api or guess for api in apis]
