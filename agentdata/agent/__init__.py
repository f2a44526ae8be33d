"""The runtime every stage shares: the agent loop, the concurrent runner and the run dir.

`collect`, `filter`'s profiling, GRPO rollouts and `eval` all run trajectories through
here; this package knows no stage.
"""
