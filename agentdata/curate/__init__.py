"""Curation pipelines: the SFT set (`curate`) and the model-aware RL pool (`filter`)."""

from agentdata.curate.sft import CurateConfig, CurateResult, curate, curate_steps

__all__ = ["CurateConfig", "CurateResult", "curate", "curate_steps"]
