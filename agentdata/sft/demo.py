"""The SFT set `agentdata train` builds for its no-argument demonstration.

There is no strong teacher offline, and SmolLM2 almost never solves a problem with the
tool on its own, so its own rollouts give nothing to imitate. The demo instead stitches
the short worked solutions of generated problems (`agentdata.synth.solutions.worked_solution`)
into tool-use conversations whose code really ran in the sandbox (`agentdata.synth.stitch`),
the same data `examples/learning/` curates at a larger size. The GRPO part of the demo then
trains on the default problems (the `compute` ladder), a kind these worked solutions never cover.
"""

from __future__ import annotations

from pathlib import Path

from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.synth.generators import generate_problems
from agentdata.synth.solutions import worked_solution
from agentdata.synth.stitch import StitchConfig, stitch_solution
from agentdata.synth.stitch.files import write_sft

DEMO_SEED = 1


def build_demo_sft_set(out: Path, conversations: int, protocol: str = DEFAULT_PROTOCOL, seed: int = DEMO_SEED) -> Path:
    """Stitch `conversations` worked solutions into an SFT set at `out` (curate's schema)."""
    from agentdata.sandbox import Sandbox

    trajectories = []
    with Sandbox() as sandbox:
        for problem in generate_problems(conversations * 4, seed=seed):
            solution = worked_solution(problem)
            if solution is None:
                continue
            trajectory = stitch_solution(problem, solution, sandbox, StitchConfig(protocol=protocol))
            # only conversations whose code ran cleanly and whose answer checks out are imitated
            if trajectory is not None and trajectory.correct and not trajectory.num_tool_errors:
                trajectories.append(trajectory)
            if len(trajectories) == conversations:
                break
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_sft(trajectories, out)
