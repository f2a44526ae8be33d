"""`collect`, `filter` and `eval --report-to`: a command's summary and a sample of its trajectories in the trackers.

`train --report-to` goes through TRL's own `report_to` (transformers' integrations); the other commands
have no trainer, so this module logs to the same trackers the way those integrations do, to the same run:

- trackio: `trackio.init(project="huggingface", name=RUN_NAME, resume="allow")`, TRL's default project and
  its call, so a `run_name=` given to every command is one trackio run (its local store, `TRACKIO_DIR`);
- wandb: `wandb.init(project=$WANDB_PROJECT or "huggingface", name=RUN_NAME, job_type=COMMAND)`, as
  transformers does (`WANDB_MODE=offline` writes only local files; `WANDB_RUN_ID` joins one run);
- tensorboard: `$TENSORBOARD_LOGGING_DIR` as transformers reads it, else a folder beside the command's
  output (`runs/collect.tensorboard`), so `tensorboard --logdir runs` shows every stage.

What is logged, under the command's name: its summary's numbers (`collect/accuracy`,
`filter/selected`, `eval/<model>/<benchmark>/tools-<n>/avg@4`, ...) and a table of evenly spaced
trajectories from its run dirs, with the columns of GRPO's table of sampled rollouts (question,
conversation, tool calls, verdict) and the model and source of each.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.outputs import companion
from agentdata.records import Trajectory
from agentdata.training.config import TrackingConfig

SAMPLED_TRAJECTORIES = 16  # rows of the table: enough to read, small for a tracker's page
PROJECT = "huggingface"  # TRL's and transformers' default project (TrainingArguments.project, WANDB_PROJECT)
# The package each tracker needs; mlflow has no reader here yet (train reaches it through TRL).
PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}


# train reports through TRL's report_to, which reaches mlflow too (not in the trackers extra: pip install mlflow)
TRAIN_PACKAGES = {**PACKAGES, "mlflow": "mlflow"}


def check_trackers(tracking: TrackingConfig, command: str, flag: str = "--report-to ") -> None:
    """Before any work: every tracker named can be logged to here, else one line saying what to install.
    `flag` is how the command spells the setting (filter's is the key `report_to=`)."""
    for name in tracking.report_to:
        if name not in PACKAGES:
            supported = ", ".join(PACKAGES)
            raise UserError(f"{command} {flag}{name}: {command} logs to {supported}; {name} is train's only")
    check_installed(tracking, command, PACKAGES, flag)


def check_installed(
    tracking: TrackingConfig, command: str, packages: dict[str, str] = TRAIN_PACKAGES, flag: str = "--report-to "
) -> None:
    """Every tracker's package can be imported: else one line before any work (train's would crash inside
    TRL once the model has loaded)."""
    for name in tracking.report_to:
        package = packages.get(name)
        if package is not None and importlib.util.find_spec(package) is None:
            extra = "pip install mlflow" if name == "mlflow" else "pip install 'agentdata[trackers]'"
            raise UserError(f"{command} {flag}{name}: the {package} package is not installed ({extra})")


def report_to_trackers(
    tracking: TrackingConfig, command: str, out: str | Path, summary: dict[str, Any], run_dirs: Iterable[Path]
) -> dict[str, str]:
    """Log `summary`'s numbers and a sample of the trajectories in `run_dirs` to each tracker of `tracking`;
    returns {tracker: where it wrote}. The run name: `run_name=`, else train's rule (`runs/collect` ->
    `collect-collect`)."""
    if not tracking.report_to:
        return {}
    run_name = tracking.trl_arguments(out, command)["run_name"]
    scalars = {f"{command}/{name}": value for name, value in summary_scalars(summary).items()}
    columns = trajectory_columns(sample_trajectories(list(run_dirs), SAMPLED_TRAJECTORIES))
    written = {}
    with contextlib.redirect_stdout(sys.stderr):  # the trackers' own chatter never reaches `--json`'s stdout
        for name in tracking.report_to:
            written[name] = WRITERS[name](run_name, command, Path(out), scalars, columns)
    return written


def summary_scalars(summary: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every finite number of a summary (nested mappings joined with `/`; lists and text left out)."""
    scalars: dict[str, float] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            scalars.update(summary_scalars(value, name + "/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            scalars[name] = value
    return scalars


def sample_trajectories(run_dirs: Sequence[Path], count: int) -> list[Trajectory]:
    """Up to `count` trajectories spread evenly over each run dir's shards (only the shards holding one are
    read), `count` in all, shared between the run dirs."""
    from agentdata.agent.rundir import RunDir

    run_dirs = [path for path in run_dirs if Path(path).is_dir()]
    sampled: list[Trajectory] = []
    for index, path in enumerate(run_dirs):
        share = math.ceil((count - len(sampled)) / (len(run_dirs) - index))
        sampled += _evenly_spaced(RunDir(path).shards(), share)
    return sampled


def _evenly_spaced(shards: list[Path], count: int) -> list[Trajectory]:
    import pyarrow.parquet as pq

    from agentdata.records import from_row

    sizes = [pq.ParquetFile(shard).metadata.num_rows for shard in shards]
    total = sum(sizes)
    if not total or count <= 0:
        return []
    picks = sorted({(total * i) // min(count, total) for i in range(min(count, total))})
    trajectories, start = [], 0
    for shard, size in zip(shards, sizes):
        local = [pick - start for pick in picks if start <= pick < start + size]
        if local:
            rows = pq.read_table(shard).take(local).to_pylist()
            trajectories += [from_row(Trajectory, row) for row in rows]
        start += size
    return trajectories


def rollout_failed(trajectory: Trajectory) -> bool:
    """The rollout ended in an engine or sandbox error: it says nothing about the policy."""
    return trajectory.finish_reason == "error"


def rollout_columns(trajectories: list[Trajectory]) -> dict[str, list[Any]]:
    """The columns of a table of sampled rollouts, one row per trajectory (GRPO's; collect's, filter's and
    eval's `--report-to`): question, conversation and calls as JSON text, verdict."""
    return {
        "question": [t.question for t in trajectories],
        "conversation": [json.dumps(t.messages, ensure_ascii=False) for t in trajectories],
        "tool_calls": [json.dumps(_calls(t), ensure_ascii=False) for t in trajectories],
        "num_tool_calls": [t.num_tool_calls for t in trajectories],
        "verdict": [VERDICTS[t.correct] if not rollout_failed(t) else "failed" for t in trajectories],
    }


VERDICTS = {True: "correct", False: "wrong", None: "ungraded"}


def _calls(trajectory: Trajectory) -> list[dict[str, Any]]:
    """Every tool call of a trajectory as its function (name and arguments)."""
    return [call.get("function") for message in trajectory.messages for call in message.get("tool_calls") or []]


def trajectory_columns(trajectories: list[Trajectory]) -> dict[str, list[Any]]:
    """GRPO's rollout-table columns plus where each came from (model, source)."""
    return {
        **rollout_columns(trajectories),
        "model": [t.teacher for t in trajectories],
        "source": [t.source for t in trajectories],
    }


# ------------------------------------------------------------------ one writer per tracker
def _tensorboard(run_name: str, command: str, out: Path, scalars: dict, columns: dict) -> str:
    from torch.utils.tensorboard import SummaryWriter

    folder = os.environ.get("TENSORBOARD_LOGGING_DIR") or str(companion(out, ".tensorboard"))
    writer = SummaryWriter(log_dir=os.path.expanduser(folder))
    for name, value in scalars.items():
        writer.add_scalar(name, value, 0)
    writer.add_text(f"{command}/run_name", run_name, 0)
    writer.add_text(f"{command}/trajectories", markdown_table(columns), 0)
    writer.close()
    return folder


def _trackio(run_name: str, command: str, out: Path, scalars: dict, columns: dict) -> str:
    import pandas as pd
    import trackio
    from trackio.sqlite_storage import SQLiteStorage

    # trackio 0.43 writes a resumed run's config over the stored one: hand it back, or train's settings go
    kept = SQLiteStorage.get_run_config(PROJECT, run_name) or {}
    trackio.init(project=PROJECT, name=run_name, resume="allow", config=_own(kept))
    trackio.log(scalars)
    trackio.log({f"{command}/trajectories": trackio.Table(dataframe=pd.DataFrame(columns))})
    trackio.finish()
    return f"trackio project {PROJECT}, run {run_name}"


def _own(config: dict[str, Any]) -> dict[str, Any]:
    """A stored trackio config without the keys trackio adds itself (`_Username`, `_Created`, ...)."""
    return {key: value for key, value in config.items() if not key.startswith("_")}


def _wandb(run_name: str, command: str, out: Path, scalars: dict, columns: dict) -> str:
    import wandb

    project = os.environ.get("WANDB_PROJECT", PROJECT)
    run = wandb.init(project=project, name=run_name, job_type=command, config={f"{command}/output": str(out)})
    run.log(scalars)
    run.log({f"{command}/trajectories": wandb.Table(columns=list(columns), data=list(zip(*columns.values())))})
    run.finish()
    return run.dir


WRITERS: dict[str, Callable[..., str]] = {"tensorboard": _tensorboard, "trackio": _trackio, "wandb": _wandb}


def markdown_table(columns: dict[str, list[Any]]) -> str:
    """The table as Markdown, the form TensorBoard's text plugin draws (cells as one escaped line)."""
    names = list(columns)
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in zip(*columns.values()):
        lines.append("| " + " | ".join(_cell(value) for value in row) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n")
