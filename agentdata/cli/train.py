"""`agentdata train`: SFT on an SFT set, then GRPO with the sandbox in the loop."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from agentdata.cli.common import console, output_dir
from agentdata.errors import UserError

DEFAULT_SFT_SET = Path("sft.parquet")    # what `agentdata curate` writes by default
DEFAULT_RL_POOL = Path("pool.parquet")   # what `agentdata filter` writes by default
STAGES = ("sft", "rl", "all")
# The no-argument demonstration, sized to finish in about ten minutes on two shared CPU cores
# (timed in bench/RESULTS_train.md): a short SFT that teaches the tool-call format, then a few
# GRPO steps with real tool calls. Flags and --config still override these.
DEMO_SFT_CONVERSATIONS = 32
DEMO_SFT = {"epochs": 1, "batch_size": 8, "max_length": 512, "learning_rate": 1e-4, "warmup_ratio": 0.1,
            "save_steps": 1000}
DEMO_RL = {"max_steps": 2, "num_generations": 4, "prompts_per_step": 1, "max_new_tokens": 192,
           "overlong_buffer": 48, "max_tool_calls": 2, "max_turns": 3, "learning_rate": 1e-5}


def read_config_file(path: Path | None) -> dict[str, dict[str, Any]]:
    """A YAML or JSON file with optional `sft:` and `rl:` sections of stage-config fields."""
    if path is None:
        return {"sft": {}, "rl": {}}
    if not path.is_file():
        raise UserError(f"{path}: no such config file")
    from agentdata.inputs import read_text

    text = read_text(path)  # UTF-8 (a byte-order mark is fine), else one line naming the byte
    try:
        if path.suffix == ".json":
            import json

            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as error:
        raise UserError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} ({error})") from None
    data = data or {}
    if not isinstance(data, dict) or set(data) - {"sft", "rl"}:
        raise UserError(f"{path}: expected top-level sections `sft:` and/or `rl:` only")
    return {"sft": data.get("sft") or {}, "rl": data.get("rl") or {}}


def make_config(config_type: type, values: dict[str, Any], source: str) -> Any:
    names = {field.name for field in dataclasses.fields(config_type)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise UserError(f"{source}: unknown setting(s) {unknown}; see docs/train.md for the fields")
    try:
        return config_type(**values)
    except (ValueError, TypeError) as error:
        raise UserError(f"{source}: {error}") from None


def command(
    stage: Annotated[Optional[str], typer.Option("--stage", help="sft, rl or all (default: all).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Base model: engine spec (smollm2, hf:DIR).")] = None,
    sft_data: Annotated[Optional[Path], typer.Option("--sft-data", help="SFT set (Parquet/JSONL, messages + tools).")] = None,
    rl_pool: Annotated[Optional[Path], typer.Option("--rl-pool", help="RL pool (Parquet/JSONL: prompt + answer, or verl).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output dir (sft/ and rl/ inside for --stage all).")] = Path("runs/train"),
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", help="Optimizer steps per stage.")] = None,
    num_generations: Annotated[Optional[int], typer.Option("--num-generations", help="GRPO group size.")] = None,
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", help="Model tokens per rollout.")] = None,
    overlong_buffer: Annotated[Optional[int], typer.Option("--overlong-buffer", help="Soft overlong penalty over the last N tokens.")] = None,
    protocol: Annotated[Optional[str], typer.Option("--protocol", help="hermes or codeblock.")] = None,
    reward: Annotated[Optional[list[str]], typer.Option("--reward", help="A GRPO reward beside correctness and overlong: a registered name or a plug-in module:function / file.py:function (repeatable; `rl: rewards:` in --config sets the whole list).")] = None,
    tool: Annotated[Optional[list[str]], typer.Option("--tool", help="A rollout tool beside the code interpreter: a typed Python function as module:function or path/to/file.py:function (repeatable).")] = None,
    code_reward: Annotated[Optional[str], typer.Option("--code-reward", help="Code problems: binary (+1 all tests pass / -1) or fraction (-1 + 2 x the passed fraction).")] = None,
    lora: Annotated[bool, typer.Option("--lora", help="Train a LoRA adapter (PEFT), merged on save.")] = False,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Checkpoint dir, or 'last'.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML/JSON with `sft:` and `rl:` sections for every other setting.")] = None,
) -> None:
    """Train: SFT (TRL SFTTrainer, assistant tokens only), then GRPO with real tool calls in the rollouts."""
    stage = stage or "all"
    if stage not in STAGES:
        raise UserError(f"--stage {stage}: expected one of {', '.join(STAGES)}")
    output_dir(out, "--out")
    sections = read_config_file(config)
    demo = stage == "all" and sft_data is None and rl_pool is None and config is None and not DEFAULT_RL_POOL.exists()
    flags = {"model": model, "protocol": protocol, "max_steps": max_steps, "lora": lora or None,
             "resume_from_checkpoint": resume}
    flags = {key: value for key, value in flags.items() if value is not None}
    from agentdata.tools import DEFAULT_TOOLS
    from agentdata.verify.rewards import DEFAULT_REWARDS

    rl_flags = {"num_generations": num_generations, "max_new_tokens": max_new_tokens, "overlong_buffer": overlong_buffer,
                "rewards": _extended(sections["rl"], "rewards", DEFAULT_REWARDS, reward),
                "tools": _extended(sections["rl"], "tools", DEFAULT_TOOLS, tool), "code_reward": code_reward}
    rl_flags = {key: value for key, value in rl_flags.items() if value is not None}
    sft_out, rl_out = (out / "sft", out / "rl") if stage == "all" else (out, out)

    results: list[tuple[str, Any]] = []
    if demo:
        console.print("[bold]demonstration[/]: SFT of SmolLM2 on stitched worked solutions, then GRPO on the "
                      "built-in problems (about ten minutes on two CPU cores; docs/train.md)")
    if stage in ("sft", "all"):
        data = sft_data or (Path(sections["sft"]["sft_data"]) if "sft_data" in sections["sft"] else DEFAULT_SFT_SET)
        sft_values = {**sections["sft"], **flags}
        if demo and not data.exists():
            data = _build_demo_sft_set(out / "demo_sft.parquet")
            sft_values = {**DEMO_SFT, **sft_values}
        if data.exists():
            sft_config = make_config(_sft_type(), {**sft_values, "sft_data": str(data), "out": str(sft_out)},
                                     str(config or "flags"))
            results.append(("sft", _run_sft(sft_config)))
        elif stage == "sft" or sft_data is not None:
            raise UserError(f"{data}: no SFT set; write one with `agentdata curate` or pass --sft-data")
        else:
            console.print(f"[yellow]no SFT set at {data}: skipping SFT[/] (write one with `agentdata curate`)")
    if stage in ("rl", "all"):
        rl_values = {**sections["rl"], **flags, **rl_flags, "out": str(rl_out)}
        if results:  # GRPO starts from the SFT model
            rl_values["model"] = f"hf:{results[-1][1].model_dir}"
        pool = rl_pool or (DEFAULT_RL_POOL if DEFAULT_RL_POOL.exists() else None)
        if pool is not None:
            rl_values["rl_pool"] = str(pool)
        if demo:
            rl_values = {**DEMO_RL, **rl_values}
        results.append(("rl", _run_grpo(make_config(_rl_type(), rl_values, str(config or "flags")))))
    console.print(summary_table(results))


def _extended(section: dict[str, Any], key: str, defaults: tuple[str, ...], extra: list[str] | None) -> list[str] | None:
    """The config file's list (or the defaults) plus the names given by flag; None when no flag was given."""
    if not extra:
        return None
    base = list(section.get(key) or defaults)
    return base + [name for name in extra if name not in base]


