"""Sandbox speed against the common baseline, a fresh `python -c` subprocess per call.

    python bench/bench_sandbox.py [--out bench/RESULTS_sandbox.md] [--quick]

Measures, with all isolation on (own uid, network namespace, private tmpfs, rlimits):
latency of `print(1+1)` in a warm session and in a fresh stateless call, local throughput
(sessions and stateless), HTTP throughput through `agentdata sandbox serve` (SandboxFusion's
/run_code, stateless, and /v1/run with sessions), and the same for a sympy-heavy snippet.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from agentdata.sandbox import Sandbox

TRIVIAL = "print(1+1)"
SYMPY = "import sympy\nx = sympy.Symbol('x')\nprint(sympy.integrate(x**3 * sympy.sin(x), x))"
console = Console()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latencies_ms(call, count: int) -> tuple[float, float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples), percentile(samples, 0.99)


def baseline(code: str, count: int) -> tuple[float, float, float]:
    """A fresh interpreter per call, the way many RL setups run model code."""
    def call():
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)

    started = time.perf_counter()
    p50, p99 = latencies_ms(call, count)
    return p50, p99, count / (time.perf_counter() - started)


def local_throughput(sandbox: Sandbox, code: str, calls: int, sessions: int | None) -> float:
    async def scenario():
        started = time.perf_counter()
        jobs = [sandbox.arun(code, session_id=f"t{i % sessions}" if sessions else None) for i in range(calls)]
        results = await asyncio.gather(*jobs)
        assert all(r.status == "ok" for r in results), [r for r in results if r.status != "ok"][:1]
        return calls / (time.perf_counter() - started)

    rate = asyncio.run(scenario())
    for i in range(sessions or 0):
        sandbox.close_session(f"t{i}")
    return rate


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_throughput(url: str, code: str, calls: int, concurrency: int, sessions: bool) -> float:
    async def scenario():
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            queue = list(range(calls))

            async def worker(index: int):
                while queue:
                    queue.pop()
                    if sessions:
                        reply = await client.post(f"{url}/v1/run", json={"code": code, "session_id": f"h{index}"})
                        assert reply.json()["status"] == "ok", reply.text
                    else:
                        reply = await client.post(f"{url}/run_code", json={"code": code, "language": "python"})
                        assert reply.json()["status"] == "Success", reply.text

            started = time.perf_counter()
            await asyncio.gather(*(worker(i) for i in range(concurrency)))
            return calls / (time.perf_counter() - started)

    return asyncio.run(scenario())


def start_service(workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/health", timeout=1)
            return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the sandbox service did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS_sandbox.md"))
    parser.add_argument("--quick", action="store_true", help="Fewer calls (a smoke run).")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    n = lambda count: max(5, int(count * scale))  # noqa: E731

    rows: list[tuple[str, str, str, str]] = []  # (measure, agentdata, baseline, target)
    base_p50, base_p99, base_rate = baseline(TRIVIAL, n(40))
    sympy_base_p50, _, sympy_base_rate = baseline(SYMPY, n(8))

    with Sandbox(workers=args.workers, prefork=args.workers) as sandbox:
        isolation = sandbox.isolation
        sandbox.run("None", session_id="lat")
        session_p50, session_p99 = latencies_ms(lambda: sandbox.run(TRIVIAL, session_id="lat"), n(1000))
        fresh_p50, fresh_p99 = latencies_ms(lambda: sandbox.run(TRIVIAL), n(200))
        sympy_p50, sympy_p99 = latencies_ms(lambda: sandbox.run(SYMPY, session_id="lat"), n(30))
        session_rate = local_throughput(sandbox, TRIVIAL, n(4000), sessions=args.workers * 2)
        fresh_rate = local_throughput(sandbox, TRIVIAL, n(600), sessions=None)
        sympy_rate = local_throughput(sandbox, SYMPY, n(60), sessions=args.workers * 2)

    process, url = start_service(args.workers)
    try:
        http_session_rate = http_throughput(url, TRIVIAL, n(2000), concurrency=16, sessions=True)
        http_fresh_rate = http_throughput(url, TRIVIAL, n(600), concurrency=16, sessions=False)
        http_sympy_rate = http_throughput(url, SYMPY, n(40), concurrency=8, sessions=True)
    finally:
        process.terminate()
        process.wait(timeout=20)

    def ms(value: float) -> str:
        return f"{value:.2f} ms"

    rows += [
        ("latency print(1+1), warm session, p50", ms(session_p50), ms(base_p50), "≤ 2 ms and ≥ 20× faster"),
        ("latency print(1+1), warm session, p99", ms(session_p99), ms(base_p99), ""),
        ("speed-up over baseline (p50)", f"{base_p50 / session_p50:.0f}×", "1×", "≥ 20×"),
        ("latency print(1+1), fresh stateless call, p50", ms(fresh_p50), ms(base_p50), ""),
        ("latency print(1+1), fresh stateless call, p99", ms(fresh_p99), ms(base_p99), ""),
        ("throughput local, sessions", f"{session_rate:.0f} calls/s", f"{base_rate:.0f} calls/s", "≥ 1,000 calls/s"),
        ("throughput local, fresh stateless calls", f"{fresh_rate:.0f} calls/s", f"{base_rate:.0f} calls/s", ""),
        ("throughput HTTP /v1/run, sessions", f"{http_session_rate:.0f} req/s", "", "≥ 300 req/s"),
        ("throughput HTTP /run_code (stateless)", f"{http_fresh_rate:.0f} req/s", "", "≥ 300 req/s"),
        ("sympy snippet latency, session, p50", ms(sympy_p50), ms(sympy_base_p50), ""),
        ("sympy snippet latency, session, p99", ms(sympy_p99), "", ""),
        ("sympy snippet throughput local, sessions", f"{sympy_rate:.0f} calls/s", f"{sympy_base_rate:.1f} calls/s", ""),
        ("sympy snippet throughput HTTP, sessions", f"{http_sympy_rate:.0f} req/s", "", ""),
    ]
    table = Table(title="agentdata sandbox vs fresh `python -c` per call")
    for column in ("measure", "agentdata sandbox", "baseline", "target"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, workers={args.workers}"
    lines = [
        "# Sandbox benchmark", "",
        f"`python bench/bench_sandbox.py{' --quick' if args.quick else ''}` on {machine}; "
        f"isolation: own uid={isolation['own_uid']}, private /tmp={isolation['private_tmp']}, "
        f"network namespace={'yes' if not any('network' in w for w in isolation['warnings']) else 'no'}. "
        "The machine is shared with other work, so figures vary run to run.", "",
        "| measure | agentdata sandbox | baseline (`python -c` per call) | target |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        f"sympy snippet: `{SYMPY.replace(chr(10), '; ')}`",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
