"""agentdata: real tool-use trajectories, curated SFT sets, model-aware RL pools, and the training that uses them."""

# The one place the version is written: pyproject.toml reads it from here (its version is dynamic), and every
# run dir, set card and report records it through agentdata.versions. CHANGELOG.md says what each one changed.
__version__ = "0.6.0"
