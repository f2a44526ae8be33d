"""docs/settings.md, generated from the settings dataclasses: every setting, its flag, default and range.

    python -m agentdata.cli.settings_docs > docs/settings.md

tests/test_settings.py fails when the file is out of date.
"""

from __future__ import annotations

import dataclasses
import typing

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.curate.config import CurateConfig
from agentdata.evaluation.config import EvalConfig
from agentdata.evaluation.validation import ValidationConfig
from agentdata.filter.config import PoolConfig
from agentdata.rl.config import GRPOStageConfig
from agentdata.sandbox.config import SandboxConfig
from agentdata.settings import default_of, field_types, is_settings
from agentdata.sft.config import SFTStageConfig
from agentdata.steps.config import DedupConfig
from agentdata.synth.config import ProblemsConfig
from agentdata.synth.stitch.build import StitchConfig
from agentdata.train.closed_loop import RLProblemsConfig

# (settings, where they are used) in the order the pipeline runs.
DOCUMENTED: list[tuple[type, str]] = [
    (LoopConfig, "the agent loop: `collect`, `filter` (profiling), `eval`, and GRPO rollouts (`train`, `rl:`)"),
    (CollectConfig, "`agentdata collect`; `filter` profiles the student with it (`--student`, `--k`, default k 4)"),
    (DedupConfig, "`agentdata curate` and `agentdata filter`: near-dedup and decontamination (their `dedup`)"),
    (PoolConfig, "`agentdata filter`: the RL pool"),
    (CurateConfig, "`agentdata curate` (`--tool-calls MIN,MAX` sets both tool-call bounds)"),
    (EvalConfig, "`agentdata eval`"),
    (ProblemsConfig, "`agentdata synth problems`"),
    (StitchConfig, "`agentdata synth stitch`"),
    (SandboxConfig, "`agentdata sandbox serve` (default prefork 4) and `sandbox run` (1 worker, prefork 0)"),
    (SFTStageConfig, "`agentdata train`, the `sft:` section of its --config file"),
    (GRPOStageConfig, "`agentdata train`, the `rl:` section of its --config file"),
    (
        RLProblemsConfig,
        "`agentdata train` between SFT and GRPO (the closed loop: `--rl-problems`, `--band`, "
        "`--profile-k`), also keys of the `rl:` section of its --config file",
    ),
    (
        ValidationConfig,
        "`agentdata train`: validation during training, in both the `sft:` and `rl:` sections "
        "(`--eval-problems`, `--eval-k` set both stages, `--eval-every` GRPO's); docs/train.md",
    ),
]

HEADER = """# Settings

Generated from the settings dataclasses by `python -m agentdata.cli.settings_docs`; do not edit by hand.

Every setting is a command-line flag of the commands that use it and a key of a `--config FILE.yaml`
(or `.json`) file: flags override the file, the file overrides the defaults. Composed settings (`loop`,
`dedup`) stay flat: `--max-turns` on the command line, `max_turns:` in a file (a `loop:` section works too).
`agentdata train` takes a few of its settings as flags (`agentdata train --help`) and the rest from the
`sft:` and `rl:` sections of its --config file. A value outside its range stops the command with one
line naming the flag (exit code 2); NaN and infinity are never accepted. Every run dir, report and output records the
settings it ran with (`manifest.json` "settings", `report.json` "settings", `*.report.json` "config").
"""


def settings_markdown() -> str:
    parts = [HEADER]
    for config_type, used_by in DOCUMENTED:
        parts.append(
            f"\n## {config_type.__name__}\n\nUsed by {used_by}.\n\n"
            "| setting | flag | type | default | range | what it does |\n|---|---|---|---|---|---|\n"
        )
        types = field_types(config_type)
        for item in dataclasses.fields(config_type):
            parts.append(_row(item, types[item.name]))
    return "".join(parts)


def _row(item: dataclasses.Field, annotation: typing.Any) -> str:
    help_text = item.metadata.get("help", "").replace("|", "\\|")
    if is_settings(annotation):
        return f"| `{item.name}` | (its fields) | {annotation.__name__} | | | {help_text} |\n"
    flag = item.metadata.get("flag") or "--" + item.name.replace("_", "-")
    flags = ", ".join(f"`{name}`" for name in (flag, *item.metadata.get("aliases", ())))
    if item.metadata.get("cli") is False:
        flags = "(file only)"
    limits = item.metadata.get("range", "")
    if item.metadata.get("choices"):
        limits = " \\| ".join(map(str, item.metadata["choices"]))
    return (
        f"| `{item.name}` | {flags} | {_type_name(annotation)} | {_default(default_of(item))} | {limits} "
        f"| {help_text} |\n"
    )


def _type_name(annotation: typing.Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return text.replace("typing.", "").replace("|", "or")


def _default(value: typing.Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "—" if value is None else f"`{value!r}`"
    if isinstance(value, (list, tuple)):
        return "`" + ",".join(map(str, value)) + "`"
    return f"`{value}`"


if __name__ == "__main__":
    print(settings_markdown(), end="")
