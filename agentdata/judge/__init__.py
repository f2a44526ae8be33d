"""Judging trajectories beyond their verdict: a process reward model scores every step, an LLM judge
grades the whole against a rubric; both as filter steps (`prm_low`, `judge_low`) that store their scores
on the rows. The rollout health checks are text work and live in `agentdata.formats.health`.

Reading the settings (`agentdata.judge.config`) stays light: models, torch and polars are imported
when first asked for.
"""

from agentdata.judge.config import ScoringConfig

__all__ = ["JudgeStep", "PRMStep", "ScoringConfig", "StepsInput", "load_prm"]


def __getattr__(name: str):
    if name in ("JudgeStep", "PRMStep"):
        from agentdata.judge import steps

        return getattr(steps, name)
    if name in ("StepsInput", "load_prm"):
        from agentdata.judge import prm

        return getattr(prm, name)
    raise AttributeError(name)
