"""Training metrics to the console (one line per log) and to a JSONL file, with a progress bar."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import TrainerCallback

CONSOLE_KEYS = ("loss", "reward", "accuracy", "tools/call_frequency", "tools/error_rate",
                "completions/mean_length", "entropy", "mean_token_accuracy", "learning_rate")


class MetricsFileCallback(TrainerCallback):
    """Appends every log (with its step) to a JSONL file and prints the main numbers."""

    def __init__(self, path: Path, console: Console | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, **{k: _plain(v) for k, v in logs.items()}}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        shown = [f"{key}={record[key]:.4g}" for key in CONSOLE_KEYS if isinstance(record.get(key), float)]
        if self.console is not None and shown:  # the closing summary log (runtime, samples/s) has none of them
            self.console.print(f"step {state.global_step}: " + "  ".join(shown), highlight=False)


class ProgressCallback(TrainerCallback):
    """A rich progress bar over optimizer steps (transformers' tqdm bar is switched off)."""

    def __init__(self, description: str, console: Console | None = None):
        self.description = description
        self.console = console
        self.progress: Progress | None = None
        self.task = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task(self.description, total=state.max_steps, completed=state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not Path(path).is_file():
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
