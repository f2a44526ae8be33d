"""`agentdata view PATH...`: every artifact in the browser, or as a static site (--export), Hub traces (--sts) or
ATIF trajectories (--atif)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agentdata.cli.common import output_dir
from agentdata.cli.console import console, err_console, print_json
from agentdata.cli.options import settings_command
from agentdata.errors import InputFileError, UserError
from agentdata.view.config import ViewConfig

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@settings_command()
def command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run dirs, trajectory files, SFT sets, RL pools, train or eval output dirs, problem files, or "
            "a folder of them; several to compare them. Default: what the commands write here by default "
            "(runs/, sft.parquet, pool.parquet, stitched_sft.parquet)."
        ),
    ] = None,
    export: Annotated[
        Path | None, typer.Option("--export", help="Write a static site (HTML and data files) here instead of serving.")
    ] = None,
    sts: Annotated[
        Path | None,
        typer.Option("--sts", help="Write the trajectories in the Hub's Session Trace format (one JSONL per session)."),
    ] = None,
    atif: Annotated[
        Path | None,
        typer.Option(
            "--atif",
            help="Write the trajectories as Harbor's ATIF v1.8 (one JSON per trajectory; `agentdata import atif` "
            "reads them back).",
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where", help="With --export/--sts/--atif: keep rows like the page's filters, e.g. correct=false."
        ),
    ] = None,
    secrets: Annotated[
        str,
        typer.Option(
            "--secrets",
            help="With --sts, --atif and --export: secrets in any field (detect-secrets' detectors, passwords and "
            "tokens in URLs) are redacted, or the session dropped (drop; --export redacts), or left (keep). See "
            "docs/provenance.md.",
        ),
    ] = "redact",
    push_to_hub: Annotated[
        str | None,
        typer.Option("--push-to-hub", help="With --sts: upload the traces to this Hub dataset repo (OWNER/NAME)."),
    ] = None,
    public: Annotated[bool, typer.Option("--public", help="Make a new --push-to-hub repo public.")] = False,
    *,
    config: ViewConfig,
    as_json: bool = False,
) -> None:
    """Look at trajectories, problems, drop reasons, pools and training curves in the browser."""
    from agentdata.publish.secrets import SECRET_MODES
    from agentdata.view.api import ViewerData
    from agentdata.view.artifacts import journal_note
    from agentdata.view.catalog import open_artifacts
    from agentdata.view.export import check_out
    from agentdata.view.mask import Tokenizers

    if secrets not in SECRET_MODES:
        raise UserError(f"--secrets {secrets}: choose one of {', '.join(SECRET_MODES)}")
    if push_to_hub is not None:
        from agentdata.publish.hub import check_hub

        if sts is None:
            raise UserError("--push-to-hub uploads the --sts traces: give --sts DIR too")
        check_hub(push_to_hub)  # before any work
    paths = paths or default_paths(Path.cwd())
    for path in paths:
        if not path.exists():
            raise InputFileError(path, "no such file or directory")
    outputs = [
        (target, flag)
        for target, flag in ((export, "--export"), (sts, "--sts"), (atif, "--atif"))
        if target is not None
    ]
    for target, flag in outputs:
        output_dir(target, flag)
        if any(target.resolve() == path.resolve() or path.resolve().is_relative_to(target.resolve()) for path in paths):
            raise UserError(f"{flag} {target} holds an input: give a folder of its own")
    for index, (target, flag) in enumerate(outputs):
        for other, other_flag in outputs[index + 1 :]:
            check_apart(target, flag, other, other_flag)
    for target, flag in outputs:
        check_out(target, flag)  # a folder of other files: refused now, not after the other one is written
    filters = where_filters(where or [])
    started = time.perf_counter()
    with console.status(f"opening {len(paths)} path(s)…", spinner="dots") if not as_json else _nothing():
        catalog = open_artifacts(paths)
    opened_s = time.perf_counter() - started
    data = ViewerData(catalog, Tokenizers(config.tokenizer), config.band)
    if outputs:
        catalog.keep(search=False)  # a run dir's index, for the next open; no search index: nothing is served
    if not as_json:
        console.print(artifacts_table(catalog, opened_s))
    if export is not None and any(a.has_rows and a.kind in ("run", "trajectories", "sft") for a in catalog):
        with console.status(f"loading the tokenizer of {config.tokenizer}…") if not as_json else _nothing():
            data.tokenizers.get()  # before any file is written: a model that cannot be loaded is one line
    for artifact in catalog:
        for line in (artifact.error, journal_note(artifact)):
            if line:
                err_console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)
    if not outputs:
        return serve(data, config, as_json)
    results = {}
    if export is not None:
        from agentdata.view.export import export_site

        results["export"] = export_site(data, export, config.limit, filters, secrets).as_dict()
    if sts is not None:
        from agentdata.view.sts import write_sts

        results["sts"] = write_sts(data, sts, config.limit, filters, secrets).as_dict()
        if push_to_hub is not None:
            from agentdata.publish.hub import folder_plan, push_files

            message = "agentdata: session traces (STS format)"
            results["sts"]["pushed"] = push_files(folder_plan(sts), push_to_hub, not public, message).as_dict()
    if atif is not None:
        from agentdata.view.atif import write_atif

        results["atif"] = write_atif(data, atif, config.limit, filters, secrets).as_dict()
    if as_json:
        print_json(results)
        return
    for line in [line for result in results.values() for line in result.get("skipped", [])]:
        err_console.print(f"[yellow]skipped:[/] {escape(line)}", highlight=False, soft_wrap=True)
    console.print(export_table(results))


def check_apart(first: Path, first_flag: str, second: Path, second_flag: str) -> None:
    """Two exports (the site, the STS and ATIF traces) each in a folder of their own: neither inside the other
    (each export empties its folder first, or refuses one holding other files)."""
    one, two = first.resolve(), second.resolve()
    if one == two:
        raise UserError(f"{first_flag} and {second_flag} name the same folder: give each its own")
    if one.is_relative_to(two) or two.is_relative_to(one):
        inner, outer = (first_flag, second_flag) if one.is_relative_to(two) else (second_flag, first_flag)
        raise UserError(f"{inner} is inside the {outer} folder: give each a folder of its own, side by side")


DEFAULT_PLACES = ("runs", "sft.parquet", "sft.jsonl", "pool.parquet", "stitched_sft.parquet")


def default_paths(here: Path) -> list[Path]:
    """What the commands write when given no --out, where it exists."""
    found = [Path(name) for name in DEFAULT_PLACES if (here / name).exists()]
    if not found:
        raise UserError(
            f"nothing to view in {here} (no {', '.join(DEFAULT_PLACES)}): give a path, e.g. "
            "`agentdata view runs/collect` or `agentdata view sft.parquet`"
        )
    return found


def where_filters(pairs: list[str]) -> dict[str, str]:
    """Repeated --where KEY=VALUE, as the page's URL parameters (correct=false, min.num_tool_calls=1, q=text)."""
    filters: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--where {pair}: expected KEY=VALUE, e.g. --where correct=false")
        filters[key.strip()] = value.strip()
    return filters


