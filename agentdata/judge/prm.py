"""Process reward models behind one interface: the steps of a trajectory in, one score per step out.

    prm = load_prm("hf:/models/Qwen2.5-Math-PRM-7B", trust_remote_code=True)
    prm = load_prm("openai:http://127.0.0.1:8000", model="Qwen/Qwen2.5-Math-PRM-7B")   # vLLM pooling
    scores = await prm.score([StepsInput("What is 6 * 7?", ["```python\nprint(6 * 7)\n```", "... \\boxed{42}"])])

A score is the model's probability that the step is right, in [0, 1]. A spec is `KIND:TARGET`
(`hf`, `openai`) or a plug-in `module:Factory[:TARGET]` / `file.py:Factory[:TARGET]`, called as
`factory(target, spec=spec, **options)` like an engine's. One trajectory's failure (too long for
the model, a server that gave up) comes back as a `ScoreFailure` in its place, never as a score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentdata.engines.spec import parse_spec
from agentdata.errors import UserError
from agentdata.registry import PluginError, Registry, call_plugin, is_plugin_path

PRMS: Registry[Any] = Registry("process reward model")
PRMS.register("hf", "agentdata.judge.prm_hf:HFProcessRewardModel")
PRMS.register("openai", "agentdata.judge.prm_pooling:PoolingRewardModel")
SPEC_HELP = "use hf:PATH, openai:URL (a pooling endpoint) or a plug-in module:Factory[:TARGET]"
DEFAULT_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass
class StepsInput:
    """One trajectory as a PRM reads it: the question and the assistant's steps, in order."""

    question: str
    steps: list[str]


class ScoreFailure(str):
    """Why a trajectory got no score (a str, so it can be stored and shown as it is)."""


class ProcessRewardModel:
    """Subclasses set `spec` and implement `score`; `batch_rows` inputs go to one call, `parallel` calls at once."""

    spec: str = ""
    batch_rows: int = 8
    parallel: int = 1

    def identity(self) -> dict[str, Any]:
        """What changes its scores (the journal keys on it): the spec and the options that read the model."""
        return {"spec": self.spec}

    async def score(self, inputs: list[StepsInput]) -> list[list[float] | ScoreFailure]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def aggregate(step_scores: list[float], how: str) -> float:
    """One score for the trajectory: its weakest step (min), the mean, or the last step's."""
    if not step_scores:
        raise ValueError("no step scores to aggregate")
    if how == "min":
        return min(step_scores)
    if how == "mean":
        return sum(step_scores) / len(step_scores)
    if how == "last":
        return step_scores[-1]
    raise ValueError(f"unknown aggregate {how!r}: use min, mean or last")


def load_prm(spec: str, **options: Any) -> ProcessRewardModel:
    """The process reward model a spec names; `options` go to it (e.g. step_token=, model=, device=)."""
    spec = (spec or "").strip()
    kind, target = parse_spec(spec)
    if kind not in PRMS and not is_plugin_path(kind):
        raise UserError(f"unknown process reward model {spec!r}: {SPEC_HELP}")
    if kind in PRMS and not target:
        raise UserError(f"process reward model {spec!r} needs a target after '{kind}:': {SPEC_HELP}")
    factory = PRMS.get(kind)
    if is_plugin_path(kind):  # a plug-in that cannot be called so, or raises, is named as the fault
        prm = call_plugin(
            kind,
            "process reward model",
            "factory(target, spec=spec, **prm options)",
            factory,
            target,
            spec=spec,
            **options,
        )
    else:
        try:
            prm = factory(target, spec=spec, **options)
        except TypeError as error:
            if "unexpected keyword argument" not in str(error):
                raise
            raise UserError(f"process reward model {spec!r} does not take that option: {error}") from None
    if not isinstance(prm, ProcessRewardModel):
        raise PluginError(kind, f"built {type(prm).__name__}, not a ProcessRewardModel (agentdata.judge.prm)")
    return prm
