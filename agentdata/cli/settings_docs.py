"""docs/settings.md, generated from the settings dataclasses: every setting, its flag, default and range.

    python -m agentdata.cli.settings_docs > docs/settings.md

tests/test_settings.py fails when the file is out of date.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from agentdata.agent.config import CollectConfig, LoopConfig, ShardingConfig
from agentdata.cli.filter import FILTER_OVERRIDES
from agentdata.curate.config import CurateConfig
from agentdata.evaluation.config import EvalConfig
from agentdata.evaluation.validation import ValidationConfig
from agentdata.filter.config import PoolConfig
from agentdata.formats.health import HealthLimits
from agentdata.judge.config import ScoringConfig
from agentdata.publish.config import PublishConfig
from agentdata.regrade.config import RegradeConfig
from agentdata.rl.config import GRPOStageConfig
from agentdata.sandbox.config import SandboxConfig
from agentdata.settings import default_of, field_types, is_settings
from agentdata.sft.config import SFTStageConfig
from agentdata.steps.config import DedupConfig
from agentdata.synth.config import ProblemsConfig
from agentdata.synth.stitch.build import StitchConfig
from agentdata.traces.config import ImportConfig
from agentdata.train.closed_loop import ClosedLoopConfig
from agentdata.train.settings import TRAIN_OVERRIDES
from agentdata.training.config import OptimiserConfig, TrackingConfig
from agentdata.validate.config import ValidateConfig
from agentdata.view.config import ViewConfig

# The commands that take a setting other commands list as a flag only as a key and an override.
COMMAND_OVERRIDES = {"filter": FILTER_OVERRIDES, "train": TRAIN_OVERRIDES}

# (settings, where they are used) in the order the pipeline runs.
DOCUMENTED: list[tuple[type, str]] = [
    (LoopConfig, "the agent loop: `collect`, `filter` (profiling), `eval`, and GRPO rollouts (`train`, `rl:`)"),
    (
        CollectConfig,
        "`agentdata collect`; `filter` profiles the student with it (its `profile` section: `--student`, `--k`, "
        "default k 4)",
    ),
    (
        ShardingConfig,
        "`agentdata collect`, `filter` (the student's profile) and `eval`: one shard of a run (their `sharding` "
        "section; docs/scale.md)",
    ),
    (DedupConfig, "`agentdata curate` and `agentdata filter`: near-dedup and decontamination (their `dedup`)"),
    (PublishConfig, "`agentdata curate` and `agentdata filter`: what the dataset card says (their `publish`)"),
    (PoolConfig, "`agentdata filter`: the RL pool (its `pool` section)"),
    (HealthLimits, "`agentdata curate`: the rollout health checks (its `rollout_health`; docs/curate.md)"),
    (ScoringConfig, "`agentdata curate`: a process reward model and an LLM judge (its `scoring`; docs/curate.md)"),
    (CurateConfig, "`agentdata curate` (0.4's `--min-tool-calls` / `--max-tool-calls` are now `--tool-calls MIN,MAX`)"),
    (EvalConfig, "`agentdata eval`"),
    (
        TrackingConfig,
        "`agentdata train` (each stage's `tracking`), `collect`, `filter` (its `pool` section) and `eval`: the "
        "experiment trackers (docs/train.md, docs/provenance.md)",
    ),
    (RegradeConfig, "`agentdata regrade` (docs/regrade.md)"),
    (ImportConfig, "`agentdata import atif`, `import inspect` and `import sts` (docs/harnesses.md)"),
    (ValidateConfig, "`agentdata validate`, with the near-dedup and decontamination settings above (docs/validate.md)"),
    (ProblemsConfig, "`agentdata synth problems`"),
    (StitchConfig, "`agentdata synth stitch`"),
    (SandboxConfig, "`agentdata sandbox serve` (default prefork 4) and `sandbox run` (1 worker, prefork 0)"),
    (ViewConfig, "`agentdata view` (docs/view.md)"),
    (SFTStageConfig, "`agentdata train`, its `sft:` section (overrides `sft.NAME=VALUE`; `--NAME` sets both stages)"),
    (GRPOStageConfig, "`agentdata train`, its `rl:` section (overrides `rl.NAME=VALUE`; `--NAME` sets both stages)"),
    (
        ClosedLoopConfig,
        "`agentdata train` between SFT and GRPO (the closed loop: `--rl-problems`, `--band`, "
        "`profile_k=`), keys of its `rl:` section beside GRPO's",
    ),
    (
        OptimiserConfig,
        "`agentdata train`: the learning rate and LoRA, one block in both the `sft:` and `rl:` sections "
        "(`--learning-rate`, `--lora`, ... set both stages; `sft.lora=true`, `rl.learning_rate=1e-6`, ... one)",
    ),
    (
        ValidationConfig,
        "`agentdata train`: validation during training, in both the `sft:` and `rl:` sections "
        "(`--eval-problems`, `eval_k=` set both stages; `sft.eval_every=N`, `rl.eval_every=N` one, "
        "`eval_every=N` both); docs/train.md",
    ),
]

HEADER = """# Settings

