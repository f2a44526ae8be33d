"""GRPO's asynchronous mode against the real vLLM (its CPU build in `.venv-vllm`): rollouts from a server
agentdata starts, the policy's weights pushed to it as files by TRL's weight-sync schedule, the behaviour
log-probabilities from vLLM's `prompt_logprobs`, through `agentdata train`. Skipped (failed in CI) without vLLM,
as tests/test_vllm_real.py."""

from __future__ import annotations

import json

from tests.cli_helpers import run_cli
from tests.test_vllm_real import HELD_OUT, SERVED, tiny_vllm_dir  # noqa: F401  (the fixture)
from tests.test_vllm_real import pytestmark as vllm_marks

pytestmark = [*vllm_marks, SERVED]  # test_vllm_real's marks and one of its two xdist groups, to even them


def test_async_grpo_with_vllm_rollouts_on_the_cpu(tiny_vllm_dir, tmp_path, capsys):  # noqa: F811
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(problem) + "\n" for problem in HELD_OUT))
    settings = tmp_path / "rl.yaml"
    settings.write_text(
        "rl:\n  mode: async\n  max_staleness: 1\n  max_steps: 2\n  prompts_per_step: 1\n  num_generations: 2\n"
        "  max_new_tokens: 32\n  overlong_buffer: 0\n  limit: 4\n  use_vllm: 'yes'\n  plots: false\n"
        f"  eval_problems: {held_out}\n  eval_every: 1\n  eval_k: 1\n"
    )
    out = tmp_path / "grpo"
    args = ["train", "--stage", "rl", "--model", f"hf:{tiny_vllm_dir}", "--config", str(settings), "--out", str(out)]
    assert run_cli([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["rl"]
    assert (summary["rollouts"], summary["steps"]) == ("async-file-push", 2)
    assert summary["weight_pushes"] == 3  # TRL's sync at the start and after each step, as files
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [step for step in steps if "loss" in step]
    assert len(trained) == 2
    assert all(step["sample/staleness_max"] <= 1 for step in trained if "sample/staleness_max" in step)
    # vLLM's log-probabilities of the trained tokens are the trainer's own at the first pass: the ratio is ~1
    assert all(abs(step["ratio"] - 1) < 0.05 for step in trained)
    evaluations = [step for step in steps if "eval/avg@1" in step]
    assert [step["step"] for step in evaluations] == [0, 1, 2]
    assert all(step["eval/rollouts/failed"] == 0 for step in evaluations)
    assert any(out.glob("*.safetensors"))
