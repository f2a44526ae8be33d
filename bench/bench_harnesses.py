"""The shipped harness examples as a user runs them: `collect --harness` on held-out compute problems.

    python bench/bench_harnesses.py --n 8 --engines vllm,transformers --harnesses qwen,agents-sdk

Each harness (examples/harnesses/*.py, unchanged, from its venv under .peers/) records through the gateway
with the default teacher (`smollm2-tir`) and the run's default sampling; per harness and engine it prints one
markdown row: trajectories recorded, those that ran code in the sandbox, correct, wall time and the 1-minute
load before and after (bench/RESULTS.md, "Harnesses on the default engine"). `vllm` is the default engine where
`.venv-vllm` is installed; `transformers` is `AGENTDATA_VLLM=off`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentdata import processes
from agentdata.engines.demonstrated import ANSWER_TOOL

ROOT = Path(__file__).resolve().parents[1]
HARNESSES = {  # name: (the --harness command, extra environment)
    "qwen": (".peers/qwenagent/bin/python examples/harnesses/qwen_agent_sandboxfusion.py", {}),
    "agents-sdk": (".peers/openaiagents/bin/python examples/harnesses/openai_agents_mcp.py", {}),
    "smolagents-tools": (".peers/smolagents/bin/python examples/harnesses/smolagents_agent.py tools", {}),
}
ENGINES = {"vllm": {"AGENTDATA_VLLM": "auto"}, "transformers": {"AGENTDATA_VLLM": "off"}}


def write_problems(path: Path, n: int) -> None:
    """Held-out compute ladder problems (seed 7, the first two levels), as the earlier rows were measured on."""
    from agentdata.records import to_row
    from agentdata.synth.generators import generate_problems

    rows = [to_row(problem) for problem in generate_problems(n, seed=7, kinds=["compute"], levels=[1, 2])]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def load() -> float:
    return os.getloadavg()[0]


@contextlib.contextmanager
def sandbox_service(port: int):
    """qwen-agent's code interpreter: agentdata's SandboxFusion-compatible service on loopback."""
    # supervised (agentdata.processes): gone with this script, however it ends (killed with -9 too)
    service = processes.popen(
        [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--port", str(port)], cwd=ROOT
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        processes.stop(service.pid)


def run(harness: str, engine: str, problems: Path, out: Path, sandbox_url: str, timeout: int) -> dict:
    command, extra_env = HARNESSES[harness]
    env = {**os.environ, **ENGINES[engine], **extra_env}
    args = [sys.executable, "-m", "agentdata.cli.app", "collect", str(problems), "--out", str(out), "--harness"]
    args += [command, "--sandbox", sandbox_url, "--json", f"harness_timeout={timeout}"]
    before, started = load(), time.monotonic()
    collect = processes.popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, stderr = collect.communicate()
    wall, after = time.monotonic() - started, load()
    rows = _trajectories(out)
    return {
        "harness": harness,
        "engine": engine,
        "exit": collect.returncode,
        "recorded": len(rows),
        "ran_code": sum(ran_code(row) for row in rows),
        "correct": sum(bool(row.correct) for row in rows),
        "wall_s": round(wall),
        "load": f"{before:.1f} → {after:.1f}",
        "stderr_tail": stderr[-300:] if collect.returncode else "",
    }


def _trajectories(out: Path) -> list:
    from agentdata.agent.inspection import read_trajectories

    return read_trajectories(out) if out.exists() else []


def ran_code(row) -> bool:
    """Whether the model called a tool other than `final_answer`, as the gateway recorded its answers: smolagents'
    ToolCallingAgent keeps its calls as text in its history, so the row's own messages hold none."""
    for entry in row.metadata.get("gateway") or []:
        for choice in (entry.get("exchange", {}).get("response") or {}).get("choices") or []:
            calls = (choice.get("message") or {}).get("tool_calls") or []
            if any(call["function"]["name"] != ANSWER_TOOL for call in calls):
                return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8, help="problems per harness and engine")
    parser.add_argument("--engines", default="vllm,transformers")
    parser.add_argument("--harnesses", default="qwen,agents-sdk")
    parser.add_argument("--timeout", type=int, default=600, help="harness_timeout= of each trajectory (s)")
    parser.add_argument("--port", type=int, default=18931)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-harnesses-") as folder, sandbox_service(options.port) as url:
        problems = Path(folder) / "problems.jsonl"
        write_problems(problems, options.n)
        print("| harness | engine | recorded | ran code | correct | wall s | load |")
        print("|---|---|---|---|---|---|---|")
        for engine in options.engines.split(","):
            for harness in options.harnesses.split(","):
                row = run(harness, engine, problems, Path(folder) / f"{harness}-{engine}", url, options.timeout)
                failed = f" exit {row['exit']}: {row['stderr_tail']!r}" if row["exit"] else ""
                print(
                    f"| {harness} | {engine} | {row['recorded']}/{options.n} | {row['ran_code']} | {row['correct']} "
                    f"| {row['wall_s']} | {row['load']} |{failed}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
