"""Every benchmark script in bench/ runs at a tiny size (`--smoke`), all its arms and their same-work
checks included, so none rots unseen between the runs that record bench/RESULTS*.md. Sizes are
chosen for seconds; the numbers they print mean nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

OUT = "{out}"  # a fresh folder of the test's own, for the scripts that write their results to one
SMOKE_RUNS = {
    "bench_curate.py": ["--smoke", "--only", "steps", "--only", "near-dedup", "--only", "curate", "--only", "memory"],
    "bench_filter.py": ["--smoke"],
    "bench_eval.py": ["--smoke"],
    "bench_view.py": ["--smoke"],
    "bench_collect.py": ["smoke"],
    "bench_judge.py": ["smoke"],
    "bench_grading.py": ["--smoke"],
    "bench_humaneval.py": ["--smoke", "--out", f"{OUT}-RESULTS_humaneval.md"],
    "bench_prefix.py": ["--smoke", "--switch", "streaming"],
    "bench_threads.py": ["--smoke"],
    "bench_sandbox.py": ["--smoke"],
    "bench_secrets.py": ["--smoke"],
    "bench_sft_set.py": ["--smoke"],
    "bench_train.py": ["--smoke"],
    "bench_memory.py": ["--smoke", "--out", OUT],
    "bench_vllm.py": ["overhead", "--smoke"],  # a vLLM server on a tiny model (.venv-vllm)
    "bench_async_grpo.py": ["--smoke"],  # GRPO sync against async on a vLLM server (.venv-vllm)
    "bench_validation.py": ["--smoke", "--out", OUT],
    "bench_quickstart.py": ["--smoke", "--out", OUT],
    "bench_seed_repro.py": ["--out", OUT, "--problems", "1", "--samples", "1", "--max-new-tokens", "8", "--engines=hf"],
    "bench_fleet.py": [
        "--trajectories",
        "12",
        "--concurrency",
        "4",
        "--latency",
        "0.05",
        "--rps",
        "5",
        "--sandbox-trajectories",
        "8",
        "--sandbox-rps",
        "20",
    ],
}
# Scripts that record a run rather than compare arms, too long for any smoke size, with what covers them.
NOT_SMOKED = {
    "bench_harnesses.py": "runs the real agent harnesses against the real default engine, minutes a trajectory; "
    "tests/test_real_harnesses.py runs qwen-agent so on two problems",
    "bench_findings.py": "runs the built-in experiment recipes, an hour each; tests/test_experiment.py runs a "
    "recipe end to end on tiny models and plans every built-in one",
}


def test_every_bench_script_has_a_smoke_run():
    scripts = {path.name for path in BENCH.glob("bench_*.py")}
    assert scripts == set(SMOKE_RUNS) | set(NOT_SMOKED), "add the new bench script's --smoke run to SMOKE_RUNS"


def smoke_run(script: str, folder: Path) -> str | None:
    """Run one script at its smoke size; None when it succeeded, else what it printed last."""
    arguments = [argument.replace(OUT, str(folder / "out")) for argument in SMOKE_RUNS[script]]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent), "OMP_NUM_THREADS": "1", "TMPDIR": str(folder)}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments], capture_output=True, text=True, env=env, timeout=900
    )
    if done.returncode == 0:
        return None
    return f"{script} {' '.join(arguments)} (exit {done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"


@pytest.mark.slow  # in the full suite, out of the quick one
@pytest.mark.timeout(1200)  # all of them in one test, two at a time
def test_every_bench_runs_at_smoke_size(tmp_path):
    """Two at a time (most of a smoke run is starting interpreters, models and servers, not computing). All of
    them: about 175 s of CPU (user + system, every process), so some 90 s on an idle 2-core machine."""
    folders = {script: tmp_path / script.removesuffix(".py") for script in SMOKE_RUNS}
    for folder in folders.values():
        folder.mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [failure for failure in pool.map(smoke_run, folders, folders.values()) if failure]
    assert not failures, "\n\n".join(failures)


def test_a_comparison_of_arms_that_did_different_work_stops_with_one_line():
    sys.path.insert(0, str(BENCH))
    from arms import DifferentWork, same_work

    same_work("bench_x", "rows kept", 10, 10)
    same_work("bench_x", "tool calls per response", 0.9, 1.0, at_least=0.25)
    with pytest.raises(DifferentWork, match="bench_x: rows kept differ between the arms \\(10 vs 11\\)"):
        same_work("bench_x", "rows kept", 10, 11)
    with pytest.raises(DifferentWork, match="tokens"):
        same_work("bench_x", "tokens", 1000, 1200, tolerance=0.1)


def test_the_grpo_comparison_refuses_a_side_that_made_no_tool_call():
    """The regression of issue 25: ours ran codeblock rollouts of a model taught hermes calls, 0 calls and
    reward -1 at every step, and the bench still reported a speed ratio."""
    sys.path.insert(0, str(BENCH))
    from arms import DifferentWork, same_grpo_work

    def run(calls: list[float], tokens: int) -> dict:
        return {"tool_calls_per_response": calls, "num_tokens": [tokens // 2, tokens], "reward": [-1.0] * len(calls)}

    same_grpo_work({"plain": [run([1.0, 1.0], 1164)], "ours": [run([0.75, 1.0], 1160)]})
    with pytest.raises(DifferentWork, match="ours made no tool call"):
        same_grpo_work({"plain": [run([1.0, 1.0], 1164)], "ours": [run([0.0, 0.0], 1160)]})
    with pytest.raises(DifferentWork, match="tokens trained on"):
        same_grpo_work({"plain": [run([1.0, 1.0], 1164)], "ours": [run([1.0, 1.0], 2400)]})
