"""Every process agentdata starts is started and stopped here, so none outlives agentdata, however it ends.

- `popen` / `open_process` start a child in a session of its own (`start_new_session`: no `preexec_fn`,
  which Python documents as unsafe while threads run) and register the session with this process's watcher.
- `stop(pid)` ends the child's whole session and what descends from it: SIGTERM, then SIGKILL after a grace
  period. It works after the child itself died too: what it left behind (vLLM's `VLLM::EngineCore`, a
  harness's grandchild) is still in its session.
- The watcher (agentdata/process_watcher.py, Linux) is a small process started with the first child. It
  holds the read end of a pipe only this process writes to, and when the pipe ends (this process exited,
  raised, was signalled or killed with -9) it SIGKILLs every registered session, every process started with
  this process's mark in its environment (`AGENTDATA_SUPERVISOR`, set in this process's own environment, so
  children that libraries start for agentdata — the mcp SDK's server, a local Ray — carry it too), and
  their descendants. At a normal exit this process ends the pipe itself and waits for that sweep, so nothing
  is left running when agentdata's exit status is known.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentdata.process_watcher import doomed

MARK_ENV = "AGENTDATA_SUPERVISOR"
WATCHER_SCRIPT = Path(__file__).with_name("process_watcher.py")
SWEEP_WAIT_S = 15.0  # at exit: how long to wait for the watcher's sweep (it gives up after SWEEP_S itself)


class _Watcher:
    """This process's watcher: its pipe, and the mark its children carry."""

    def __init__(self) -> None:
        self.mark = f"{os.getpid()}-{secrets.token_hex(8)}"
        read_end, self.write_end = os.pipe()  # not inheritable: no child of ours holds the pipe open
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(WATCHER_SCRIPT), str(read_end), str(os.getpid()), self.entry()],
            pass_fds=[read_end],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # never holds agentdata's output open (a reader waiting for EOF)
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C or a signal to agentdata's group is not for it
        )
        os.close(read_end)
        os.environ[MARK_ENV] = self.mark  # after the watcher started: it must not carry the mark itself
        self.owner = os.getpid()

    def entry(self) -> str:
        return f"{MARK_ENV}={self.mark}"

    def send(self, line: str) -> None:
        try:
            os.write(self.write_end, line.encode() + b"\n")  # one short write: atomic on a pipe
        except OSError:
            pass  # the watcher is gone (killed by hand): stop() and the exit sweep still work

    def finish(self) -> None:
        """End the pipe and wait for the watcher's sweep (at exit, in the process that started it)."""
        if os.getpid() != self.owner:
            return
        try:
            os.close(self.write_end)
        except OSError:
            pass
        try:
            self.process.wait(timeout=SWEEP_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


_lock = threading.Lock()
_watcher: _Watcher | None = None


def watching() -> bool:
    """Whether this platform has the watcher (it reads /proc)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def supervise() -> str | None:
    """Start this process's watcher if it has none yet; returns its mark's `NAME=VALUE` (None without one).
    Call it before a library starts a child for agentdata, so the child inherits the mark."""
    global _watcher
    if not watching():
        return None
    with _lock:
        if _watcher is None:
            _watcher = _Watcher()
            atexit.register(_watcher.finish)
        return _watcher.entry()


def _forget_after_fork() -> None:
    """A forked child is not the watcher's owner: it closes the pipe (so agentdata's death is still seen)
    and starts a watcher of its own if it starts children."""
    global _watcher, _lock
    if _watcher is not None:
        try:
            os.close(_watcher.write_end)
        except OSError:
            pass
    _watcher, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _marked(env: dict[str, str] | None) -> dict[str, str] | None:
    entry = supervise()
    if entry is None or env is None:
        return env  # None: the child inherits os.environ, which holds the mark
    name, _, value = entry.partition("=")
    return {**env, name: value}


def register(pid: int) -> None:
    if _watcher is not None:
        _watcher.send(f"+{pid}")


def unregister(pid: int) -> None:
    if _watcher is not None:
        _watcher.send(f"-{pid}")


def popen(argv: list[str], **options: Any) -> subprocess.Popen:
    """`subprocess.Popen` for a supervised child: its own session, registered, the mark in its environment."""
    if "preexec_fn" in options:
        raise ValueError("preexec_fn is unsafe while threads run: processes.popen starts children without it")
    options["env"] = _marked(options.get("env"))
    process = subprocess.Popen(argv, start_new_session=True, **options)
    register(process.pid)
    return process


async def open_process(argv: list[str], **options: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec` for a supervised child (see `popen`)."""
    options["env"] = _marked(options.get("env"))
    process = await asyncio.create_subprocess_exec(*argv, start_new_session=True, **options)
    register(process.pid)
    return process


def session(pid: int) -> set[int]:
    """The live processes of the session `pid` started, and their descendants."""
    return doomed({pid}) if watching() else _group(pid)


def _group(pid: int) -> set[int]:  # where there is no /proc: the process group, as far as it can be named
    try:
        os.killpg(pid, 0)
    except OSError:
        return set()
    return {pid}


def _signal_all(pid: int, pids: set[int], number: int) -> None:
    if not watching():
        try:
            os.killpg(pid, number)
        except OSError:
            pass
        return
    for member in pids:
        try:
            os.kill(member, number)
        except OSError:
            pass


def stop(pid: int, grace_s: float = 5.0, wait_s: float = 10.0) -> None:
    """End the session child `pid` started, whether or not the child itself still runs: SIGTERM to every
    process of it, SIGKILL to what is left after `grace_s` (at once with `grace_s=0`), then wait up to
    `wait_s` for them to go. The session is then forgotten by the watcher."""
    if grace_s > 0:
        _signal_all(pid, session(pid), signal.SIGTERM)
        _wait_gone(pid, grace_s)
    _signal_all(pid, session(pid), signal.SIGKILL)
    _wait_gone(pid, wait_s)
    unregister(pid)


def kill(pid: int) -> None:
    """SIGKILL the session child `pid` started, without waiting (the caller reaps its own child)."""
    _signal_all(pid, session(pid), signal.SIGKILL)
    unregister(pid)


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while session(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
