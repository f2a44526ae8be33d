"""`agentdata curate`: trajectories from run dirs -> named filter steps -> the SFT set."""

from agentdata.curate.sft import CurateConfig, CurateResult, curate, curate_steps

__all__ = ["CurateConfig", "CurateResult", "curate", "curate_steps"]
