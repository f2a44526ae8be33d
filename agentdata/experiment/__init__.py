"""`agentdata experiment RECIPE`: the findings' ablations as one command.

A recipe (recipe.py) declares a shared base and two or more arms, each changing named settings of
one stage (keys.py). Every arm runs through the existing stages, called as libraries (stages.py;
`train` through training.py): collect, stitch, curate, SFT, filter's profile, GRPO, eval. Work that
arms share runs once (work.py), every arm is evaluated on the same held-out problems with the same
seeds and k, and the report (report.py, markdown.py, plots.py) compares them pairwise with
evaluation/stats.py's intervals. Built-in recipes: recipes/*.yaml (docs/experiments.md).

    from agentdata.experiment import load_recipe, run_experiment
    report = run_experiment(load_recipe("sft-data"), "runs/experiment/sft-data")
    for row in report.comparisons:
        print(row["sentence"])
"""

from agentdata.experiment.recipe import Recipe, builtin_recipes, load_recipe
from agentdata.experiment.runner import run_experiment

__all__ = ["Recipe", "builtin_recipes", "load_recipe", "run_experiment"]
