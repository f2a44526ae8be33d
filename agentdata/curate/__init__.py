"""`agentdata curate`: trajectories from run dirs -> named filter steps -> the SFT set.

The pipeline (polars, the filter steps) is imported when first asked for, so reading the
settings (`agentdata.curate.config`) stays light.
"""

from agentdata.curate.config import CurateConfig

__all__ = ["CurateConfig", "CurateResult", "curate", "curate_steps"]


def __getattr__(name: str):
    if name in ("CurateResult", "curate", "curate_steps"):
        from agentdata.curate import sft

        return getattr(sft, name)
    raise AttributeError(name)
