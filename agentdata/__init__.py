"""agentdata: real tool-use trajectories, curated SFT sets, model-aware RL pools, and the training that uses them."""

__version__ = "0.1.0"
