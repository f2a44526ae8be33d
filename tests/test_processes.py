"""Every process agentdata starts stops when agentdata stops, however it stops (agentdata/processes.py): after
`kill -9` of `agentdata collect` during a harness run, a managed vLLM run and an MCP tool call, nothing it started
is alive 5 s later; and when a child dies on its own (the vLLM server; an MCP call past its time) what it left
behind goes with it.

Each kill test records the processes collect started (its descendants, and the pids the children wrote) before
the kill, then polls, within a bounded deadline, until none of them runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agentdata import processes
from agentdata.engines import vllm_server as server_module
from agentdata.engines.vllm_server import ServerSettings

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).parent
HARNESS = f"{sys.executable} {TESTS / 'toy_harness.py'}"
GONE_WITHIN_S = 5.0
START_TIMEOUT_S = 180.0  # collect's start (imports, the sandbox) on a loaded machine

pytestmark = pytest.mark.skipif(not processes.watching(), reason="the watcher reads /proc (Linux)")


def running(pid: int) -> bool:
    """A live process (a killed one nobody has reaped yet is a zombie: not running)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def still_running(pids: set[int], within_s: float = GONE_WITHIN_S) -> set[int]:
    """The pids still running `within_s` seconds from now (polled; empty as soon as all are gone)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = {pid for pid in pids if running(pid)}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def pids_in(path: Path, count: int, process: subprocess.Popen) -> set[int]:
    """The `count` pids a child wrote to `path`, waited for while `process` (collect) runs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if path.exists() and len(path.read_text().split()) >= count:
            return set(map(int, path.read_text().split()))
        assert process.poll() is None, f"collect ended (exit {process.returncode}) before its child started"
        assert time.monotonic() < deadline, f"no {count} pids in {path} within {START_TIMEOUT_S:g} s"
        time.sleep(0.05)


def problems_file(tmp_path: Path, question: str = "What is 8+1?", answer: str = "9") -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps({"question": question, "answer": answer}) + "\n")
    return path


def collect_args(tmp_path: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "agentdata.cli.app", "collect", str(problems_file(tmp_path))] + [
        "--out",
        str(tmp_path / "run"),
        *options,
    ]


