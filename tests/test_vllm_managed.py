"""The managed vLLM server's engine without vLLM: a stand-in server takes the process's place, so the logic
around it (started once by whichever request comes first, through the `tir:` wrapper too; its options split
between server and client; the server command and environment; vLLM found or named missing) is tested on
every machine. tests/test_vllm_real.py runs the real server."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentdata.engines import GenerationRequest
from agentdata.engines import vllm_server as server_module
from agentdata.engines.demonstrated import DemonstratedEngine
from agentdata.engines.vllm_engine import ManagedVLLMEngine
from agentdata.engines.vllm_server import ServerSettings
from agentdata.errors import UserError
from bench.fake_openai_server import FakeOpenAIServer


class StandInServer:
    """What ManagedVLLMEngine uses of a VLLMServer, over the fake OpenAI server; counts its starts."""

    def __init__(self, fake: FakeOpenAIServer):
        self.fake = fake
        self.starts = 0
        self.stopped = False
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.fake.url.removesuffix("/v1")

    def start(self):
        with self._lock:
            self.starts += 1
        return self

    def alive(self) -> bool:
        return self.starts > 0 and not self.stopped

    def stop(self) -> None:
        self.stopped = True


def managed_engine(fake: FakeOpenAIServer, **options) -> tuple[ManagedVLLMEngine, StandInServer]:
    engine = ManagedVLLMEngine("/models/m", python="/usr/bin/python3", **options)
    engine.server = StandInServer(fake)
    return engine, engine.server


def ask(text: str) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], max_new_tokens=16)


def test_requests_that_arrive_together_start_the_server_once_and_all_reach_it():
    with FakeOpenAIServer(script="echo") as fake:
        engine, server = managed_engine(fake)

        async def together():
            try:
                return await asyncio.gather(*(engine.generate(ask(f"q{i}")) for i in range(8)))
            finally:
                await engine.aclose()

        generations = asyncio.run(together())
    assert server.starts == 1 and server.stopped
    assert all(generation.finish_reason != "error" for generation in generations), generations[0].error
    assert len(fake.requests) == 8


def test_the_tir_wrapper_passes_ready_on_so_the_server_starts_before_any_work():
    with FakeOpenAIServer(script="echo") as fake:
        engine, server = managed_engine(fake)
        wrapped = DemonstratedEngine(engine, spec="tir:vllm:/models/m")

        async def run():
            await wrapped.ready()
            started = server.starts
            await wrapped.aclose()
            return started

        assert asyncio.run(run()) == 1 and server.stopped


def test_options_are_split_between_the_server_and_its_client():
    engine = ManagedVLLMEngine(
        "/models/m",
        python="/usr/bin/python3",
        tool_call_parser="hermes",
        max_model_len=2048,
        concurrency=3,
        swap_space=2,
    )
    settings = engine.server.settings
    assert (settings.tool_call_parser, settings.max_model_len, engine.concurrency) == ("hermes", 2048, 3)
    command = settings.command("/py", 8000)
    assert command[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]
    assert ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"] == command[-5:-2]
    assert command[-2:] == ["--swap-space", "2"]  # an option agentdata does not know goes to vLLM as a flag
    with pytest.raises(UserError, match="chat template"):
        ManagedVLLMEngine("/models/m", python="/usr/bin/python3", prompt_template="plain")


def test_the_server_environment_is_the_one_that_works_on_a_cpu(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/somewhere/agentdata")
    env = ServerSettings(model="m", dev_mode=True).environment()
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["OMP_NUM_THREADS"], env["VLLM_SERVER_DEV_MODE"]) == ("1", "1", "1")
    assert "PYTHONPATH" not in env  # agentdata's checkout must not shadow the vLLM environment's packages
    command = ServerSettings(model="m").command("/py", 1)
    assert "--enforce-eager" in command and "--no-enable-chunked-prefill" in command  # vLLM 0.32's CPU seed bug
    at = command.index("--dtype")
    assert command[at + 1] == "float32"  # a seed reproduces a run: bfloat16's logits move with the batch (issue 49)
    faster = ManagedVLLMEngine("/models/m", python="/usr/bin/python3", dtype="bfloat16").server.settings
    assert faster.command("/py", 1)[at + 1] == "bfloat16"


def test_vllms_python_is_found_or_named_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(server_module, "sibling_python", lambda: tmp_path / "none" / "python")
    monkeypatch.setattr(server_module, "in_process_vllm", lambda: False)
    monkeypatch.delenv(server_module.PYTHON_ENV, raising=False)
    assert server_module.find_vllm_python() is None
    with pytest.raises(UserError, match="install_vllm.sh"):
        server_module.require_vllm_python()
    monkeypatch.setenv(server_module.PYTHON_ENV, str(tmp_path / "missing"))
    with pytest.raises(UserError, match="no such file"):
        server_module.find_vllm_python()
    python = tmp_path / "python"
    python.write_text("")
    monkeypatch.setenv(server_module.PYTHON_ENV, str(python))
    assert server_module.find_vllm_python() == str(python)


def test_a_server_that_exits_at_start_is_one_line_with_its_error(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\necho 'RuntimeError: no such model' >&2\nexit 1\n")
    fake_python.chmod(0o755)
    server = server_module.VLLMServer(ServerSettings(model="m", startup_timeout_s=30), python=str(fake_python))
    with pytest.raises(UserError, match="exited at start: .*RuntimeError: no such model"):
        server.start()


def test_the_embedded_default_runs_on_vllm_where_it_is_installed_unless_switched_off(monkeypatch, tmp_path):
    from agentdata.engines import load_engine
    from agentdata.engines.hf import HFEngine
    from agentdata.rl.rollout_engines import plan_rollouts

    python = tmp_path / "python"
    python.write_text("")
    monkeypatch.setenv(server_module.PYTHON_ENV, str(python))
    monkeypatch.setenv(server_module.SWITCH_ENV, "on")
    engine = load_engine("smollm2")
    assert isinstance(engine, ManagedVLLMEngine) and engine.spec == "smollm2"  # nothing started until used
    assert isinstance(load_engine("smollm2-tir").inner, ManagedVLLMEngine)
    assert isinstance(load_engine("smollm2", max_batch_size=4), HFEngine)  # the transformers engine's options
    assert plan_rollouts("auto", "").kind == "file-push" and plan_rollouts("no", "").kind == "policy"
    monkeypatch.setenv(server_module.SWITCH_ENV, "off")
    assert isinstance(load_engine("smollm2"), HFEngine)
    assert plan_rollouts("auto", "").kind == "policy" and plan_rollouts("yes", "").kind == "file-push"


def test_a_long_tmpdir_does_not_reach_vllms_sockets(monkeypatch, tmp_path):
    """vLLM puts its IPC sockets in the temp dir; a path past 107 characters killed the server at start (a test's
    TMPDIR did)."""
    import tempfile

    long_dir = tmp_path / ("d" * 80)
    long_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    assert ServerSettings(model="m").environment()["VLLM_RPC_BASE_PATH"] == "/tmp"
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert "VLLM_RPC_BASE_PATH" not in ServerSettings(model="m").environment()


def test_auto_names_a_model_dir_on_vllm_where_it_is_installed_else_on_transformers(tmp_path, monkeypatch):
    """`auto:DIR` (the quickstart's trained model): vLLM's managed server where vLLM is installed and not
    switched off, the transformers engine otherwise or with any option; the spec it records is the one it chose."""
    from agentdata.engines import load_engine
    from agentdata.engines.hf import HFEngine

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    built = []
    monkeypatch.setattr(HFEngine, "__init__", lambda self, target, spec=None, **options: built.append(options))
    monkeypatch.setattr(server_module, "find_vllm_python", lambda: "/opt/vllm/bin/python")
    monkeypatch.delenv(server_module.SWITCH_ENV, raising=False)
    on_vllm = load_engine(f"auto:{model_dir}")
    assert isinstance(on_vllm, ManagedVLLMEngine) and on_vllm.spec == f"vllm:{model_dir}"
    assert not on_vllm.server.alive()  # built, not started: the first request starts it
    assert isinstance(load_engine(f"auto:{model_dir}", device="cpu"), HFEngine) and built == [{"device": "cpu"}]
    monkeypatch.setenv(server_module.SWITCH_ENV, "off")
    assert isinstance(load_engine(f"auto:{model_dir}"), HFEngine)
    from agentdata.engines.spec import check_engine

    check_engine(f"auto:{model_dir}", {})
    with pytest.raises(UserError, match="missing"):  # checked before any work, as hf: and vllm: are
        check_engine(f"auto:{tmp_path / 'missing'}", {})
