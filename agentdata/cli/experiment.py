"""`agentdata experiment RECIPE`: every arm of a recipe through the stages, compared pairwise (agentdata.experiment)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from agentdata.cli import render
from agentdata.cli.common import output_dir
from agentdata.cli.console import console, print_line
from agentdata.cli.flags import JSON_HELP
from agentdata.cli.overrides import given_overrides, override_pairs
from agentdata.cli.progress import rendering
from agentdata.errors import UserError

RECIPE_CONFIG_HELP = (
    "Print the recipe's base and arms after the KEY=VALUE overrides, each value with where it came from; run "
    "nothing (--dry-run builds every arm's stage settings)."
)


def command(
    recipe: Annotated[
        str | None,
        typer.Argument(help="A recipe file (.yaml/.json) or a built-in recipe's name; none lists the built-in ones."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Experiment folder (default runs/experiment/NAME); resumed.")
    ] = None,
    seeds: Annotated[
        int | None, typer.Option("--seeds", help="Repeat every arm N times (seeds 0..N-1 added) and report the spread.")
    ] = None,
    removed_set: Annotated[list[str] | None, typer.Option("--set", hidden=True)] = None,  # 0.5: KEY=VALUE
    report_to: Annotated[
        list[str] | None,
        typer.Option(
            "--report-to",
            help="Experiment trackers every arm's SFT and GRPO log to (train's --report-to: tensorboard, trackio, "
            "wandb, mlflow; repeatable or comma separated), each run named ARM-sft / ARM-grpo; the same as "
            "sft.report_to=... rl.report_to=....",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Arms at once, each in a worker process (default: as many as the cores and memory allow, about "
            "8 GB an arm on the embedded default; 1 with vLLM). 1 runs them one after another in this process.",
        ),
    ] = None,
    show: Annotated[bool, typer.Option("--show", help="Print the recipe file and stop (copy a built-in one).")] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Build every arm's stage settings and list the stages, their commands and the recipe's inputs; "
            "run and write nothing (a GPU twin checked where its data and models are not).",
        ),
    ] = False,
    print_config: Annotated[bool, typer.Option("--print-config", help=RECIPE_CONFIG_HELP)] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    *,
    context: typer.Context,
) -> None:
    """Run a recipe's arms through collect, curate, SFT, filter, GRPO and eval; report paired differences.

    KEY=VALUE words change the recipe's base, with the keys a recipe takes (eval.samples=8 rl.temperature=0.9).
    """
    from agentdata.experiment import builtin_recipes, load_recipe, run_experiment
    from agentdata.experiment.keys import check_key
    from agentdata.experiment.recipe import recipe_path
    from agentdata.inputs import read_text
    from agentdata.settings.files import MAX_SETTINGS_BYTES

    if removed_set:  # 0.4's spelling: no alias, one line naming the new one
        raise UserError(f"--set is gone: write {' '.join(map(shlex.quote, removed_set))} (see CHANGELOG.md)")
    words = given_overrides(context)
    overrides = override_pairs(words, lambda key, text: check_key(key, text, written="=..."))
    if recipe is None:
        console.print(builtin_table(builtin_recipes()))
        console.print("Run one: [bold]agentdata experiment NAME[/] (docs/experiments.md)")
        return
    if show:
        console.out(read_text(recipe_path(recipe), MAX_SETTINGS_BYTES), highlight=False)
        return
    tracked = trackers(report_to)
    loaded = load_recipe(recipe, overrides | tracked, seeds)
    if print_config:
        return show_recipe_config(loaded, set(overrides), set(tracked), seeds is not None, as_json)
    if dry_run:
        from agentdata.experiment.dry_run import dry_run as plan_only

        command = run_command(recipe, out, seeds, words, report_to, jobs)
        render.show(plan_only(loaded), as_json, lambda result: dry_run_views(result, command))
        return
    out = out or Path("runs/experiment") / loaded.name
    output_dir(out, "--out")
    if not as_json:
        print_line(
            f"[bold]experiment[/] {escape(loaded.name)}: {len(loaded.arms)} arms ({escape(', '.join(loaded.arms))}) "
            f"× {loaded.seeds} seed(s) → {out}"
        )
    with rendering(enabled=not as_json):
        report = run_experiment(loaded, out, jobs)
    render.show(report, as_json, experiment_views)
    if report.totals["arms_failed"]:  # the report of the others is written; the same command resumes the rest
        raise typer.Exit(1)


def trackers(report_to: list[str] | None) -> dict[str, list[str]]:
    """`--report-to` as the base settings it stands for: both training stages' `report_to`, checked here, before
    any work (a recipe whose arms train nothing would never read it)."""
    from agentdata.settings import build
    from agentdata.training.config import TrackingConfig
    from agentdata.training.trackers import check_installed

    names = [name.strip() for value in report_to or [] for name in value.split(",") if name.strip()]
    if names:
        check_installed(build(TrackingConfig, {"report_to": names}, source="--report-to"), "experiment")
    return {"sft.report_to": names, "rl.report_to": names} if names else {}


def show_recipe_config(recipe: Any, overridden: set[str], tracked: set[str], seeds_flag: bool, as_json: bool) -> None:
    """The recipe's base and arms after the overrides, each value with where it came from; runs nothing (the
    stages' own defaults and every arm's built settings are what --dry-run shows)."""

    def source(key: str, arm: str | None = None) -> str:
        if arm is None and key in tracked:
            return "flag --report-to"
        if arm is None and key in overridden:
            return f"override {key}"
        return f"recipe {recipe.source}" + (f" arm {arm}" if arm else "")

    tree = {
        "seeds": (recipe.seeds, "flag --seeds" if seeds_flag else f"recipe {recipe.source}"),
        "base": {key: (value, source(key)) for key, value in recipe.base.items()},
        "arms": {
            arm: {key: (value, source(key, arm)) for key, value in changes.items()}
            for arm, changes in recipe.arms.items()
        },
    }
    if as_json:
        typer.echo(json.dumps(_as_json(tree), indent=2, default=str))
        return
    for line in _as_yaml(tree):
        typer.echo(line)


def _as_json(node: Any) -> Any:
    if isinstance(node, tuple):
        return {"value": node[0], "source": node[1]}
    return {key: _as_json(value) for key, value in node.items()}


def _as_yaml(node: dict[str, Any], indent: str = "") -> Iterator[str]:
    for key, value in node.items():
        if isinstance(value, tuple):
            yield f"{indent}{key}: {json.dumps(value[0], default=str)}  # {value[1]}"
        else:
            yield f"{indent}{key}:" + ("" if value else " {}")
            yield from _as_yaml(value, indent + "  ")


def run_command(recipe: str, out: Path | None, seeds: int | None, words: list[str], report_to: Any, jobs: Any) -> str:
    """The command a dry run stands for, without --dry-run: what to run where the data and models are."""
    command = ["agentdata", "experiment", recipe, *words]
    command += ["--out", str(out)] if out else []
    command += ["--seeds", str(seeds)] if seeds else []
    command += [word for value in report_to or [] for word in ("--report-to", value)]
    command += ["--jobs", str(jobs)] if jobs else []
    return shlex.join(command)


def dry_run_views(result: Any, command: str) -> Iterator[Any]:
    """A dry run (experiment.dry_run.DryRun): the inputs, each arm's stages with their commands, the command."""
    yield (
        f"[bold]experiment[/] {escape(result.recipe)} (dry run: nothing run, nothing written): "
        f"{len(result.arms)} arms × {result.seeds} seed(s); every stage's settings built"
    )
    for found in result.inputs:
        state = "[green]here[/]" if found["here"] else "[yellow]not on this machine[/]"
        yield f"  input {escape(found['what'])}: {escape(found['path'])} ({state})"
    for plan in result.plans:
        yield f"[bold]arm {escape(plan['arm'])}[/] · seed {plan['seed']}"
        for stage in plan["stages"]:
            values = " ".join(f"{key}={value}" for key, value in stage["settings"].items())
            yield escape(f"  {stage['stage']:<9} {stage['command']}{'  ' + values if values else ''}")
    yield f"To run it: [bold]{escape(command)}[/]"