Generated from the settings dataclasses by `python -m agentdata.cli.settings_docs`; do not edit by hand.

Every setting is a key of a `--config FILE.yaml` (or `.json`) file and a `KEY=VALUE` override (below);
the everyday ones are also flags (each command's `--help` lists at most 25; the flag column says which,
and "override" marks a setting no command lists). Flags override the file, the file overrides the
defaults. Composed settings (`loop`, `dedup`, `validation`) stay flat: `--max-tool-calls` on the command
line, `max_tool_calls:` in a file (a `loop:` section works too). A key nobody knows stops the command
with one line naming it and the closest keys.

**Sections.** A command's settings are sections of these dataclasses. `agentdata train` has two: `sft:`
(SFTStageConfig) and `rl:` (GRPOStageConfig with ClosedLoopConfig beside it), each also taking any field
of TRL's SFTConfig / GRPOConfig. A name only one stage has is one flag (`--num-generations`); a name both
have is one flag that sets both (`--max-steps`); one stage's is an override (`sft.max_steps=2`, `rl.max_steps=20`).
In a file the same goes: `max_steps:` at the top sets both, under `rl:` only GRPO's (a dotted key
`rl.max_steps:` too). `filter`'s sections are `profile` (ProfileConfig: CollectConfig at k=4 in GRPO's
rollout loop, temperature 1.0, from Python as from the command) and `pool` (PoolConfig): `--seed` sets both
seeds, `profile.seed=N` / `pool.seed=N` one.

**Overrides.** Any key of the file is also a `KEY=VALUE` argument of the command, as verl's and
torchtune's Hydra-style overrides are typed: `agentdata train rl.max_steps=3 sft.learning_rate=2e-5`
(a dotted key sets one section, a bare name every section having it, and in one source the section's own key wins
whichever comes first; VALUE is JSON or text). Values
come from: the defaults < the file < overrides < flags. `--print-config` prints the resolved settings,
each with where it came from, and runs nothing. A key nobody knows is one line naming the closest keys,
also where a command's paths go (`curate RUN... keep_incorect=true` names the key, it is no input file);
a key given twice, in a file's mapping or on the command line (a flag too), is one line naming it:

```yaml
# train.yaml
rl:
  max_steps: 200
  num_generations: 8
```

```
$ agentdata train --config train.yaml rl.max_steps=3 sft.learning_rate=2e-5 --print-config
sft:
  learning_rate: 2e-05  # override sft.learning_rate
  max_steps: null  # default
  ...
rl:
  max_steps: 3  # override rl.max_steps
  num_generations: 8  # file train.yaml rl
  ...
$ agentdata train rl.max_stepz=3
error: rl.max_stepz=3: unknown setting 'rl.max_stepz'; did you mean rl.max_steps=...?
```

**Off.** A setting that can be off (or unset, following another) is `None`: `null` in a file, `none` on
the command line; its help says what off means. Older spellings keep working: `0` for
`near_dup_threshold` and `max_per_problem`, `-1` for SFT's `max_steps`, an empty `online_band`.

