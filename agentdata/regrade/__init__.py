"""`agentdata regrade`: stored trajectories graded again against today's gold and verifier, nothing generated."""

from agentdata.regrade.config import RegradeConfig

__all__ = ["RegradeConfig", "RegradeResult", "regrade"]


def __getattr__(name: str):
    if name in ("RegradeResult", "regrade"):
        from agentdata.regrade import run

        return getattr(run, name)
    raise AttributeError(name)
