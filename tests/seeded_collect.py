"""The same seeded, sampled collect twice with different concurrency: does a seed reproduce its trajectories?
(tests/test_seed_reproduces.py on transformers, tests/test_vllm_real.py on vLLM; issue 49.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

# The sandbox's part, not the model's: code that prints an object (`<generator object ... at 0x7f42...>`) shows
# an address that moves from run to run (address-space randomisation), and the model's next turn then reads
# another prompt. A trajectory is compared up to such an output, the address masked; what follows it is not.
ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def without_addresses(messages: list[dict]) -> str:
    """The messages as JSON, up to and including the first whose text holds an object's address (masked)."""
    kept = []
    for message in messages:
        kept.append(message)
        if ADDRESS.search(json.dumps(message)):
            break
    return ADDRESS.sub(" at 0x…", json.dumps(kept, sort_keys=True))


def seeded_collect_twice(
    engine, tmp_path: Path, concurrencies: tuple[int, int], problems: int = 6
) -> tuple[dict, dict]:
    """The same seeded, sampled collect (smollm2-tir's examples, code run) with `concurrencies[0]` trajectories in
    flight, then `concurrencies[1]`: the seeds are the same, which requests share a batch is not."""
    from agentdata.agent.config import CollectConfig, LoopConfig
    from agentdata.agent.inspection import read_trajectories
    from agentdata.agent.runner import collect
    from agentdata.synth.generators import generate_problems

    chosen = generate_problems(problems, seed=7, kinds=["compute", "chain"])
    found = []
    for index, concurrency in enumerate(concurrencies):
        loop = LoopConfig(temperature=1.0, max_new_tokens=96, max_tool_calls=2, protocol="codeblock")
        config = CollectConfig(model=engine.spec, concurrency=concurrency, samples=2, seed=3, loop=loop)
        collect(chosen, tmp_path / f"run-{index}", config, engine=engine)
        found.append({row.id: without_addresses(row.messages) for row in read_trajectories(tmp_path / f"run-{index}")})
    return found[0], found[1]
