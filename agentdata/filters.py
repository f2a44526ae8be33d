"""The 0.3 name of `agentdata.steps`. A 0.x package keeps no silent aliases: importing it is one line naming
the new module."""

raise ImportError("agentdata.filters is now agentdata.steps: import filter steps from there (see CHANGELOG.md)")
