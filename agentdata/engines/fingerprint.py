"""Which weights an engine spec names: a digest of a local model dir's contents.

A spec string alone does not say which model it is: `hf:runs/train/sft` names whatever the
last SFT run wrote there. Caches of a model's rollouts (filter's profile) key on this digest
as well, so retrained weights are profiled again and unchanged ones (even rewritten, or
copied elsewhere) are not.

The digest covers the files that decide what the model generates (weights, config,
tokenizer, chat template), not the training bookkeeping beside them (metrics, trainer state,
checkpoints). Hashing a large model takes a while, so a memo file (optional) keeps each
dir's digest with the size and modification time of every file it covered: an unchanged dir
is not read again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from agentdata.engines.spec import ModelSpec

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".model", ".tiktoken")
MODEL_FILE_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "chat_template.jinja",
        "chat_template.json",
        "adapter_config.json",
    }
)
# Saved beside a model by trainers; they change with every run and say nothing of what it generates.
TRAINING_FILES = frozenset({"training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt"})
CHUNK = 1 << 20


def local_model_dir(spec: str | ModelSpec | None) -> Path | None:
    """The local model dir a spec names (`ModelSpec.local_dir`); None for no spec, servers, hub ids and the rest."""
    return ModelSpec.parse(spec).local_dir if spec else None


def model_files(directory: Path) -> list[Path]:
    return sorted(
        path
        for path in directory.iterdir()
        if path.is_file()
        and path.name not in TRAINING_FILES
        and (path.name in MODEL_FILE_NAMES or path.suffix in WEIGHT_SUFFIXES or path.name.endswith(".index.json"))
    )


def model_fingerprint(spec: str | ModelSpec, memo: Path | None = None) -> str | None:
    """A digest of the model files of the local dir `spec` names; None when it names no local dir."""
    directory = local_model_dir(spec)
    if directory is None:
        return None
    files = model_files(directory)
    stamp = [[path.name, path.stat().st_size, path.stat().st_mtime_ns] for path in files]
    key = str(directory.resolve())
    memory = _read_memo(memo)
    if memory.get(key, {}).get("files") == stamp:
        return memory[key]["digest"]
    digest = _content_digest(files)
    if memo is not None:
        from agentdata.records import write_json

        memory[key] = {"files": stamp, "digest": digest}
        write_json(memo, memory)
    return digest


def _content_digest(files: list[Path]) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for path in files:
        digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def _read_memo(memo: Path | None) -> dict[str, Any]:
    if memo is None or not memo.is_file():
        return {}
    try:
        data = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a damaged memo only costs a hash
    return data if isinstance(data, dict) else {}
