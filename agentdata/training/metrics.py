"""Training metrics to a JSONL file, and as progress events (a bar over steps, a line per log) for the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agentdata.events import Event, emit


class MetricsFileCallback(TrainerCallback):
    """Appends every log (with its step) to a JSONL file and emits it as a "log" event of `task`."""

    def __init__(self, path: Path, task: str = "train"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.task = task

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        record = append_record(self.path, {"step": state.global_step, **logs})
        emit(
            Event("log", self.task, completed=state.global_step, total=getattr(state, "max_steps", None), stats=record)
        )


class ProgressCallback(TrainerCallback):
    """Optimizer steps as progress events (transformers' tqdm bar is switched off)."""

    def __init__(self, description: str):
        self.description = description
        self.started = False

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.started = True
            emit(Event("start", self.description, completed=state.global_step, total=state.max_steps))

    def on_step_end(self, args, state, control, **kwargs):
        if self.started:
            emit(Event("advance", self.description, completed=state.global_step, total=state.max_steps))

    def on_train_end(self, args, state, control, **kwargs):
        if self.started:
            emit(Event("end", self.description, completed=state.global_step, total=state.max_steps))
            self.started = False


def append_record(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """One JSON line appended to a metrics file (tensors as numbers, NaN and inf as null); returns it."""
    record = {key: _plain(value) for key, value in record.items()}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    return record


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


def tracker_callbacks(trainer: Any) -> list[Any]:
    """The trainer's experiment-tracker callbacks (transformers' integrations that `report_to` added)."""
    return [
        callback
        for callback in trainer.callback_handler.callbacks
        if type(callback).__module__.startswith("transformers.integrations")
    ]
