"""`agentdata train`: SFT on an SFT set, then GRPO with the sandbox in the loop (agentdata.train.run does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from agentdata.cli.common import console, output_dir, print_json
from agentdata.cli.options import JSON_HELP, field_option
from agentdata.cli.progress import rendering
from agentdata.rl.config import GRPOStageConfig
from agentdata.sft.config import SFTStageConfig
from agentdata.train.closed_loop import RLProblemsConfig
from agentdata.train.run import TrainRequest, result_summary, train

# The same settings for both stages; the rest are in the --config file's `sft:` and `rl:` sections.
Model = Annotated[str | None, field_option(SFTStageConfig, "model")]
MaxSteps = Annotated[int | None, field_option(GRPOStageConfig, "max_steps")]
Protocol = Annotated[str | None, field_option(GRPOStageConfig, "protocol")]
Lora = Annotated[bool, field_option(SFTStageConfig, "lora")]
Resume = Annotated[str | None, field_option(SFTStageConfig, "resume_from_checkpoint", "--resume")]
# SFT only.
LongRows = Annotated[str | None, field_option(SFTStageConfig, "long_rows")]
# Validation during training (both stages: GRPO evaluates at step 0, every N steps and at the end; SFT at the end).
EvalProblems = Annotated[Path | None, field_option(GRPOStageConfig, "eval_problems")]
EvalEvery = Annotated[
    int | None,
    field_option(GRPOStageConfig, "eval_every", note="This flag sets GRPO's; SFT's is in the file's `sft:` section."),
]
EvalK = Annotated[int | None, field_option(GRPOStageConfig, "eval_k")]
# GRPO only.
NumGenerations = Annotated[int | None, field_option(GRPOStageConfig, "num_generations")]
MaxNewTokens = Annotated[int | None, field_option(GRPOStageConfig, "max_new_tokens")]
OverlongBuffer = Annotated[int | None, field_option(GRPOStageConfig, "overlong_buffer")]
# Repeatable; each adds one beside the file's (or the default) list.
Reward = Annotated[
    list[str] | None, field_option(GRPOStageConfig, "rewards", "--reward", note="--reward adds one beside the others.")
]
Tool = Annotated[list[str] | None, field_option(GRPOStageConfig, "tools", "--tool")]
CodeReward = Annotated[str | None, field_option(GRPOStageConfig, "code_reward")]


def command(
    stage: Annotated[str | None, typer.Option("--stage", help="sft, rl or all (default: all).")] = None,
    model: Model = None,
    sft_data: Annotated[Path | None, field_option(SFTStageConfig, "sft_data")] = None,
    rl_pool: Annotated[Path | None, field_option(GRPOStageConfig, "rl_pool")] = None,
    rl_problems: Annotated[Path | None, field_option(RLProblemsConfig, "rl_problems")] = None,
    band: Annotated[str | None, field_option(RLProblemsConfig, "band")] = None,
    profile_k: Annotated[int | None, field_option(RLProblemsConfig, "profile_k")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output dir (sft/ and rl/ inside for --stage all).")] = Path(
        "runs/train"
    ),
    max_steps: MaxSteps = None,
    num_generations: NumGenerations = None,
    max_new_tokens: MaxNewTokens = None,
    overlong_buffer: OverlongBuffer = None,
    protocol: Protocol = None,
    reward: Reward = None,
    tool: Tool = None,
    code_reward: CodeReward = None,
    long_rows: LongRows = None,
    lora: Lora = False,
    resume: Resume = None,
    eval_problems: EvalProblems = None,
    eval_every: EvalEvery = None,
    eval_k: EvalK = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="YAML/JSON with `sft:` and `rl:` sections for every other setting.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Train: SFT (TRL SFTTrainer, assistant tokens only), then GRPO with real tool calls in the rollouts."""
    flags = {
        "model": model,
        "protocol": protocol,
        "max_steps": max_steps,
        "lora": lora or None,
        "resume_from_checkpoint": resume,
        "eval_problems": str(eval_problems) if eval_problems else None,
        "eval_k": eval_k,
    }
    output_dir(out, "--out")
    rl_flags = {
        "num_generations": num_generations,
        "max_new_tokens": max_new_tokens,
        "overlong_buffer": overlong_buffer,
        "code_reward": code_reward,
        "band": band,
        "profile_k": profile_k,
        "eval_every": eval_every,
    }  # SFT evaluates at its end unless its file section sets eval_every
    request = TrainRequest(
        stage=stage or "all",
        sft_data=sft_data,
        rl_pool=rl_pool,
        out=out,
        config_file=config,
        flags=_given(flags),
        rl_flags=_given(rl_flags),
        sft_flags=_given({"long_rows": long_rows}),
        rl_extra=_given({"rewards": reward or None, "tools": tool or None}),
        rl_problems=rl_problems,
    )
    with rendering(enabled=not as_json):
        results = train(request)
    if as_json:
        print_json([result_summary(name, result) for name, result in results])
        return
    console.print(summary_table(results))


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def summary_table(results: list[tuple[str, Any]]) -> Table:
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
        table.add_row(stage, str(result.steps), f"{result.seconds:.0f}s", detail, str(result.model_dir))
    return table
