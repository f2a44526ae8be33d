"""The `agentdata` command: assembles one module per command and maps known errors to one line."""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import warnings

import typer

from agentdata.cli import collect, curate, experiment, imports, inspect, regrade, sandbox, synth, train, validate, view
from agentdata.cli import eval as eval_cmd
from agentdata.cli import filter as filter_cmd
from agentdata.cli.common import forget_output_place, output_place, record_invocation
from agentdata.cli.console import print_error
from agentdata.cli.crash import write_crash_log
from agentdata.cli.options import SettingsCommand
from agentdata.errors import UserError, write_refusal

# Newer typer vendors click: take the usage-error classes from wherever typer's own come from.
_click_errors = importlib.import_module(typer.BadParameter.__module__)
NoArgsIsHelp = getattr(_click_errors, "NoArgsIsHelpError", ())

# The system refused a file operation on a path the user gave (or its folder): theirs to fix, one line.
REFUSED_BY_SYSTEM = {
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.ENAMETOOLONG,
    errno.EISDIR,
    errno.ENOTDIR,
    errno.ELOOP,
}

app = typer.Typer(
    name="agentdata",
    help="Build real tool-use trajectories, curate SFT sets and model-aware RL pools, and train on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# A settings command takes `KEY=VALUE` overrides among its arguments (cli/options.py, cli/overrides.py).
app.command("collect", cls=SettingsCommand)(collect.command)
app.command("curate", cls=SettingsCommand)(curate.command)
app.command("filter", cls=SettingsCommand)(filter_cmd.command)
app.command("train", cls=SettingsCommand)(train.command)
app.command("eval", cls=SettingsCommand)(eval_cmd.command)
app.command("experiment", cls=SettingsCommand)(experiment.command)
app.command("inspect", cls=SettingsCommand)(inspect.command)
app.command("regrade", cls=SettingsCommand)(regrade.command)
app.command("validate", cls=SettingsCommand)(validate.command)
app.command("view", cls=SettingsCommand)(view.command)
app.add_typer(synth.app, name="synth")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(imports.app, name="import")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. A user's mistake ends with one line on stderr and exit code 2; anything unexpected
    with one line naming the log file that holds the traceback (exit 1); never a raw traceback."""
    # `kill` (SIGTERM) unwinds like Ctrl-C, so finished work is flushed to disk before exiting. The caller's
    # handler comes back on return: a process that runs main() in-process (the tests, a notebook) and later
    # forks would otherwise hand its children a SIGTERM they can ignore, and `Pool.terminate()` would wait
    # for ever on a child stuck on a lock it inherited (a CI run hung so).
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        _run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> None:
    quiet_libraries()
    forget_output_place()
    record_invocation(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, prog_name="agentdata", standalone_mode=False)
    except NoArgsIsHelp as error:  # the help was shown already
        sys.exit(error.exit_code)
    except _click_errors.UsageError as error:  # a bad flag or value: typer's box would be many lines
        hint = f" (see `{error.ctx.command_path} --help`)" if error.ctx else ""
        _fail(f"{error.format_message()}{hint}", 2)
    except UserError as error:
        _fail(str(error), 2)
    except (KeyboardInterrupt, typer.Abort):
        _fail("interrupted", 130, style="yellow")
    except Exception as error:  # noqa: BLE001 - the last resort: a short line, the traceback to a file
        if isinstance(error, OSError) and error.errno in REFUSED_BY_SYSTEM and error.filename:
            _fail(f"{error.filename}: {error.strerror} (check the path, its permissions and the free space)", 2)
        if write_refusal(error) is not None:  # a library's write the system refused, the file unnamed
            where = f" under {output_place()}" if output_place() else ""
            _fail(f"writing{where}: {os.strerror(write_refusal(error))} (check the free space and permissions)", 2)
        log = write_crash_log(error, output_place())
        _fail(f"unexpected {type(error).__name__}: {str(error)[:300]} — the full traceback is in {log}", 1)
    if code == 130:  # typer turns Ctrl-C inside a command into exit code 130
        _fail("interrupted", 130, style="yellow")
    if isinstance(code, int) and code:
        sys.exit(code)


# The commands draw their own progress (rich, from agentdata.events); the tqdm bars of the libraries below
# them (transformers' "Loading weights", "Writing model shards", datasets' maps) would only add noise, and
# TRL's notice that rollout_func is experimental is for us (pyproject pins TRL for it), not the user.
QUIET_LIBRARIES = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    # Bars that use tqdm directly, not through the hub's switch (transformers' "Converting and
    # de-quantizing GGUF tensors", on the embedded model's first conversion); tqdm reads it when imported.
    "TQDM_DISABLE": "1",
}
# One library's deprecation notices about another (TRL 1.16 on transformers 5 names
# `is_gradient_checkpointing`) are ours to act on when we upgrade, not the user's to read on every run.
LIBRARY_MODULES = r"(transformers|trl|torch|accelerate|datasets|peft)(\.|$)"


def quiet_libraries() -> None:
    """Keep the libraries' own progress bars and deprecation notices out of a command's output (read when
    they are imported; an environment variable the user set wins)."""
    for name, value in QUIET_LIBRARIES.items():
        os.environ.setdefault(name, value)
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=LIBRARY_MODULES)


def _fail(message: str, code: int, style: str = "bold red") -> None:
    print_error(message, style)
    sys.exit(code)


if __name__ == "__main__":
    main()
