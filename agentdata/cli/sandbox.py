"""`agentdata sandbox serve|run`: the code sandbox as an HTTP or MCP service, or one run from the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agentdata.cli.console import console, err_console, print_json
from agentdata.cli.options import SettingsCommand, settings_command
from agentdata.errors import InputFileError, UserError
from agentdata.inputs import read_text
from agentdata.sandbox.config import SandboxConfig

app = typer.Typer(help="Run the code sandbox as a service, or run one piece of code in it.", no_args_is_help=True)

# A service keeps more executors forked ahead than a library Sandbox: fresh /run_code calls should not wait.
SERVE_DEFAULTS = {"prefork": 4}
# `sandbox run` runs one piece of code: one worker, nothing forked ahead.
RUN_DEFAULTS = {"workers": 1, "prefork": 0}


@app.command("serve", cls=SettingsCommand)
@settings_command(defaults=SERVE_DEFAULTS)
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.", min=0, max=65535)] = 8080,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp", help="Serve as an MCP server (a stateful code_interpreter tool) instead; docs/sandbox.md."
        ),
    ] = False,
    transport: Annotated[
        str,
        typer.Option(
            "--transport", help="With --mcp: stdio (the process an MCP client starts) or http (streamable HTTP, /mcp)."
        ),
    ] = "stdio",
    *,
    config: SandboxConfig,
    as_json: bool = False,
) -> None:
    """Serve SandboxFusion's POST /run_code (and /v1/run with sessions), or with --mcp an MCP server, until
    interrupted."""
    from agentdata.sandbox import Sandbox
    from agentdata.sandbox.service import listen
    from agentdata.sandbox.service import serve as serve_http

    if transport not in ("stdio", "http"):
        raise UserError(f"--transport {transport!r}: use stdio or http")
    if transport != "stdio" and not mcp:
        raise UserError("--transport is for --mcp: the HTTP service serves HTTP alone")
    if mcp:
        from agentdata.sandbox.mcp_server import load_mcp

        load_mcp()  # a missing SDK is one line, before any worker starts
        if transport == "stdio":
            _serve_mcp_stdio(config)
            return
    sock = listen(host, port)  # a taken port is one line, before any worker starts
    try:
        with Sandbox(config) as sandbox:
            bound_host, bound_port = sock.getsockname()[:2]
            settings = {
                "url": f"http://{host}:{bound_port}/run_code",
                "host": bound_host,
                "port": bound_port,
                "workers": config.workers,
                "prefork": config.prefork,
                "timeout_s": config.timeout_s,
                "memory_mb": config.memory_mb,
                "isolation": sandbox.isolation,
            }
            if mcp:
                from agentdata.sandbox.mcp_server import MCP_PATH, serve_mcp_http

                settings["url"] = f"http://{host}:{bound_port}{MCP_PATH}"
            if as_json:  # one JSON document, then the service runs; warnings are in it
                print_json(settings)
            else:
                _print_settings(settings)
            if mcp:
                serve_mcp_http(sandbox, sock, host)
            else:
                serve_http(sandbox, sock)
    finally:
        sock.close()


def _serve_mcp_stdio(config: SandboxConfig) -> None:
    """stdout is the protocol's: nothing else is printed there (the sandbox's warnings go to stderr)."""
    from agentdata.sandbox import Sandbox
    from agentdata.sandbox.mcp_server import serve_mcp_stdio

    with Sandbox(config) as sandbox:
        for warning in sandbox.isolation["warnings"]:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
        serve_mcp_stdio(sandbox)


def _print_settings(settings: dict) -> None:
    table = Table(title="agentdata sandbox service")
    table.add_column("setting")
    table.add_column("value")
    table.add_row("url", settings["url"])
    table.add_row("workers / spare executors", f"{settings['workers']} / {settings['prefork']}")
    table.add_row(
        "timeout / memory (ceilings of each call)", f"{settings['timeout_s']:g} s / {settings['memory_mb']} MiB"
    )
    isolation = settings["isolation"]
    table.add_row("own uid per session", str(isolation["own_uid"]))
    table.add_row("private /tmp", str(isolation["private_tmp"]))
    console.print(table)
    for warning in isolation["warnings"]:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)


@app.command("run", cls=SettingsCommand)
@settings_command(defaults=RUN_DEFAULTS)
def run(
    path: Annotated[Path | None, typer.Argument(help="A Python file to run.")] = None,
    code: Annotated[str | None, typer.Option("--code", "-c", help="Code to run instead of a file.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Run on a sandbox service instead of locally.")] = None,
    *,
    config: SandboxConfig,
    as_json: bool = False,
) -> None:
    """Run a code file or `-c CODE` once in the sandbox and print what it gave back."""
    if (path is None) == (code is None):
        raise UserError("give either a FILE or -c CODE")
    if path is not None:
        if path.is_dir():
            raise InputFileError(path, "is a folder: give a Python file")
        code = read_text(path)  # a FIFO, a device or a huge file is refused, not waited on
    from agentdata.sandbox import Sandbox, open_sandbox

    sandbox = open_sandbox(url) if url else Sandbox(config)
    with sandbox:
        result = sandbox.run(code, timeout=config.timeout_s)
    if as_json:
        print_json(result.as_dict())
        raise typer.Exit(0 if result.status == "ok" else 1)
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