def artifacts_table(catalog, opened_s: float) -> Table:
    table = Table(title=f"agentdata view · opened in {opened_s:.2f} s")
    for name in ("key", "kind", "artifact", "rows", "index"):
        table.add_column(name, justify="right" if name == "rows" else "left", overflow="fold")
    for artifact in catalog:
        rows = len(artifact.table()) if artifact.has_rows else None
        label = ("  " if artifact.parent else "") + artifact.label
        kind = f"[red]{artifact.kind}[/]" if artifact.error else artifact.kind
        index = artifact.table().origin if artifact.has_rows else "-"  # a run dir's: read back from beside it?
        table.add_row(artifact.key, kind, escape(label), f"{rows:,}" if rows is not None else "-", index)
    return table


def export_table(results: dict) -> Table:
    table = Table(title="agentdata view · written")
    table.add_column("what")
    table.add_column("value", justify="right", overflow="fold")
    if "export" in results:
        site = results["export"]
        table.add_row("static site (open it in a browser)", escape(site["index"]))
        table.add_row("rows written (of all rows)", f"{site['rows']:,} ({site['rows_in_artifacts']:,})")
        table.add_row("SFT views · problem pages", f"{site['masks']:,} · {site['problems']:,}")
        table.add_row("files · size", f"{site['files']:,} · {site['bytes'] / 2**20:.1f} MiB")
        if site["secrets"].get("found"):
            kinds = ", ".join(f"{kind}: {count}" for kind, count in site["secrets"]["found"].items())
            table.add_row("secrets redacted", kinds)
    if "sts" in results:
        traces = results["sts"]
        table.add_row("Hub session traces (STS-Format)", escape(traces["out"]))
        table.add_row("sessions · messages", f"{traces['sessions']:,} · {traces['messages']:,}")
        if traces.get("secrets", {}).get("rows"):
            kinds = ", ".join(f"{kind}: {count}" for kind, count in traces["secrets"]["found"].items())
            table.add_row(
                f"sessions with secrets ({traces['secrets']['mode']})", f"{traces['secrets']['rows']} ({kinds})"
            )
        if traces.get("pushed"):
            table.add_row("pushed to", escape(traces["pushed"]["url"]))
    if "atif" in results:
        trajectories = results["atif"]
        table.add_row("ATIF trajectories", escape(trajectories["out"]))
        table.add_row("trajectories · messages", f"{trajectories['sessions']:,} · {trajectories['messages']:,}")
        if trajectories.get("secrets", {}).get("rows"):
            table.add_row(
                f"trajectories with secrets ({trajectories['secrets']['mode']})", f"{trajectories['secrets']['rows']}"
            )
    return table


