"""`agentdata validate`: broken problems found before money is spent on them, a report and a clean file."""

from agentdata.validate.config import ValidateConfig

__all__ = ["CHECKS", "ValidateConfig", "ValidateResult", "validate"]


def __getattr__(name: str):
    if name in ("CHECKS", "ValidateResult", "validate"):
        from agentdata.validate import run

        return getattr(run, name)
    raise AttributeError(name)