def experiment_views(report: Any) -> Iterator[Any]:
    """experiment's end (an experiment.report.ExperimentReport): the arms, their paired differences, failures."""
    from agentdata.cli.eval_views import Fitted, comparison_lines, comparisons_table

    yield arms_table(report)
    if report.comparisons:
        title = "paired differences (first arm − second)"
        yield Fitted(comparisons_table(report.comparisons, title), comparison_lines(report.comparisons, title))
        for row in report.comparisons:
            if row["metric"].startswith("avg@"):
                yield escape(f"  {row['sentence']}")
    for arm in report.arms:
        for failure in arm.get("failures", []):
            reason = f"  arm {arm['arm']} (seed {failure['seed']}) failed at {failure['stage']}: {failure['reason']}"
            yield f"[red]{escape(reason)}[/]"
    files = report.files
    yield f"Report: [cyan]{files['markdown']}[/] · [cyan]{files['png']}[/] · [cyan]{files['json']}[/]"


def builtin_table(recipes: dict[str, Path]) -> Table:
    from agentdata.settings import read_settings_file

    table = Table(title="built-in recipes")
    table.add_column("name")
    table.add_column("arms")
    table.add_column("what it shows")
    for name, path in sorted(recipes.items()):
        data = read_settings_file(path)
        table.add_row(name, ", ".join(data.get("arms", {})), escape(" ".join(str(data.get("description", "")).split())))
    return table


def arms_table(report: Any) -> Table:
    k = report.k
    table = Table(title=f"experiment {report.recipe['name']} · 95% intervals over problems")
    for name in (
        "arm",
        "changes",
        f"avg@{k}",
        f"pass@{k}",
        f"maj@{k}",
        "calls/resp",
        "calls ok",
        "resp tokens",
        "wall s",
        "status",
    ):
        table.add_column(name, justify="left" if name in ("arm", "changes", "status") else "right")
    for arm in report.arms:
        changes = ", ".join(f"{key}={value}" for key, value in arm["changes"].items()) or "base"
        if "avg" not in arm:
            table.add_row(escape(arm["arm"]), escape(changes), *[""] * 6, f"{arm['wall_s']:.0f}", "[red]failed[/]")
            continue
        cells = [_score(arm[name], arm[f"{name}_ci"]) for name in ("avg", "pass", "maj")]
        calls_ok = arm["calls_without_error"]
        table.add_row(
            escape(arm["arm"]),
            escape(changes),
            *cells,
            f"{arm['tool_calls']:.2f}",
            "-" if calls_ok is None else f"{calls_ok:.0%}",
            f"{arm['response_tokens']:.0f}",
            f"{arm['wall_s']:.0f}",
            "done",
        )
    return table


def _score(value: float, interval: dict[str, Any] | None) -> str:
    if not interval:
        return f"{value:.1%}"
    return f"{value:.1%} [{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]"
