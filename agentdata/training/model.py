"""Where the base model comes from and how a trained one is saved.

A model is named by an engine spec (`smollm2`, `hf:DIR`, `vllm:DIR`) or a plain dir;
training needs its weights, so the spec is resolved to a local transformers dir. The
trained model is saved with its tokenizer so `hf:OUT` works as an engine spec afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.engines.hf_model import load_model as load_pretrained
from agentdata.engines.hf_model import load_tokenizer
from agentdata.engines.spec import ModelSpec
from agentdata.errors import UserError

__all__ = [
    "last_checkpoint",
    "load_model",
    "load_tokenizer",
    "lora_config",
    "resolve_model_dir",
    "resume_path",
    "save_trained",
]


def resolve_model_dir(spec: str | ModelSpec, flag: str = "--model") -> Path:
    """A local transformers model dir for an engine spec or a path (`ModelSpec.weights_dir`); a mistake names
    `flag`, the option it came from."""
    model = ModelSpec.parse(spec)
    if model.embedded:  # smollm2-tir is the same weights, shown an example
        from agentdata.engines import smollm2_model_dir

        return smollm2_model_dir()
    return model.weights_dir(flag)


def load_model(model_dir: Path, bf16: bool = False) -> Any:
    """The model to train: float32 weights, or bfloat16 with `bf16` (the hf engine's loader)."""
    return load_pretrained(model_dir, dtype="bfloat16" if bf16 else "float32")


def lora_config(r: int, alpha: int, dropout: float, target_modules: str) -> Any:
    from peft import LoraConfig

    targets: Any = target_modules if target_modules == "all-linear" else [m.strip() for m in target_modules.split(",")]
    return LoraConfig(task_type="CAUSAL_LM", r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets)


def save_trained(model: Any, tokenizer: Any, out_dir: Path) -> Path:
    """Save a plain transformers model + tokenizer in out_dir; a LoRA adapter is also kept, then merged."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):  # a PEFT model: keep the adapter, save merged weights
        model.save_pretrained(out_dir / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def last_checkpoint(checkpoints_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(checkpoints_dir)) if checkpoints_dir.is_dir() else None


def resume_path(resume: str | None, checkpoints_dir: Path) -> str | None:
    """'last' -> the newest checkpoint (None when there is none yet); a path must exist."""
    if resume is None:
        return None
    if resume == "last":
        return last_checkpoint(checkpoints_dir)
    if not Path(resume).is_dir():
        raise UserError(f"--resume {resume}: no such checkpoint dir")
    return resume
