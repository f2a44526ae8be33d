"""The SFT stage on TRL's SFTTrainer: pre-tokenized conversations with assistant masks.

TRL builds labels from the `assistant_masks` column of a pre-tokenized dataset, so the
masking works for any chat template (no `{% generation %}` markers needed) and both
protocols; the trainer itself is used as is.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PrinterCallback

from agentdata.engines.trained import TrainedPrompt, write_trained_prompt
from agentdata.events import note
from agentdata.sft.config import SFTStageConfig
from agentdata.sft.data import MAX_LENGTH_CAP, fitting_max_length, handle_long_rows, tokenized_rows
from agentdata.sft.prompt import prompt_of
from agentdata.sft.sft_set import SFTSet, read_sft_set
from agentdata.sft.validation import validation_callback
from agentdata.training.metrics import MetricsFileCallback, ProgressCallback, read_metrics
from agentdata.training.model import load_model, load_tokenizer, resolve_model_dir, resume_path, save_trained
from agentdata.training.trl_settings import trl_arguments, write_trl_settings


@dataclass
class SFTResult:
    model_dir: Path
    steps: int
    conversations: int
    trained_tokens: int
    final_loss: float | None
    seconds: float
    metrics_file: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    long_rows_dropped: int = 0  # conversations longer than max_length, left out rather than cut
    long_rows_truncated: int = 0  # conversations longer than max_length, cut at the end (long_rows truncate)
    max_length: int = 0  # the max_length trained with (the set's longest row, capped, when unset)


@dataclass
class PreparedSFT:
    """TRL's trainer, ready to train, and what preparing its rows found (kept here, not on TRL's object)."""

    trainer: Any  # trl.SFTTrainer
    taught: Any  # sft.prompt.SetPrompt: the protocol and system prompt the set teaches
    long_rows_dropped: int = 0
    long_rows_truncated: int = 0


def trl_sft_config(config: SFTStageConfig, out_dir: Path) -> Any:
    """TRL's SFTConfig: what the stage's settings give, with the `trl` fields the user set on top."""
    from trl import SFTConfig

    return trl_arguments(SFTConfig, sft_arguments(config, out_dir), config.trl)


def sft_arguments(config: SFTStageConfig, out_dir: Path) -> dict[str, Any]:
    return dict(
        output_dir=str(out_dir / "checkpoints"),
        max_steps=-1 if config.max_steps is None else config.max_steps,  # TRL's -1: run num_train_epochs
        num_train_epochs=config.epochs,
        learning_rate=config.optimiser.learning_rate,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        warmup_steps=config.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        max_length=config.max_length,
        truncation_mode="keep_start",
        packing=config.packing,
        packing_strategy=config.packing_strategy,
        logging_steps=config.logging_steps,
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        activation_checkpointing=config.gradient_checkpointing,  # transformers' new name (v5)
        bf16=config.bf16,
        seed=config.seed,
        **config.tracking.trl_arguments(out_dir, "sft"),
        disable_tqdm=True,
        dataset_num_proc=None,
    )


def build_sft_trainer(config: SFTStageConfig, sft_set: SFTSet | None = None) -> PreparedSFT:
    """An SFTTrainer ready to train: model, masked data, LoRA when asked, metrics callbacks. `sft_set`: the
    set as `train` read it while planning (read with the config's protocol and limit), else read here, once."""
    import datasets
    from trl import SFTTrainer

    out_dir = Path(config.out)
    model_dir = resolve_model_dir(config.model)
    tokenizer = load_tokenizer(model_dir, config.prompt_template)
    sft_set = sft_set or read_sft_set(config.sft_data, config.protocol, config.limit)
    rows = tokenized_rows(sft_set.rows, tokenizer, sft_set.path)
    config, rows, long_rows = fit_rows(config, rows)
    trainer = SFTTrainer(
        model=load_model(model_dir, bf16=config.bf16),
        args=trl_sft_config(config, out_dir),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=config.optimiser.peft_config(),
        callbacks=[MetricsFileCallback(out_dir / "metrics.jsonl", "SFT"), ProgressCallback("SFT")],
    )
    trainer.remove_callback(PrinterCallback)  # our callback prints one line per step instead
    prepared = PreparedSFT(
        trainer,
        taught=prompt_of(sft_set.rows),
        long_rows_dropped=long_rows if config.long_rows == "drop" else 0,
        long_rows_truncated=long_rows if config.long_rows == "truncate" else 0,
    )
    validation = validation_callback(config, trainer, prepared.taught)
    if validation is not None:  # after the last step (and every eval_every steps); saves a checkpoint each time
        trainer.add_callback(validation)
    return prepared


def fit_rows(config: SFTStageConfig, rows: list[dict[str, Any]]) -> tuple[SFTStageConfig, list[dict[str, Any]], int]:
    """(config with max_length resolved, rows to train on, how many were longer than max_length).

    An unset max_length covers the longest conversation up to MAX_LENGTH_CAP; longer ones are
    dropped, cut or refused as `long_rows` says. Both are reported at start.
    """
    if config.max_length is None:
        length, longest = fitting_max_length(rows)
        config = dataclasses.replace(config, max_length=length)
        over = (
            f" is {longest}, over the cap of {MAX_LENGTH_CAP}: set max_length to go higher" if longest > length else ""
        )
        note("SFT", f"SFT: max_length {length} tokens (unset: the longest of {len(rows)} conversations{over})")
    total = len(rows)
    rows, long_rows = handle_long_rows(rows, config.max_length, config.long_rows, config.sft_data)
    if long_rows and config.long_rows == "drop":
        note(
            "SFT",
            f"SFT: {long_rows} of {total} conversations are longer than max_length {config.max_length} tokens and "
            "were left out (cutting them would cut their answers; long_rows truncate cuts them instead)",
        )
    elif long_rows:
        note(
            "SFT",
            f"SFT: warning: {long_rows} of {total} conversations are longer than max_length {config.max_length} "
            "tokens and are cut at the end (long_rows truncate): their final answers are not trained",
        )
    return config, rows, long_rows


def run_sft(config: SFTStageConfig, sft_set: SFTSet | None = None) -> SFTResult:
    """Train, save the model + tokenizer in config.out, and report (progress as `agentdata.events`);
    `sft_set` as build_sft_trainer takes it."""
    out_dir = Path(config.out)
    started = time.perf_counter()
    prepared = build_sft_trainer(config, sft_set)
    trainer = prepared.trainer
    write_trl_settings(trainer.args, out_dir)  # what TRL actually ran with, after its own defaults
    resume = resume_path(config.resume_from_checkpoint, out_dir / "checkpoints")
    trainer.train(resume_from_checkpoint=resume)
    save_trained(trainer.model, trainer.processing_class, out_dir)
    taught = prepared.taught  # what later runs of the model default to (engines/trained.py)
    write_trained_prompt(out_dir, TrainedPrompt(taught.protocol, taught.system_prompt, "sft"))
    history = read_metrics(out_dir / "metrics.jsonl")
    losses = [entry["loss"] for entry in history if isinstance(entry.get("loss"), float)]
    trained = sum(sum(1 for label in labels if label != -100) for labels in trainer.train_dataset["labels"])
    return SFTResult(
        model_dir=out_dir,
        steps=trainer.state.global_step,
        conversations=len(trainer.train_dataset),
        trained_tokens=trained,
        final_loss=losses[-1] if losses else None,
        seconds=time.perf_counter() - started,
        metrics_file=out_dir / "metrics.jsonl",
        history=history,
        long_rows_dropped=prepared.long_rows_dropped,
        long_rows_truncated=prepared.long_rows_truncated,
        max_length=trainer.args.max_length,
    )
