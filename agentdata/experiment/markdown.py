"""The experiment's report as Markdown: what ran, a row per arm, the paired verdicts, GRPO, time and load."""

from __future__ import annotations

from typing import Any

from agentdata.experiment.series import FLAT_GROUPS

MOST_STEP_ROWS = 30  # longer runs: steps grouped into ranges


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _ci(interval: dict[str, Any] | None) -> str:
    return "" if not interval else f" [{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]"


def _changes(changes: dict[str, Any]) -> str:
    return ", ".join(f"`{key}: {value}`" for key, value in changes.items()) or "the base"


def _table(header: list[str], rows: list[list[str]], text_columns: int = 1) -> list[str]:
    """A Markdown table; the first `text_columns` columns left-aligned, the numbers right-aligned."""
    align = ["---" if index < text_columns else "---:" for index in range(len(header))]
    return [f"| {' | '.join(header)} |", f"| {' | '.join(align)} |", *(f"| {' | '.join(row)} |" for row in rows)]


def arms_section(report: Any) -> list[str]:
    k = report.k
    header = [
        "arm",
        "changes",
        f"avg@{k} [95%]",
        f"pass@{k} [95%]",
        f"maj@{k} [95%]",
        "tool calls / response",
        "calls without error",
        "response tokens",
        "wall s",
        "CPU s",
    ]
    rows = []
    for arm in report.arms:
        if "avg" not in arm:
            failure = arm["failures"][0] if arm["failures"] else {}
            reason = f"failed at {failure.get('stage')}: {failure.get('reason')}"
            rows.append([arm["arm"], _changes(arm["changes"]), reason, "", "", "", "", "", f"{arm['wall_s']:.0f}", ""])
            continue
        rows.append(
            [
                arm["arm"],
                _changes(arm["changes"]),
                _pct(arm["avg"]) + _ci(arm["avg_ci"]),
                _pct(arm["pass"]) + _ci(arm["pass_ci"]),
                _pct(arm["maj"]) + _ci(arm["maj_ci"]),
                f"{arm['tool_calls']:.2f}",
                _pct(arm["calls_without_error"]),
                f"{arm['response_tokens']:.0f}",
                f"{arm['wall_s']:.0f}",
                f"{arm['cpu_s']:.0f}",
            ]
        )
    return ["## Arms", "", *_table(header, rows, text_columns=2), ""]


def comparisons_section(report: Any) -> list[str]:
    if not report.comparisons:
        return ["## Paired comparisons", "", "No two arms finished: nothing to compare.", ""]
    rows = [
        [
            c["model"],
            c["baseline"],
            c["metric"],
            f"{100 * c['difference']:+.1f} pts",
            f"[{100 * c['interval']['low']:.1f}, {100 * c['interval']['high']:.1f}]",
            f"{c['p_value']:.2g}",
            "**effect**" if c["significant"] else "none detectable",
        ]
        for c in report.comparisons
    ]
    sentences = [f"- {c['sentence']}" for c in report.comparisons if c["metric"].startswith("avg@")]
    over_seeds = any(c.get("resampled") == "seeds, problems" for c in report.comparisons)
    resampled = (
        "the paired bootstrap over training seeds, then problems (each arm's repetition r paired with the other's; "
        "a seed's luck counts as noise, not as the arm's effect)"
        if over_seeds
        else "the paired bootstrap over problems"
    )
    return [
        "## Paired comparisons",
        "",
        f"Same held-out problems, same seeds and k; the difference is the first arm minus the second, its interval "
        f"{resampled}, p the paired sign-flip test over problems (McNemar for 0/1 outcomes). An effect is "
        "claimed only where the interval excludes zero.",
        "",
        *_table(["arm", "vs", "metric", "difference", "95% interval", "p", "verdict"], rows, text_columns=3),
        "",
        *sentences,
        "",
    ]


def grpo_section(report: Any) -> list[str]:
    lines = []
    for arm in report.arms:
        pool, series = arm.get("pool"), report.curves.get(arm["arm"])
        if not pool:
            continue
        rates = [rate for rate in pool.get("pass_rates") or [] if rate is not None]
        described = f" (profiled pass rates {min(rates):.2f}-{max(rates):.2f})" if rates else ""
        flat = [value for run in series or [] for _, value in run.get(FLAT_GROUPS, [])]
        flat_text = f"; flat groups {_pct(sum(flat) / len(flat))} of training steps' groups" if flat else ""
        lines.append(f"- **{arm['arm']}**: pool `{pool['kind']}`, {pool['size']} problems{described}{flat_text}")
    if not lines:
        return []
    return ["## GRPO", "", *lines, "", "The curves against steps are in report.png.", "", *flat_groups_table(report)]


