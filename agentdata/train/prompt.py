"""One run, one protocol: the stages of one `train` speak to the model the way its SFT taught it.

SFT teaches the protocol of its set's rows (their `format` column) and their system prompt
(`sft/prompt.py`). Unless told otherwise, GRPO then rolls out, and the closed loop profiles, in
that protocol and under that prompt; a GRPO setting that disagrees is named in one line. With no
SFT in the run (`--stage rl`), GRPO's start model defaults them from what its dir records
(`engines/trained.py`, applied by `LoopConfig.for_model`), and a setting that disagrees with the
record is named the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.sft.prompt import SetPrompt


def rollout_prompt(
    taught: SetPrompt | None, sft_data: Path | None, protocol: str | None, system_prompt: str | None, start_model: str
) -> tuple[dict[str, Any], list[str]]:
    """(GRPO's loop defaults, one warning line per disagreement) given what SFT teaches (None: no SFT in the
    run) and the GRPO `protocol` / `system_prompt` the user set (None: unset)."""
    if taught is None:
        return {}, _against_the_start_model(start_model, protocol)
    notes = [f"the SFT set {sft_data}: {line}; GRPO rolls out in the most common" for line in taught.mixed()]
    defaults: dict[str, Any] = {}
    if protocol is None:
        defaults["protocol"] = protocol = taught.protocol
    elif protocol not in taught.protocols:
        notes.append(
            f"GRPO rolls out in {protocol} (its protocol setting) but SFT teaches {taught.protocol} "
            f"(the rows of {sft_data}): the model is asked to call tools in a syntax it was not taught"
        )
    if system_prompt is None and protocol == taught.protocol and taught.system_prompt is not None:
        defaults["system_prompt"] = taught.system_prompt
    elif system_prompt is not None and system_prompt != taught.system_prompt:
        notes.append(f"GRPO's system prompt is not the one the rows of {sft_data} were trained under")
    return defaults, notes


def _against_the_start_model(model: str, protocol: str | None) -> list[str]:
    from agentdata.engines.trained import TRAINED_FILE, read_trained_prompt

    trained = read_trained_prompt(model)
    if trained is None or protocol is None or protocol == trained.protocol:
        return []
    return [
        f"GRPO rolls out in {protocol} but {model} was trained in {trained.protocol} (its {TRAINED_FILE}): "
        "the model is asked to call tools in a syntax it was not taught"
    ]
