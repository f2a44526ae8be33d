"""The experiment on one page (PNG): scores per arm, paired differences, and GRPO's curves against steps.

Top left: avg@k, pass@k and maj@k per arm with their 95% intervals. Top right: every paired avg@k
difference with its interval and the zero line (an effect is a bar clear of it). Bottom: for the
GRPO arms, ZeroTIR's scaling view and the band's mechanism against steps: held-out accuracy,
tool calls per response, response length, entropy and the share of flat groups (all rewards equal:
no gradient), one line per arm (held-out values solid, training rollouts dashed); an arm's legend says
its trend over steps (rising, falling, no trend) where the series was tested (report.trends).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402

from agentdata.experiment.series import FLAT_GROUPS, TREND_SERIES  # noqa: E402

# (title, held-out key, training-rollouts key) of each curve panel.
CURVE_PANELS = (
    ("held-out avg@k (95% band)", "eval/avg@k", "accuracy"),
    ("tool calls per response", "eval/tools/call_frequency", "tools/call_frequency"),
    ("failed tool calls (share of calls)", "eval/tools/error_rate", "tools/error_rate"),
    ("response length (model tokens)", "eval/completions/model_tokens", "completions/model_tokens"),
    ("entropy", None, "entropy"),
    ("flat groups (share)", None, FLAT_GROUPS),
)


def _scores_panel(axis: Any, report: Any) -> None:
    arms = [arm for arm in report.arms if "avg" in arm]
    metrics = (("avg", f"avg@{report.k}"), ("pass", f"pass@{report.k}"), ("maj", f"maj@{report.k}"))
    width = 0.8 / max(1, len(arms))
    for index, arm in enumerate(arms):
        positions = [m + (index - (len(arms) - 1) / 2) * width for m in range(len(metrics))]
        values = [arm[name] for name, _ in metrics]
        intervals = [arm[f"{name}_ci"] for name, _ in metrics]
        below = [max(0.0, v - i["low"]) if i else 0.0 for v, i in zip(values, intervals)]
        above = [max(0.0, i["high"] - v) if i else 0.0 for v, i in zip(values, intervals)]
        axis.bar(positions, values, width, yerr=[below, above], capsize=3, label=arm["arm"])
    axis.set_xticks(range(len(metrics)), [label for _, label in metrics])
    axis.set_ylim(0, 1.05)
    axis.set_ylabel("held-out accuracy")
    axis.set_title("scores per arm (95% intervals over problems)")
    if arms:
        axis.legend(fontsize=8)
    failed = [arm["arm"] for arm in report.arms if "avg" not in arm]
    if failed:
        axis.text(0.02, 0.95, f"failed: {', '.join(failed)}", transform=axis.transAxes, color="red", va="top")


def _differences_panel(axis: Any, report: Any) -> None:
    rows = [c for c in report.comparisons if c["metric"].startswith("avg@")]
    for position, comparison in enumerate(rows):
        low, high = (100 * comparison["interval"][end] for end in ("low", "high"))
        colour = "tab:green" if comparison["significant"] else "tab:gray"
        axis.plot([low, high], [position, position], color=colour, linewidth=3)
        axis.plot([100 * comparison["difference"]], [position], "o", color="black")
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(rows)), [f"{c['model']} − {c['baseline']}" for c in rows])
    axis.set_xlabel(f"avg@{report.k} difference (points), 95% interval")
    axis.set_title("paired differences (green: interval excludes 0)")
    if not rows:
        axis.text(0.5, 0.5, "no two arms finished", ha="center", va="center", transform=axis.transAxes)


def _verdicts(report: Any, train_key: str) -> dict[str, str]:
    """Each arm's trend verdict for a panel's series from the training rollouts (report.trends), if tested."""
    names = {train: name for name, train, _ in TREND_SERIES}
    return {
        row["arm"]: row["verdict"]
        for row in getattr(report, "trends", [])
        if row["source"] == "training rollouts" and row["series"] == names.get(train_key)
    }


def _curve_panel(axis: Any, report: Any, title: str, eval_key: str | None, train_key: str) -> None:
    verdicts = _verdicts(report, train_key)
    for index, (arm, runs) in enumerate(report.curves.items()):
        colour = f"C{index}"
        for repetition, series in enumerate(runs):
            label = (f"{arm}: {verdicts[arm]}" if arm in verdicts else arm) if repetition == 0 else None
            for key, style in ((eval_key, "s-"), (train_key, "o--")):
                points = series.get(key) if key else None
                if points:
                    axis.plot(
                        [p[0] for p in points],
                        [p[1] for p in points],
                        style,
                        color=colour,
                        markersize=3,
                        alpha=1.0 if key == eval_key else 0.6,
                        label=label,
                    )
                    label = None
            low, high = (series.get(f"{eval_key}/{end}") if eval_key else None for end in ("low", "high"))
            if low and high and len(low) == len(high):  # held-out accuracy's 95% interval as a band
                steps = [p[0] for p in low]
                axis.fill_between(steps, [p[1] for p in low], [p[1] for p in high], color=colour, alpha=0.15)
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("step", fontsize=8)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.grid(alpha=0.3)
    if axis.lines:
        axis.legend(fontsize=7)
    else:
        axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes, color="gray")


def report_figure(report: Any, path: str | Path) -> Path:
    """Write the one-page PNG of a report (experiment/report.ExperimentReport); returns its path."""
    has_curves = bool(report.curves)
    figure = plt.figure(figsize=(16, 9 if has_curves else 5), dpi=100)
    grid = figure.add_gridspec(2 if has_curves else 1, len(CURVE_PANELS), height_ratios=[1.3, 1] if has_curves else [1])
    _scores_panel(figure.add_subplot(grid[0, :3]), report)
    _differences_panel(figure.add_subplot(grid[0, 3:]), report)
    if has_curves:
        for column, (title, eval_key, train_key) in enumerate(CURVE_PANELS):
            _curve_panel(figure.add_subplot(grid[1, column]), report, title, eval_key, train_key)
    totals = report.totals
    figure.suptitle(
        f"experiment {report.recipe['name']}: {totals['held_out_problems']} held-out problems × k={report.k}, "
        f"{totals.get('seeds', 1)} seed(s)"
    )
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
