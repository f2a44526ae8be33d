"""`train --rl-problems` with GRPO's rollouts on the real vLLM (its CPU build in `.venv-vllm`): the profile runs on
the server GRPO then trains with, started once. Skipped (failed in CI) without vLLM, as tests/test_vllm_real.py."""

from __future__ import annotations

import json

from agentdata.engines.vllm_server import VLLMServer
from tests.test_vllm_real import HELD_OUT, MANAGED, tiny_vllm_dir  # noqa: F401  (the fixture)
from tests.test_vllm_real import pytestmark as vllm_marks

pytestmark = [*vllm_marks, MANAGED]  # test_vllm_real's marks and one of its two xdist groups, to even them


def test_the_profile_runs_on_the_vllm_server_grpo_then_trains_with(tiny_vllm_dir, tmp_path, monkeypatch):  # noqa: F811
    from agentdata.train.run import TrainRequest, train

    started: list[VLLMServer] = []
    start = VLLMServer.start

    def counted_start(server: VLLMServer) -> VLLMServer:
        started.append(server)
        return start(server)

    monkeypatch.setattr(VLLMServer, "start", counted_start)
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(problem) + "\n" for problem in HELD_OUT))
    settings = {
        "model": f"hf:{tiny_vllm_dir}",
        "rl_problems": str(problems),
        "profile_k": 2,
        **dict(max_steps=1, prompts_per_step=1, num_generations=2, max_new_tokens=32, overlong_buffer=0),
        **dict(use_vllm="yes", plots=False),
    }
    out = tmp_path / "rl"
    [(_, result)] = train(TrainRequest(stage="rl", out=out, settings=settings))
    [server] = started  # one server for the profile and GRPO, stopped after both
    assert server.process is None and server.settings.model == str(tiny_vllm_dir)
    assert (result.rollouts, result.steps, result.weight_pushes) == ("file-push", 1, 1)
    report = json.loads((out / "pool.report.json").read_text())
    assert report["student"] == f"vllm:{tiny_vllm_dir}"
    assert (report["generated_rollouts"], report["failed_rollouts"]) == (4, 0)  # 2 problems x 2, none lost
    print(f"vLLM server start: {server.startup_s:.1f} s")  # the start a second server would have cost
