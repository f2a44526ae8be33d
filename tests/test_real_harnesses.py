"""The real harnesses, each installed from the registry in its own venv (scripts/peers.sh: smolagents,
qwenagent, openaiagents), driven by `collect --harness` through the recording gateway, a scripted model
behind it (tests/scripted_agents.py): smolagents' CodeAgent, its ToolCallingAgent with agentdata's MCP
sandbox, qwen-agent with its code interpreter on agentdata's SandboxFusion-compatible service, and the
OpenAI Agents SDK with the MCP sandbox. Skipped where a venv is missing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata.agent.inspection import read_trajectories
from agentdata.sandbox import Sandbox
from agentdata.sandbox.service import build_app
from tests.cli_helpers import run_cli
from tests.sandboxfusion_standin import ServedApp

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO / ".peers"
EXAMPLES = REPO / "examples" / "harnesses"
TEACHER = f"{Path(__file__).with_name('scripted_agents.py')}:ScriptedAgentModel"
QUESTIONS = {"What is 6*7?": "42", "What is 12*3?": "36"}


def peer(name: str) -> str:
    python = PEERS / name / "bin" / "python"
    if not python.exists():
        if os.environ.get("AGENTDATA_REQUIRE_PEERS"):  # CI: a harness that did not install is a failure
            pytest.fail(f"AGENTDATA_REQUIRE_PEERS is set but {name} is not installed: scripts/peers.sh {name}")
        pytest.skip(f"{name} is not installed: scripts/peers.sh {name}")
    return str(python)


@pytest.fixture
def problems(tmp_path) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in QUESTIONS.items()))
    return path


def collect_with(problems: Path, run_dir: Path, harness: str, *flags: str) -> list:
    args = ["collect", str(problems), "--teacher", TEACHER, "--harness", harness, "--out", str(run_dir), "--json"]
    assert run_cli([*args, "harness_timeout=240", *flags]) == 0
    trajectories = read_trajectories(run_dir)
    assert sorted(t.final_answer for t in trajectories) == sorted(QUESTIONS.values())
    assert all(t.correct and t.finish_reason == "answer" for t in trajectories)
    return trajectories


def curated(run_dir: Path, out: Path, *flags: str) -> list[dict]:
    assert run_cli(["curate", str(run_dir), "--out", str(out), "--json", *flags]) == 0
    return pq.read_table(out).to_pylist()


def test_smolagents_code_agent_makes_a_run_dir_curate_takes(problems, tmp_path, capsys):
    harness = f"{peer('smolagents')} {EXAMPLES / 'smolagents_agent.py'} code"
    (trajectory, _) = collect_with(problems, tmp_path / "run", harness)
    roles = [message["role"] for message in trajectory.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert "Execution logs:" in trajectory.messages[3]["content"]  # smolagents ran the code itself
    assert trajectory.metadata["gateway"][0]["sampling"]["stop"][:2] == ["Observation:", "Calling tools:"]
    # its code is plain text, not tool calls: a set of it keeps trajectories with none
    assert len(curated(tmp_path / "run", tmp_path / "sft.parquet", "--tool-calls", "0,8")) == 2
    capsys.readouterr()
    assert run_cli(["inspect", str(tmp_path / "run"), "--json"]) == 0


def test_smolagents_tool_calling_agent_runs_its_code_in_the_mcp_sandbox(problems, tmp_path, monkeypatch, capsys):
    mcp_server = f"{sys.executable} -m agentdata.cli.app sandbox serve --mcp --timeout 10 -w 1 --prefork 0"
    monkeypatch.setenv("AGENTDATA_SANDBOX_MCP", mcp_server)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    harness = f"{peer('smolagents')} {EXAMPLES / 'smolagents_agent.py'} tools"
    trajectories = collect_with(problems, tmp_path / "run", harness)
    for trajectory in trajectories:
        names = [tool["function"]["name"] for tool in trajectory.tools]
        assert names == ["code_interpreter", "final_answer"]  # the sandbox's schema, read from the MCP server
        answer = QUESTIONS[trajectory.question]
        assert f"Observation:\n{answer}" in [m["content"] for m in trajectory.messages]  # the sandbox printed it
        assert trajectory.messages[-1]["tool_calls"][0]["function"]["name"] == "final_answer"
        first = trajectory.metadata["gateway"][0]["exchange"]["response"]["choices"][0]["message"]
        assert first["tool_calls"][0]["function"]["name"] == "code_interpreter"  # as the model made the call
    capsys.readouterr()
    assert run_cli(["view", str(tmp_path / "run"), "--export", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.fixture
def sandbox_service():
    sandbox = Sandbox(workers=2, timeout_s=10, prefork=1)
    served = ServedApp(build_app(sandbox))
    yield served.url
    served.stop()
    sandbox.close()


def test_qwen_agent_on_the_sandboxfusion_service_makes_an_sft_set(problems, tmp_path, sandbox_service):
    harness = f"{peer('qwenagent')} {EXAMPLES / 'qwen_agent_sandboxfusion.py'}"
    trajectories = collect_with(problems, tmp_path / "run", harness, "--sandbox", sandbox_service)
    for trajectory in trajectories:
        answer = QUESTIONS[trajectory.question]
        assert [m["role"] for m in trajectory.messages] == ["user", "assistant", "tool", "assistant"]
        assert trajectory.messages[2]["content"] == f"{answer}\n"  # what the service's /run_code printed
        call_id = trajectory.messages[1]["tool_calls"][0]["id"]
        assert trajectory.messages[2]["tool_call_id"] == call_id  # qwen-agent names no call: tied to its own
        assert trajectory.num_tool_calls == 1
        assert all(entry["sampling"]["stream"] for entry in trajectory.metadata["gateway"])  # qwen-agent streams
    rows = curated(tmp_path / "run", tmp_path / "sft.parquet")
    assert len(rows) == 2 and all(row["messages"][1]["tool_calls"] for row in rows)


def test_openai_agents_sdk_with_the_mcp_sandbox_makes_an_sft_set(problems, tmp_path, monkeypatch):
    mcp_server = f"{sys.executable} -m agentdata.cli.app sandbox serve --mcp --timeout 10 -w 1 --prefork 0"
    monkeypatch.setenv("AGENTDATA_SANDBOX_MCP", mcp_server)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    harness = f"{peer('openaiagents')} {EXAMPLES / 'openai_agents_mcp.py'}"
    trajectories = collect_with(problems, tmp_path / "run", harness)
    for trajectory in trajectories:
        roles = [message["role"] for message in trajectory.messages]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        assert trajectory.messages[3]["content"] == QUESTIONS[trajectory.question]  # the MCP sandbox's output
        assert [tool["function"]["name"] for tool in trajectory.tools] == ["code_interpreter"]
    assert len(curated(tmp_path / "run", tmp_path / "sft.parquet")) == 2


@pytest.mark.slow  # the real default model on transformers, a real qwen-agent: about 30 s on a quiet machine
@pytest.mark.timeout(600)
def test_qwen_agent_against_the_real_default_engine_sees_its_tools_and_examples(tmp_path, sandbox_service, monkeypatch):
    # not a stand-in: qwen-agent's requests reach smollm2-tir on the transformers engine, which shows the model
    # qwen-agent's code tool as its worked examples teach (```python blocks) and gives its blocks back as calls
    monkeypatch.setenv("AGENTDATA_VLLM", "off")
    problems = tmp_path / "problems.jsonl"
    ladder = [("What is 3 * 14? Put the final answer in \\boxed{}.", "42"), ("What is 2^10?", "1024")]
    problems.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in ladder))
    harness = f"{peer('qwenagent')} {EXAMPLES / 'qwen_agent_sandboxfusion.py'}"
    args = ["collect", str(problems), "--teacher", "smollm2-tir", "--harness", harness, "--out", str(tmp_path / "run")]
    flags = ["--sandbox", sandbox_service, "--concurrency", "2", "--temperature", "0", "--max-new-tokens", "160"]
    flags += ["--json", "harness_timeout=300"]  # greedy, 160 tokens a request: the run fills what qwen-agent leaves
    assert run_cli([*args, *flags]) == 0
    trajectories = read_trajectories(tmp_path / "run")
    assert len(trajectories) == 2 and all(t.finish_reason == "answer" for t in trajectories)
    for trajectory in trajectories:
        assert trajectory.teacher == "smollm2-tir" and trajectory.format == "native"
        assert [tool["function"]["name"] for tool in trajectory.tools] == ["code_interpreter"]
        prompt = trajectory.metadata["gateway"][0]["prompt"]  # what the model read, as the engine rendered it
        assert "```python\nprint(3817 * 2269)\n```\n```output\n8660773\n```" in prompt  # the worked examples
        assert prompt.endswith(f"{trajectory.question}<|im_end|>\n<|im_start|>assistant\n")
        for entry in trajectory.metadata["gateway"][1:]:  # after a call: the tool's output, in the same turn
            assert entry["prompt"].rstrip().endswith("```") and "```output\n" in entry["prompt"]
