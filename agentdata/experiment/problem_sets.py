"""The experiment's training and held-out problems: written once, and never overlapping.

`problems:` and `held_out:` are each a problem file (any layout `load_problems` reads) or a
generator spec, `{kinds: [compute], n: 100, seed: 1, levels: [1, 2]}` (`agentdata synth problems`).
Both are written as agentdata JSONL under `OUT/problems/`, so every stage reads the same problems.
A training question that is also held out stops the experiment before any work (measured on what
it was trained on, a difference means nothing). The check is curate's and filter's decontamination
step (`steps.decontam`, 13-grams), counting a training question as held out when at least half of
its 13-grams are held-out ones: a copy has all of them, while generated problems share a few with
every sibling of their template. The built-in ladder's seeds are split for this (synth.builtin:
seed 0 trains, seed 1 is held out, seed 7 is where things were tried), yet even they share a few
problems (`power` has 136 of them): seed 0's first 48 and seed 1's first 70 share none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.experiment.choices import arm_choices
from agentdata.experiment.plan import ProblemFiles
from agentdata.experiment.recipe import Recipe
from agentdata.records import Problem
from agentdata.synth.builtin import DEFAULT_SEED, HELD_OUT_SEED

GENERATOR_KEYS = ("kinds", "n", "seed", "levels")
DEFAULT_PROBLEMS = {"kinds": ["compute"], "n": 32, "seed": DEFAULT_SEED}
DEFAULT_HELD_OUT = {"kinds": ["compute"], "n": 100, "seed": HELD_OUT_SEED}
OVERLAP_SHARE = 0.5  # of a training question's 13-grams found in held-out questions: it is held out too


def problems_from(value: Any, key: str, where: str) -> list[Problem]:
    """A problem file's problems, or a generator spec's, each problem once."""
    from agentdata.agent.resume import unique_problems
    from agentdata.problems import load_problems

    if isinstance(value, dict):
        unknown = sorted(set(value) - set(GENERATOR_KEYS))
        if unknown or "n" not in value:
            raise UserError(
                f"{where}: {key}: a generator spec has n and optionally kinds, seed, levels "
                f"(e.g. {{kinds: [compute], n: 100, seed: 1}}){'; unknown ' + ', '.join(unknown) if unknown else ''}"
            )
        from agentdata.experiment.choices import ProblemGenerator
        from agentdata.settings import build
        from agentdata.synth.generators import generate_problems

        spec = build(ProblemGenerator, value, source=f"{where}: {key}")
        return generate_problems(spec.n, seed=spec.seed, kinds=spec.kinds, levels=spec.levels)
    if isinstance(value, str):
        path = Path(value)
        if not path.exists():
            raise UserError(f"{where}: {key}: no such problem file {value}")
        return unique_problems(load_problems(path), path)
    raise UserError(f"{where}: {key}: a problem file or a generator spec such as {{kinds: [compute], n: 100, seed: 1}}")


def refuse_overlap(train: list[Problem], held_out: list[Problem], where: str) -> None:
    """Held-out questions sharing a 13-gram (or an id) with training questions: one line, before any work."""
    import polars as pl

    from agentdata.steps.decontam import DEFAULT_NGRAM, BenchmarkNgrams

    # Generated problems of one template share some 13-grams with every sibling ("what is the sum of the
    # squares of the integers from 1 to"); a training question counts as held out when most of its
    # n-grams are (a copy has all of them), the rule `min_share` gives the decontamination step.
    benchmark = BenchmarkNgrams.from_questions([problem.question for problem in held_out], DEFAULT_NGRAM)
    questions = pl.Series([problem.question for problem in train], dtype=pl.String)
    hits = benchmark.contaminated(questions, min_share=OVERLAP_SHARE)
    same_ids = {problem.id for problem in train} & {problem.id for problem in held_out}
    overlapping = [problem for problem, hit in zip(train, hits.to_list()) if hit or problem.id in same_ids]
    if overlapping:
        raise UserError(
            f"{where}: held_out overlaps the training problems: {len(overlapping)} of {len(train)} training questions "
            f"share most of their {DEFAULT_NGRAM}-grams with held-out questions (first: "
            f"{overlapping[0].question[:80]!r}); "
            "hold out other problems (the compute ladder: seed 1 for held_out, seed 0 for problems)"
        )


def write_problem_files(recipe: Recipe, folder: Path) -> ProblemFiles:
    """Training, held-out and curve problems as JSONL under `folder`, checked for overlap; their digests."""
    from agentdata.experiment.work import digest
    from agentdata.records import write_jsonl

    where = f"{recipe.source} base"
    train = problems_from(recipe.base.get("problems", DEFAULT_PROBLEMS), "problems", where)
    held_out = problems_from(recipe.base.get("held_out", DEFAULT_HELD_OUT), "held_out", where)
    if not train or not held_out:
        raise UserError(f"{where}: {'problems' if not train else 'held_out'} has no problem")
    refuse_overlap(train, held_out, where)
    curve_count = arm_choices(recipe.base, where)["rl"].curve_problems
    sets = {"train": train, "held_out": held_out, "curve": held_out[:curve_count]}
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: write_jsonl(problems, folder / f"{name}.jsonl") for name, problems in sets.items()}
    digests = {
        name: digest([[p.id, p.question, p.answer, p.domain, p.metadata.get("tests")] for p in problems])
        for name, problems in sets.items()
    }
    return ProblemFiles(paths["train"], paths["held_out"], paths["curve"], digests)