def _build_demo_sft_set(path: Path) -> Path:
    from agentdata.sft.demo import build_demo_sft_set

    with console.status(f"stitching {DEMO_SFT_CONVERSATIONS} worked solutions into tool-use conversations"):
        return build_demo_sft_set(path, DEMO_SFT_CONVERSATIONS)


def _sft_type():
    from agentdata.sft.config import SFTStageConfig

    return SFTStageConfig


def _rl_type():
    from agentdata.rl.config import GRPOStageConfig

    return GRPOStageConfig


def _run_sft(config: Any) -> Any:
    from agentdata.sft.trainer import run_sft

    console.print(f"[bold]SFT[/] {config.model} on {config.sft_data} → {config.out}")
    return run_sft(config, console=console)


def _run_grpo(config: Any) -> Any:
    from agentdata.rl.run import run_grpo

    console.print(f"[bold]GRPO[/] {config.model} on {config.rl_pool or 'built-in problems'} → {config.out}")
    return run_grpo(config, console=console)


def summary_table(results: list[tuple[str, Any]]) -> Table:
    table = Table(title="agentdata train")
    for column in ("stage", "steps", "time", "result", "model (use as hf:DIR)"):
        table.add_column(column)
    for stage, result in results:
        last = next((entry for entry in reversed(result.history) if "accuracy" in entry or "loss" in entry), {})
        if stage == "sft":
            detail = f"loss {result.final_loss:.3f}, {result.trained_tokens} trained tokens" if result.final_loss is not None else "-"
        else:
            detail = f"accuracy {last.get('accuracy', 0):.2f}, tool calls {last.get('tools/call_frequency', 0):.2f}"
        table.add_row(stage, str(result.steps), f"{result.seconds:.0f}s", detail, str(result.model_dir))
    return table