def flat_groups_table(report: Any) -> list[str]:
    """Each arm's share of flat groups step by step (the mean over seeds): the band's mechanism, where the
    pool's choice shows before any accuracy does. Long runs are shown in at most MOST_STEP_ROWS ranges."""
    per_arm = {}
    for arm, runs in report.curves.items():
        by_step: dict[int, list[float]] = {}
        for run in runs:
            for step, value in run.get(FLAT_GROUPS, []):
                by_step.setdefault(int(step), []).append(value)
        if by_step:
            per_arm[arm] = {step: sum(values) / len(values) for step, values in by_step.items()}
    if not per_arm:
        return []
    steps = sorted({step for by_step in per_arm.values() for step in by_step})
    size = -(-len(steps) // MOST_STEP_ROWS)  # steps per row, rounded up
    rows = []
    for start in range(0, len(steps), size):
        chunk = steps[start : start + size]
        label = str(chunk[0]) if len(chunk) == 1 else f"{chunk[0]}-{chunk[-1]}"
        cells = []
        for by_step in per_arm.values():
            values = [by_step[step] for step in chunk if step in by_step]
            cells.append(_pct(sum(values) / len(values)) if values else "-")
        rows.append([label, *cells])
    seeds = " (mean over seeds)" if report.totals.get("seeds", 1) > 1 else ""
    return [
        f"Flat groups per step{seeds}: the share of a step's training groups whose rewards were all equal "
        "(no advantage, so no gradient).",
        "",
        *_table(["step", *per_arm], rows),
        "",
    ]


def _mechanism_number(series: str, value: float, signed: bool = False) -> str:
    """A share of groups in percent (points for a difference); a count of samples with two decimals."""
    sign = "+" if signed else ""
    return f"{100 * value:{sign}.1f}" if series.startswith("flat") else f"{value:{sign}.2f}"


def _mechanism_cell(row: dict[str, Any], signed: bool = False) -> str:
    unit = "" if not row["series"].startswith("flat") else " pts" if signed else "%"
    low, high = (_mechanism_number(row["series"], row[end]) for end in ("low", "high"))
    return f"{_mechanism_number(row['series'], row['mean'], signed)}{unit} [{low}, {high}]"


def mechanism_section(report: Any) -> list[str]:
    """The pool's mechanism beside its accuracy (experiment/mechanism.py): flat groups and samples that carry a
    gradient per step, per GRPO arm and arm against arm, with intervals over seeds and steps."""
    found = getattr(report, "mechanism", None) or {}
    if not found.get("arms"):
        return []
    rows = [
        [row["arm"], row["series"], _mechanism_cell(row), f"{row['steps']} x {row['seeds']}"] for row in found["arms"]
    ]
    lines = [
        "## What the pool changes (flat groups, samples with a gradient)",
        "",
        "Per training step: the share of groups whose rollouts all scored the same (no advantage, so no gradient) and "
        "the samples whose advantage is not zero. Mean over steps and seeds, 95% interval from the bootstrap over "
        "seeds, then steps; arms paired by seed and step.",
        "",
        *_table(["arm", "series", "mean [95%]", "steps x seeds"], rows, text_columns=2),
        "",
    ]
    if found.get("differences"):
        rows = [
            [
                f"{row['arm']} − {row['vs']}",
                row["series"],
                _mechanism_cell(row, signed=True),
                ", ".join(_mechanism_number(row["series"], value, signed=True) for value in row["per_seed"]),
                row["verdict"] if row["verdict"].startswith("no") else f"**{row['verdict']}**",
            ]
            for row in found["differences"]
        ]
        lines += [*_table(["arms", "series", "difference [95%]", "per seed", "verdict"], rows, text_columns=2), ""]
    return lines


# How each trend series reads: (scale, unit, decimals) of its change over the run.
TREND_UNITS = {"accuracy": (100, " pts", 1), "tool calls per response": (1, "", 2)}


def trends_section(report: Any) -> list[str]:
    """ZeroTIR's three series against steps, each with its fitted change over the run and a verdict."""
    rows = []
    for row in getattr(report, "trends", []):
        scale, unit, decimals = TREND_UNITS.get(row["series"], (1, " tokens", 1))
        span = row["last_step"] - row["first_step"]
        change, low, high = (scale * span * row[end] for end in ("slope", "low", "high"))
        rows.append(
            [
                row["arm"],
                row["series"],
                row["source"],
                f"{row['points']} (steps {row['first_step']:g}-{row['last_step']:g})",
                f"{change:+.{decimals}f}{unit} [{low:+.{decimals}f}, {high:+.{decimals}f}]",
                row["verdict"] if row["verdict"] == "no trend" else f"**{row['verdict']}**",
            ]
        )
    if not rows:
        return []
    return [
        "## Trends against steps",
        "",
        "ZeroTIR's three series (tool calls per response, response length, accuracy) against GRPO steps: the "
        "change over the run of each one's least-squares line, with the 95% t interval of its slope (points taken "
        "as independent). A series rises or falls only where the interval excludes zero; otherwise: no trend.",
        "",
        *_table(["arm", "series", "from", "points", "fitted change [95%]", "verdict"], rows, text_columns=3),
        "",
    ]


def seeds_section(report: Any) -> list[str]:
    if report.totals.get("seeds", 1) < 2:
        return []
    rows = [
        [arm["arm"], ", ".join(_pct(v) for v in arm["spread"]["avg_per_seed"]), _pct(arm["spread"]["sd"])]
        for arm in report.arms
        if "spread" in arm
    ]
    return [
        "## Spread across seeds",
        "",
        *_table(["arm", f"avg@{report.k} per seed", "sd"], rows),
        "",
        *seed_differences(report),
    ]


def seed_differences(report: Any) -> list[str]:
    """Each avg@k comparison seed by seed, beside its interval over seeds and problems and over problems only."""
    rows = [
        [
            f"{c['model']} − {c['baseline']}",
            ", ".join(f"{100 * value:+.1f}" for value in c["per_seed"]),
            f"{100 * c['difference']:+.1f}{_ci(c['interval'])}",
            _ci(c["problems_only_interval"]).strip(),
        ]
        for c in report.comparisons
        if c["metric"].startswith("avg@") and c.get("per_seed")
    ]
    if not rows:
        return []
    header = ["comparison", "difference per seed (pts)", "pooled [seeds, problems]", "problems only"]
    return [*_table(header, rows), ""]


def work_section(report: Any) -> list[str]:
    rows = [
        [run["stage"], run["key"], ", ".join(run["arms"]), f"{run.get('wall_s', 0):.0f}", f"{run.get('cpu_s', 0):.0f}"]
        for run in report.shared
    ]
    totals = report.totals
    load = (
        f"load average {totals['load_min']:.1f}-{totals['load_max']:.1f} (1 min) while stages ran"
        if totals.get("load_min") is not None
        else "load not recorded"
    )
    return [
        "## Work and time",
        "",
        "Each stage ran once and was reused by every arm listed (an arm's wall time above counts every stage of "
        "its chain, shared ones included).",
        "",
        *_table(["stage", "key", "arms", "wall s", "CPU s"], rows, text_columns=3),
        "",
        f"In all: {totals['wall_s']:.0f} s wall, {totals['cpu_s']:.0f} s CPU (this process and its finished "
        f"children), {load}, {_threads(totals)}{_engines(totals)}. A stage's CPU time well under its wall time "
        "times its threads means the machine was shared; threads that outnumber the free cores also spend CPU time "
        "waiting for each other, so on a busy machine set OMP_NUM_THREADS=1.",
        "",
    ]


def _engines(totals: dict[str, Any]) -> str:
    engines = totals.get("engines")
    return f", models run on {' and '.join(engines)}" if engines else ""


def _threads(totals: dict[str, Any]) -> str:
    threads = totals.get("threads")
    return f"torch threads {', '.join(map(str, threads))}" if threads else "torch threads not recorded"


def report_markdown(report: Any) -> str:
    recipe, totals = report.recipe, report.totals
    k = report.k
    per_arm = totals["held_out_problems"] * (k or 0) * totals.get("seeds", 1)
    lines = [
        f"# Experiment: {recipe['name']}",
        "",
        recipe.get("description") or "",
        "",
        f"Recipe `{recipe['source']}`; {len(report.arms)} arms × {totals.get('seeds', 1)} seed(s); "
        f"{totals['train_problems']} training problems; held out: {totals['held_out_problems']} problems × k = {k}"
        f" = {per_arm} responses per arm.",
        "",
        *arms_section(report),
        *comparisons_section(report),
        *grpo_section(report),
        *mechanism_section(report),
        *trends_section(report),
        *seeds_section(report),
        *work_section(report),
    ]
    return "\n".join(lines).rstrip() + "\n"
