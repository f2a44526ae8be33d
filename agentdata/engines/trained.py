"""What a model agentdata trained was taught: its tool-call protocol and system prompt, beside its weights.

`agentdata train` writes `agentdata.json` into every model dir it saves (`OUT/sft`, `OUT/rl`):

    {"protocol": "hermes", "system_prompt": null, "stage": "sft", "agentdata": "0.1.0"}

`system_prompt` null means the protocol's own (which lists the tools the run gives the model).
A later `eval hf:OUT/rl`, `filter --student hf:OUT/sft` or `train --stage rl --model hf:OUT/sft`
runs the model in that protocol and with that prompt unless told otherwise
(`agent.config.LoopConfig.for_model`): asked to call tools in a syntax it was never taught, a
model fails for a reason nobody sees. Any other model records nothing and gets the defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdata.engines.fingerprint import local_model_dir
from agentdata.errors import UserError

TRAINED_FILE = "agentdata.json"


@dataclass(frozen=True)
class TrainedPrompt:
    protocol: str
    system_prompt: str | None = None  # None: the protocol's own
    stage: str = ""

    def as_dict(self) -> dict[str, Any]:
        from agentdata import __version__

        return {
            "protocol": self.protocol,
            "system_prompt": self.system_prompt,
            "stage": self.stage,
            "agentdata": __version__,
        }


def read_trained_prompt(spec: str | None) -> TrainedPrompt | None:
    """What the model dir behind `spec` records of its training; None for a model agentdata did not train."""
    model_dir = local_model_dir(spec)
    path = model_dir / TRAINED_FILE if model_dir else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        protocol = data["protocol"]
        system_prompt = data.get("system_prompt")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{path}: not a record of a trained model's prompt ({error}); remove it or fix it") from None
    if not isinstance(protocol, str) or not (system_prompt is None or isinstance(system_prompt, str)):
        raise UserError(f"{path}: `protocol` must be text and `system_prompt` text or null")
    return TrainedPrompt(protocol, system_prompt, str(data.get("stage") or ""))


def write_trained_prompt(model_dir: str | Path, prompt: TrainedPrompt) -> Path:
    from agentdata.records import write_json

    return write_json(Path(model_dir) / TRAINED_FILE, prompt.as_dict())
