"""`agentdata train`: SFT on an SFT set, then GRPO with the sandbox in the loop (agentdata.train.run does the work).

Its options are generated from the stages' settings like every other command's (train/settings.py):
a name one stage has is one flag (`--num-generations`, `--rl-pool`), a name both have sets both
(`--max-steps`); one stage's own is an override (`sft.max_steps=2`, `rl.max_steps=20`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from agentdata.cli.common import output_dir
from agentdata.cli.options import GivenSettings, settings_command
from agentdata.cli.render import show
from agentdata.train.run import TrainRequest, result_summary, train
from agentdata.train.settings import REMOVED_FLAGS, TRAIN_OVERRIDES, TRAIN_SETTINGS


@settings_command(sections=TRAIN_SETTINGS, exclude=("out",), removed=REMOVED_FLAGS, overrides=TRAIN_OVERRIDES)
def command(
    stage: Annotated[str, typer.Option("--stage", help="sft, rl or all.")] = "all",
    out: Annotated[Path, typer.Option("--out", "-o", help="Output dir (sft/ and rl/ inside for --stage all).")] = Path(
        "runs/train"
    ),
    *,
    settings: GivenSettings,
    as_json: bool = False,
) -> None:
    """Train: SFT (TRL SFTTrainer, assistant tokens only), then GRPO with real tool calls in the rollouts.

    Every setting of both stages is a key of the --config file's `sft:` and `rl:` sections, which also take
    any field of TRL's SFTConfig / GRPOConfig, and an override: rl.max_steps=3 sft.learning_rate=2e-5
    (docs/train.md). --print-config shows them all and where each came from.
    """
    output_dir(out, "--out")
    request = TrainRequest(stage=stage, out=out, config_file=settings.config_file, settings=settings.values)
    show(train(request), as_json, lambda results: [summary_table(results)])


def summary_table(results: Iterable[tuple[str, Any]]) -> Table:
    table = Table(title="agentdata train")
    for column in ("stage", "steps", "time", "result", "model (use as hf:DIR)"):
        table.add_column(column)
    for stage, result in results:
        row = result_summary(stage, result)
        if stage == "sft":
            detail = (
                f"loss {row['final_loss']:.3f}, {row['trained_tokens']} trained tokens"
                if row["final_loss"] is not None
                else "-"
            )
        else:
            detail = f"accuracy {row['accuracy']:.2f}, tool calls {row['tool_call_frequency']:.2f}"
            if row["rollouts"] == "file-push":
                detail += f", rollouts by vLLM ({row['weight_pushes']} weight pushes)"
        table.add_row(stage, str(result.steps), f"{result.seconds:.0f}s", detail, str(result.model_dir))
    return table
