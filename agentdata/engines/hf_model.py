"""Loading a transformers model dir: the one loader for the hf engine and for training.

A dir converted from a GGUF file (the embedded SmolLM2, before the cache's v2) holds plain
float weights but may keep the GGUF `quantization_config`; transformers would then treat
the model as quantized and refuse to fine-tune it, so the stale entry is dropped here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.engines.prompt_template import apply_prompt_template
from agentdata.errors import UserError


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_model_dir(model_dir: str | Path) -> Path:
    path = Path(model_dir).expanduser()
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a transformers model directory (no config.json)")
    return path


def load_tokenizer(model_dir: str | Path, prompt_template: str = "auto") -> Any:
    """The model's tokenizer with the prompt template `prompt_template` asks for (a base model without a
    chat template gets the plain one under `auto`), and a pad token (the end-of-sequence one when it has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    apply_prompt_template(tokenizer, prompt_template, model=str(model_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def torch_dtype(dtype: Any) -> Any:
    """'auto' (the checkpoint's own), a torch dtype, or its name ('bfloat16', 'float32', ...)."""
    import torch

    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype or "auto"
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise UserError(f"dtype={dtype}: not a torch dtype (e.g. float32, bfloat16, float16, auto)")
    return resolved


def load_model(model_dir: str | Path, dtype: Any = "auto") -> Any:
    """The causal LM in `model_dir`, on the CPU, with weights in `dtype`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = check_model_dir(model_dir)
    config = AutoConfig.from_pretrained(path)
    quantization = getattr(config, "quantization_config", None) or {}
    if isinstance(quantization, dict) and quantization.get("quant_method") == "gguf":
        del config.quantization_config
    return AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch_dtype(dtype))


def load_model_and_tokenizer(
    model_dir: str | Path, device: str | None = None, dtype: Any = "auto", prompt_template: str = "auto"
):
    """The model in eval mode on `device` (default: the GPU when there is one) and its tokenizer."""
    path = check_model_dir(model_dir)
    tokenizer = load_tokenizer(path, prompt_template)
    model = load_model(path, dtype)
    model.to(device or default_device())
    model.eval()
    return model, tokenizer


def context_length(model: Any) -> int | None:
    """How many positions (prompt + generated tokens) the model was built for; None when it does not say."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
