"""The recipe: a shared base and two or more arms, each changing named settings of one stage.

    name: sft-data
    description: real vs stitched vs no SFT on the same problems
    seeds: 1                      # repetitions of every arm (--seeds N overrides)
    base:
      student: smollm2            # the weights trained (and evaluated as they are where no stage trains)
      problems: {kinds: [compute], n: 48, seed: 0}   # training problems: a generator spec or a problem file
      held_out: {kinds: [compute], n: 100, seed: 1}  # evaluation problems (never overlapping the training ones)
      collect: {model: smollm2-tir, samples: 4}      # the teacher's real trajectories
      sft: {data: none, max_steps: 20}
      rl: {pool: none}
      loop: {max_new_tokens: 192}                    # the student's agent loop: profile, GRPO, evaluation
      eval: {samples: 2}
    arms:
      real: {sft.data: real}
      stitched: {sft: {data: stitched}}
      none: {}

A setting is named `section.field` (nested mappings are the same thing); `keys.py` knows every
name and its section. Everything is checked before any work: an unknown name is refused naming
the closest ones, arms that differ in nothing are refused, and every arm's settings are built into
the stages' own configs (so a bad value is one line naming the arm and the field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.experiment.keys import SECTIONS, check_key, flat_settings

RECIPE_KEYS = ("name", "description", "seeds", "base", "arms")
# A recipe's and an arm's name each name a folder (runs/experiment/NAME, OUT/arms/ARM): one plain component,
# so a name can never be a path (`/tmp/x`, `../x`, `.`) that puts the experiment somewhere else.
NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
NAME_RULE = "use letters, digits, '.', '_' or '-', not starting with '.'"
MAX_SEEDS = 100
BUILTIN_PACKAGE = "agentdata.experiment"
BUILTIN_FOLDER = "recipes"
# What every arm shares by definition: the problems it is trained and measured on, the evaluation itself.
BASE_ONLY = ("problems", "held_out", "eval")


@dataclass
class Recipe:
    name: str
    base: dict[str, Any]  # flat `section.field` -> value
    arms: dict[str, dict[str, Any]]  # arm -> its flat overrides
    description: str = ""
    seeds: int = 1
    source: str = ""  # the file (or built-in name) it was read from
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def arm_settings(self, arm: str) -> dict[str, Any]:
        """The arm's whole settings: the base with its overrides on top."""
        return {**self.base, **self.arms[arm]}

    def changed(self, arm: str) -> dict[str, Any]:
        """What the arm sets differently from the base (its overrides that are not already the base's)."""
        return {key: value for key, value in self.arms[arm].items() if self.base.get(key, _UNSET) != value}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "seeds": self.seeds,
            "source": self.source,
            "base": self.base,
            "arms": self.arms,
        }


_UNSET = object()


def builtin_recipes() -> dict[str, Path]:
    """The built-in recipes by name (`agentdata/experiment/recipes/NAME.yaml`)."""
    folder = resources.files(BUILTIN_PACKAGE) / BUILTIN_FOLDER
    return {Path(str(item)).stem: Path(str(item)) for item in folder.iterdir() if str(item).endswith(".yaml")}