def serve(data, config: ViewConfig, as_json: bool) -> None:
    """Bind first (port 0 takes a free one), print the URL, then serve until Ctrl-C."""
    import uvicorn

    from agentdata.view.server import create_app

    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as error:
        sock.close()
        raise UserError(f"--host {config.host} --port {config.port}: cannot listen there ({error.strerror})") from None
    sock.listen(2048)  # before the URL is printed: a browser that comes at once waits in the queue, not refused
    port = sock.getsockname()[1]
    shown_host = f"[{config.host}]" if family == socket.AF_INET6 else config.host
    url = f"http://{shown_host}:{port}/"
    # The Host header a request must carry: a page elsewhere cannot reach a loopback server by DNS rebinding.
    if config.host in ("0.0.0.0", "::", ""):
        hosts = ["*"]  # every address of this machine: the user chose to show the artifacts to the network
    else:
        hosts = None if config.host in LOOPBACK else [config.host, "127.0.0.1", "localhost"]
    if config.host not in LOOPBACK:
        err_console.print(
            f"[yellow]warning:[/] listening on {escape(config.host)}: anyone who can reach it can read these "
            "artifacts (requests must name this host)",
            highlight=False,
        )
    _log_to_console()
    if as_json:
        print_json({"url": url})
    else:
        console.print(f"[bold]agentdata view[/] serving at [cyan]{url}[/] (read-only; Ctrl-C stops it)")
    server = uvicorn.Server(uvicorn.Config(create_app(data, hosts), log_level="warning", access_log=False))
    stop = threading.Event()
    keeper = keep_in_background(data.catalog, stop, as_json)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shuts down, then re-raises Ctrl-C: for a server it is the way to stop
        pass
    finally:
        stop.set()  # a search index half built is abandoned, its temporary file removed
        if keeper is not None:
            keeper.join(timeout=KEEPER_JOIN_S)
        sock.close()
    if not as_json:
        console.print("agentdata view stopped")


KEEPER_JOIN_S = 30  # a shard's worth of search index at most: then the temporary file is removed


def keep_in_background(catalog, stop: threading.Event, as_json: bool) -> threading.Thread | None:
    """After the URL: each run dir's index and search index kept beside it (catalog.keep), while the page is
    served; a search scans the shards until its index is ready, and the terminal says when it is."""
    pending = [artifact for artifact in catalog if artifact.has_rows and artifact.table().pending]
    if not pending:
        return None

    def work() -> None:
        started = time.perf_counter()
        catalog.keep(stop)
        if not stop.is_set() and not as_json:
            ready = [a.key for a in pending if getattr(a.table(), "search_index", None) is not None]
            console.print(
                f"agentdata view: index kept, search index ready for {', '.join(ready) or 'none'} "
                f"({time.perf_counter() - started:.1f} s)",
                highlight=False,
            )

    keeper = threading.Thread(target=work, name="agentdata-view-keep", daemon=True)
    keeper.start()
    return keeper


class _ConsoleHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(f"[yellow]warning:[/] {escape(record.getMessage())}", highlight=False, soft_wrap=True)


def _log_to_console() -> None:
    logger = logging.getLogger("agentdata.view")
    if not any(isinstance(handler, _ConsoleHandler) for handler in logger.handlers):
        logger.addHandler(_ConsoleHandler())
        logger.propagate = False


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
