"""A seed reproduces a run (issue 49): the same seeded, sampled collect on the real SmolLM2 with the
transformers engine, 2 trajectories in flight and then one at a time, gives the same trajectories. Each row
samples from a generator of its own seed (engines/hf_sampling.py) and the engine computes in float32, so what
shares a batch does not change a row's tokens. The vLLM twin is in tests/test_vllm_real.py."""

from __future__ import annotations

import asyncio

import pytest

from agentdata.engines import load_engine
from tests.seeded_collect import seeded_collect_twice

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # one at a time on the transformers engine: slow


def test_a_seed_reproduces_a_sampled_collect_on_transformers_whatever_shares_its_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTDATA_VLLM", "off")
    engine = load_engine("smollm2-tir")
    try:
        first, second = seeded_collect_twice(engine, tmp_path, (2, 1), problems=1)
    finally:
        asyncio.run(engine.aclose())
    assert len(first) == 2 and first.keys() == second.keys()
    assert sum('"role": "tool"' in messages for messages in first.values()) >= 1  # some ran code
    assert [tid for tid in first if first[tid] != second[tid]] == []