def kill_9_once_started(args: list[str], pid_file: Path, count: int, env: dict[str, str]) -> set[int]:
    """Start collect, wait for its child's `count` pids, kill -9 collect; returns what it had started."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    collecting = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = pids_in(pid_file, count, collecting)
        started |= {child.pid for child in psutil.Process(collecting.pid).children(recursive=True)}
    finally:
        collecting.send_signal(signal.SIGKILL)
        collecting.wait()
    return started


def test_a_supervised_child_gets_a_session_of_its_own_and_never_a_preexec_fn():
    child = processes.popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert os.getsid(child.pid) == child.pid != os.getsid(0)
        assert os.environ[processes.MARK_ENV]  # what libraries start for agentdata inherits the mark
    finally:
        processes.stop(child.pid, grace_s=0)
        child.wait()
    with pytest.raises(ValueError, match="preexec_fn"):
        processes.popen(["true"], preexec_fn=os.setsid)


def test_stop_ends_what_a_child_left_behind_after_it_died_itself(tmp_path):
    script = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']).pid)"
    )
    child = processes.popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    child.wait()  # the child is gone; what it started runs on in its session
    assert running(grandchild)
    processes.stop(child.pid, grace_s=1)
    assert not running(grandchild)


def test_kill_9_of_a_process_that_started_children_ends_them_all(tmp_path):
    script = (
        "import subprocess, sys, time\n"
        "from agentdata import processes\n"
        "child = processes.popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "plain = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])  # the mark only\n"
        "print(child.pid, plain.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True
    )
    try:
        started = set(map(int, parent.stdout.readline().split()))
        started |= {child.pid for child in psutil.Process(parent.pid).children(recursive=True)}  # the watcher too
    finally:
        parent.kill()
        parent.wait()
    assert len(started) == 3
    assert still_running(started) == set()


def test_kill_9_of_collect_during_a_harness_run_ends_the_harness_and_its_child(tmp_path):
    (tmp_path / "problems.jsonl").write_text(json.dumps({"question": "HANG: what is 8+1?", "answer": "9"}) + "\n")
    args = [sys.executable, "-m", "agentdata.cli.app", "collect", str(tmp_path / "problems.jsonl")]
    args += ["--teacher", f"{TESTS / 'calculating_engine.py'}:Calculating", "--harness", HARNESS]
    args += ["--out", str(tmp_path / "run")]
    pid_file = tmp_path / "pids"
    started = kill_9_once_started(args, pid_file, 2, {"TOY_PIDS": str(pid_file)})
    assert still_running(started) == set()  # the harness, its child, the sandbox, the watcher


def fake_vllm_python(tmp_path: Path) -> Path:
    """A 'python' that runs the stand-in whatever `-m` it is given (tests/vllm_api_server_standin.py)."""
    python = tmp_path / "vllm-python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {TESTS / "vllm_api_server_standin.py"} "$@"\n')
    python.chmod(0o755)
    return python


def test_kill_9_of_collect_during_a_managed_vllm_run_ends_the_server_and_its_engine_core(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    pid_file = tmp_path / "vllm-pids"
    env = {
        "AGENTDATA_VLLM_PYTHON": str(fake_vllm_python(tmp_path)),
        "VLLM_STANDIN_PIDS": str(pid_file),
        "VLLM_STANDIN_LATENCY": "600",  # a request in flight when collect is killed
    }
    started = kill_9_once_started(collect_args(tmp_path, "--teacher", f"vllm:{model}"), pid_file, 2, env)
    assert still_running(started) == set()


def test_a_vllm_server_that_died_on_its_own_leaves_no_engine_core_once_stopped(tmp_path, monkeypatch):
    pid_file = tmp_path / "vllm-pids"
    monkeypatch.setenv("VLLM_STANDIN_PIDS", str(pid_file))
    server = server_module.VLLMServer(
        ServerSettings(model="m", startup_timeout_s=120), python=str(fake_vllm_python(tmp_path))
    )
    server.start()
    try:
        server_pid, engine_core = map(int, pid_file.read_text().split())
        os.kill(server_pid, signal.SIGKILL)  # the server dies mid-run
        server.process.wait()
        assert running(engine_core)
    finally:
        server.stop()
    assert not running(engine_core)


MCP_SLOW = f"mcp:{sys.executable} {TESTS / 'mcp_slow_server.py'}"


def mcp_collect_args(tmp_path: Path, *options: str) -> list[str]:
    teacher = f"{TESTS / 'mcp_slow_server.py'}:CallsWait"
    return collect_args(tmp_path, "--teacher", teacher, "--protocol", "hermes", "--tool", MCP_SLOW, *options)


def test_kill_9_of_collect_during_an_mcp_call_ends_the_server_and_its_child(tmp_path):
    pytest.importorskip("mcp")
    pid_file = tmp_path / "mcp-pids"
    started = kill_9_once_started(mcp_collect_args(tmp_path), pid_file, 2, {"MCP_SLOW_PIDS": str(pid_file)})
    assert still_running(started) == set()


def test_an_mcp_call_past_its_time_leaves_no_server_nor_an_open_stdout_when_collect_exits(tmp_path):
    pytest.importorskip("mcp")
    pid_file = tmp_path / "mcp-pids"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_SLOW_PIDS": str(pid_file)}
    # capture_output waits for EOF on collect's stdout and stderr: a server left holding them would hang it
    done = subprocess.run(mcp_collect_args(tmp_path, "tool_timeout=1"), env=env, capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    server_and_child = set(map(int, pid_file.read_text().split()))
    assert len(server_and_child) == 2
    assert {pid for pid in server_and_child if running(pid)} == set()  # at collect's exit, not later
