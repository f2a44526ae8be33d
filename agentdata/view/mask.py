"""The exact text SFT trains on: the conversation rendered by the chat template, token by token,
with the trained tokens marked, computed by `train`'s own code (`agentdata.sft.data.tokenize_row`:
the protocol's plain messages, `agentdata.training.masking`'s spans and offsets)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

DEFAULT_TOKENIZER = "smollm2"


class Tokenizers:
    """The tokenizer of the model named by `spec` (an engine spec or a model dir), loaded on first use."""

    def __init__(self, spec: str = DEFAULT_TOKENIZER, tokenizer: Any = None):
        self.spec = spec
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                from agentdata.training.model import load_tokenizer, resolve_model_dir

                self._tokenizer = load_tokenizer(resolve_model_dir(self.spec, flag="--tokenizer"))
            return self._tokenizer


def masked_tokens(tokenizer: Any, row: dict[str, Any], path: Path, number: int) -> dict[str, Any]:
    """[text, trained] for each token of the rendered conversation, plus the counts.

    `row` holds `messages` (canonical), `tools` and `format`, as an SFT set's row or a trajectory does.
    """
    from agentdata.sft.data import tokenize_row

    conversation = tokenize_row(row, tokenizer, row.get("format") or "hermes", path, number)
    tokens = [
        [conversation.text[start:end], bool(mask)]
        for (start, end), mask in zip(conversation.offsets, conversation.assistant_masks)
    ]
    trained = sum(conversation.assistant_masks)
    return {
        "tokens": tokens,
        "trained": trained,
        "total": len(tokens),
        "tokenizer": getattr(tokenizer, "name_or_path", "") or "",
    }