def recipe_path(name_or_path: str | Path) -> Path:
    """A recipe file, or a built-in recipe's file by its name."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json"):
        if not path.exists() and not path.is_symlink():  # a FIFO, a folder, a loop: the reader says what it is
            raise UserError(f"{path}: no such recipe file")
        return path
    builtin = builtin_recipes()
    if str(name_or_path) in builtin:
        return builtin[str(name_or_path)]
    raise UserError(
        f"{name_or_path}: neither a recipe file (.yaml, .json) nor a built-in recipe ({', '.join(sorted(builtin))})"
    )


def load_recipe(name_or_path: str | Path, overrides: dict[str, Any] | None = None, seeds: int | None = None) -> Recipe:
    """Read and check a recipe (file or built-in name); `overrides` change the base (`KEY=VALUE` words)."""
    from agentdata.settings import read_settings_file

    path = recipe_path(name_or_path)
    source = str(name_or_path) if path.parent.name == BUILTIN_FOLDER and not Path(name_or_path).suffix else str(path)
    return parse_recipe(read_settings_file(path), source, overrides, seeds)


def _recipe_name(data: dict[str, Any], source: str) -> str:
    """The recipe's `name:` (else its file's stem): the folder it runs in by default, so never a path."""
    name = str(data.get("name") or Path(source).stem)
    if not NAME.match(name):
        raise UserError(
            f"{source}: name {name[:200]!r}: the name is the folder runs/experiment/NAME, never a path; {NAME_RULE} "
            "(--out chooses another folder)"
        )
    return name


def parse_recipe(
    data: dict[str, Any], source: str, overrides: dict[str, Any] | None = None, seeds: int | None = None
) -> Recipe:
    unknown = sorted(set(data) - set(RECIPE_KEYS))
    if unknown:
        raise UserError(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}; a recipe has {', '.join(RECIPE_KEYS)}"
        )
    base = flat_settings(data.get("base") or {}, f"{source} base")
    for key, value in (overrides or {}).items():
        check_key(key, f"{key}=")
        base[key] = value
    arms_data = data.get("arms")
    if not isinstance(arms_data, dict) or len(arms_data) < 2:
        raise UserError(f"{source}: `arms:` must name at least two arms, each a mapping of the settings it changes")
    arms = {}
    for name, overrides_of_arm in arms_data.items():
        name = str(name)
        if not NAME.match(name):
            raise UserError(f"{source}: arm name {name!r}: {NAME_RULE}")
        settings = flat_settings(overrides_of_arm or {}, f"{source} arm {name}")
        shared = [key for key in settings if key.split(".")[0] in BASE_ONLY or key in BASE_ONLY]
        if shared:
            raise UserError(
                f"{source} arm {name}: {shared[0]} is shared by every arm (problems, held-out set and evaluation "
                "are the same for all, so the comparison is paired): set it in `base:`"
            )
        arms[name] = settings
    recipe = Recipe(
        name=_recipe_name(data, source),
        base=base,
        arms=arms,
        description=str(data.get("description") or "").strip(),
        seeds=_seeds(seeds if seeds is not None else data.get("seeds", 1), source),
        source=source,
        raw=data,
    )
    refuse_identical_arms(recipe)
    return recipe


def _seeds(value: Any, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SEEDS:
        raise UserError(f"{source}: seeds {value!r}: must be a whole number from 1 to {MAX_SEEDS}")
    return value


def refuse_identical_arms(recipe: Recipe) -> None:
    """Two arms with the same settings measure the same thing twice: refused, naming both."""
    names = list(recipe.arms)
    for index, first in enumerate(names):
        for second in names[index + 1 :]:
            if _canonical(recipe.arm_settings(first)) == _canonical(recipe.arm_settings(second)):
                raise UserError(
                    f"{recipe.source}: arms {first} and {second} differ in nothing (the same settings after the "
                    "base): change a setting in one of them, or drop one"
                )


def _canonical(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings compared as values: a tuple is its list; 1 is 1.0 as Python compares them (exactly, never through
    float(), which 10**400 has none of)."""

    def value(item: Any) -> Any:
        if isinstance(item, (list, tuple)):
            return [value(part) for part in item]
        if isinstance(item, dict):
            return {key: value(part) for key, part in sorted(item.items())}
        return item

    return {key: value(item) for key, item in settings.items()}


def section_of(settings: dict[str, Any], section: str) -> dict[str, Any]:
    """The `section.` settings as a plain mapping of field names."""
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section}")
    prefix = f"{section}."
    return {key[len(prefix) :]: value for key, value in settings.items() if key.startswith(prefix)}