**Bands.** A band is `LO,HI` on the command line and in a file (a two-item list works too): a pass-rate
band has both ends exclusive (`LO < rate < HI`), a count band (curate's `tool_calls`) both inclusive.

A value outside its range stops the command with one line naming the flag (exit code 2); NaN and
infinity are never accepted, and a whole number is checked as the whole number it is, never made a
float (a 400-digit `max_steps=` is one line: at most 2**63 - 1, what Arrow and torch hold). Every run
dir, report and output records the settings it ran with (`manifest.json` "settings", `report.json`
"settings", `*.report.json` "config").
"""


KEY_SPACE = """
## One key space

A setting has one key, the same in a `--config` file, a `KEY=VALUE` override and an experiment recipe
(`agentdata experiment RECIPE KEY=VALUE` changes the recipe's base; docs/experiments.md). A recipe
names each stage's settings under the stage's section, with the keys the stage's own command takes:

| recipe key | the same setting on the command line |
|---|---|
| `collect.NAME` | `agentdata collect NAME=...` (the teacher's run) |
| `curate.NAME` | `agentdata curate NAME=...` |
| `stitch.NAME` | `agentdata synth stitch NAME=...` |
| `sft.NAME` | `agentdata train sft.NAME=...` (and any TRL `SFTConfig` field) |
| `rl.NAME` | `agentdata train rl.NAME=...` (and any TRL `GRPOConfig` field); `rl.temperature` is GRPO's rollouts' |
| `loop.NAME` | the student's agent loop wherever the experiment runs it: profile, GRPO, evaluation |
| `eval.NAME` | `agentdata eval NAME=...`: `eval.samples`, `eval.seed`, `eval.concurrency`, the loop fields |

Each command's sections, the dotted prefixes its overrides and its file's sections take (a bare name
sets every section having it):

| command | sections: keys |
|---|---|
"""


def key_space_markdown() -> str:
    """The command table of the key space, from every settings command's own sections."""
    from agentdata.cli.app import app

    rows = []
    for path, callback in settings_commands(app):
        sections = callback.sections
        cells = []
        for section in sections.sections.values():
            types = ", ".join(config.__name__ for config in section.configs.values())
            extra = section.fields[section.extra()[0]][0].metadata["extra"] if section.extra() else ""
            types += f", any {extra.rpartition(':')[2]} field" if extra else ""  # TRL's, in the stage's `trl`
            cells.append(f"`NAME` ({types})" if sections.single else f"`{section.name}.NAME` ({types})")
        rows.append(f"| `agentdata {' '.join(path)}` | {'; '.join(cells) or '(none)'} |\n")
    rows.append("| `agentdata experiment` | the recipe keys above (`KEY=VALUE` changes the recipe's `base:`) |\n")
    return KEY_SPACE + "".join(rows)


def settings_commands(typer_app: typing.Any, prefix: tuple[str, ...] = ()) -> typing.Iterator[tuple[tuple, typing.Any]]:
    """(command path, the function behind it) of every command with generated settings options."""
    for info in typer_app.registered_commands:
        if hasattr(info.callback, "sections"):
            yield (*prefix, info.name), info.callback
    for group in typer_app.registered_groups:
        yield from settings_commands(group.typer_instance, (*prefix, group.name))


def settings_markdown() -> str:
    parts = [HEADER, key_space_markdown()]
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
    if item.metadata.get("was"):  # an older release's key, now one line naming this one
        help_text += " Was " + ", ".join(f"`{old}`" for old in item.metadata["was"]) + " before 0.5."
    if is_settings(annotation):
        return f"| `{item.name}` | (its fields) | {annotation.__name__} | | | {help_text} |\n"
    flag = item.metadata.get("flag") or "--" + item.name.replace("_", "-")
    flags = ", ".join(f"`{name}`" for name in (flag, *item.metadata.get("aliases", ())))
    if item.metadata.get("cli") is False:
        flags = "(file only)"
    elif item.metadata.get("override_only"):
        flags = f"`{item.name}=` (override)"
    else:
        flags += "".join(
            f" (`{command}`: `{item.name}=`)" for command, names in COMMAND_OVERRIDES.items() if item.name in names
        )
    flags += "".join(f", `--{key.replace('_', '-')}` (its `{key}`)" for key in item.metadata.get("key_flags", {}))
    limits = item.metadata.get("range", "")
    if item.metadata.get("choices"):
        limits = " \\| ".join(map(str, item.metadata["choices"]))
    return (
        f"| `{item.name}` | {flags} | {_type_name(annotation)} | {_default(default_of(item))} | {limits} "
        f"| {help_text} |\n"
    )


def _type_name(annotation: typing.Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", text).replace("|", "or")  # agentdata.agent.shards.Shard: Shard


def _default(value: typing.Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "—" if value is None else f"`{value!r}`"
    if isinstance(value, (list, tuple)):
        return "`" + ",".join(map(str, value)) + "`"
    return f"`{value}`"


if __name__ == "__main__":
    print(settings_markdown(), end="")
