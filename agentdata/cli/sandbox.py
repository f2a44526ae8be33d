"""`agentdata sandbox serve|run`: the code sandbox as an HTTP service, or one run from the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from agentdata.cli.common import console, err_console
from agentdata.errors import InputFileError, UserError

app = typer.Typer(help="Run the code sandbox as a service, or run one piece of code in it.", no_args_is_help=True)

Workers = Annotated[int, typer.Option("--workers", "-w", help="Calls that run at once; more wait in a queue.")]
Timeout = Annotated[float, typer.Option("--timeout", help="Default wall-clock limit per call, in seconds.")]
MemoryMb = Annotated[int, typer.Option("--memory-mb", help="Memory limit of each sandbox process (MiB).")]


def _config(workers: int, timeout: float, memory_mb: int, prefork: int = 2):
    from agentdata.sandbox import SandboxConfig

    try:
        return SandboxConfig(workers=workers, timeout_s=timeout, memory_mb=memory_mb, prefork=prefork)
    except ValueError as error:
        raise UserError(str(error)) from None


@app.command("serve")
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    workers: Workers = 4,
    timeout: Timeout = 30.0,
    memory_mb: MemoryMb = 2048,
    prefork: Annotated[int, typer.Option(
        "--prefork", help="Isolated executors kept forked and ready, so fresh calls (/run_code) do not wait for one.",
    )] = 4,
) -> None:
    """Serve SandboxFusion's POST /run_code (and /v1/run with sessions) until interrupted."""
    from agentdata.sandbox import Sandbox
    from agentdata.sandbox.service import serve as serve_http

    with Sandbox(_config(workers, timeout, memory_mb, prefork)) as sandbox:
        table = Table(title="agentdata sandbox service")
        table.add_column("setting")
        table.add_column("value")
        table.add_row("url", f"http://{host}:{port}/run_code")
        table.add_row("workers / spare executors", f"{workers} / {prefork}")
        table.add_row("timeout / memory", f"{timeout:g} s / {memory_mb} MiB")
        isolation = sandbox.isolation
        table.add_row("own uid per session", str(isolation["own_uid"]))
        table.add_row("private /tmp", str(isolation["private_tmp"]))
        console.print(table)
        for warning in isolation["warnings"]:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
        serve_http(sandbox, host=host, port=port)


@app.command("run")
def run(
    path: Annotated[Optional[Path], typer.Argument(help="A Python file to run.")] = None,
    code: Annotated[Optional[str], typer.Option("--code", "-c", help="Code to run instead of a file.")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="Run on a sandbox service instead of locally.")] = None,
    timeout: Timeout = 30.0,
    memory_mb: MemoryMb = 2048,
) -> None:
    """Run a code file or `-c CODE` once in the sandbox and print what it gave back."""
    if (path is None) == (code is None):
        raise UserError("give either a FILE or -c CODE")
    if path is not None:
        if not path.is_file():
            raise InputFileError(path, "no such file")
        code = path.read_text(encoding="utf-8")
    from agentdata.sandbox import open_sandbox

    if url:
        sandbox = open_sandbox(url)
    else:
        sandbox = open_sandbox("local", workers=1, prefork=0, timeout_s=timeout, memory_mb=memory_mb)
    with sandbox:
        result = sandbox.run(code, timeout=timeout)
    if result.stdout:
        console.out(result.stdout, end="", highlight=False)
    if result.stderr:
        err_console.out(result.stderr, end="", highlight=False)
    table = Table(title="sandbox run")
    for column in ("status", "exit code", "seconds"):
        table.add_column(column)
    table.add_row(result.status, str(result.exit_code), f"{result.duration_s:.3f}")
    console.print(table)
    raise typer.Exit(0 if result.status == "ok" else 1)
