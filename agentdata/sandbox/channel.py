"""The host's control channel to the sandbox's template process, and its executors' handles.

The template (worker.py, run as its own script) forks executors on request; it answers
over a SOCK_SEQPACKET socket with one JSON message per packet, passing each executor's
socket and pidfd with SCM_RIGHTS.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agentdata import processes
from agentdata.sandbox.base import SandboxUnavailable
from agentdata.sandbox.config import SandboxConfig

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
TEMPLATE_START_TIMEOUT_S = 120.0
EXIT_WAIT_S = 3.0


@dataclass
class ExecutorHandle:
    """The host's end of one executor: its socket, its pidfd and the future of its exit code."""

    pid: int
    uid: int
    pidfd: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    exited: asyncio.Future
    template: TemplateChannel
    busy: bool = False  # a call is reading its reply: the stream and the uid must stay ours until it is done
    retired: bool = False
    killing: bool = False  # a killer of its uid is on its way: the uid stays ours until it is done
    uid_released: bool = False

    @property
    def alive(self) -> bool:
        return not self.exited.done()

    def signal(self, number: int) -> None:
        if self.alive:
            try:
                signal.pidfd_send_signal(self.pidfd, number)
            except ProcessLookupError:
                pass

    def close_pidfd(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def _template_environment() -> dict[str, str]:
    """The template starts with almost nothing, so the host's secrets never reach sandboxed code."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class TemplateChannel:
    """The control channel to one template process."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.process: subprocess.Popen | None = None
        self.ctrl: socket.socket | None = None
        self.ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self.spawns: dict[str, asyncio.Future] = {}
        self.kills: dict[int, asyncio.Future] = {}
        self.exits: dict[int, asyncio.Future] = {}
        self.tags = itertools.count()
        self.dead = False
        self.info: dict = {}

    async def start(self) -> None:
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        settings = json.dumps(self.config.worker_settings())
        self.process = processes.popen(  # supervised: it and its killer go with agentdata, even on kill -9
            [sys.executable, "-I", str(WORKER_SCRIPT), str(child_end.fileno()), settings],
            pass_fds=[child_end.fileno()],
            env=_template_environment(),
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        child_end.close()
        host_end.setblocking(False)
        self.ctrl = host_end
        asyncio.get_running_loop().add_reader(host_end.fileno(), self._on_readable)
        self.info = await asyncio.wait_for(self.ready, TEMPLATE_START_TIMEOUT_S)

    def _on_readable(self) -> None:
        while not self.dead:
            try:
                data, fds, _, _ = socket.recv_fds(self.ctrl, 1 << 16, 2)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds = b"", []
            if not data:
                self._die("the sandbox template process exited")
                return
            self._dispatch(json.loads(data), fds)

    def _dispatch(self, message: dict, fds: list[int]) -> None:
        op = message["op"]
        if op == "ready":
            self.ready.set_result(message)
        elif op == "spawned":
            # Handed over with the spawn: its exit notice may come in this same read, before the caller resumes.
            exited = self.exits[message["pid"]] = asyncio.get_running_loop().create_future()
            future = self.spawns.pop(message["tag"], None)
            if future is not None and not future.done():
                future.set_result((message, fds, exited))
            else:
                for fd in fds:
                    os.close(fd)
        elif op == "exited":
            future = self.exits.pop(message["pid"], None)
            if future is not None and not future.done():
                future.set_result(message["code"])
        elif op == "killed":
            future = self.kills.pop(message["uid"], None)
            if future is not None and not future.done():
                future.set_result(None)

    def _die(self, reason: str) -> None:
        self.dead = True
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.ctrl.fileno())
        error = SandboxUnavailable(reason)
        if not self.ready.done():
            self.ready.set_exception(error)
        for future in [*self.spawns.values(), *self.kills.values()]:
            if not future.done():
                future.set_exception(error)
        for future in self.exits.values():
            if not future.done():
                future.set_result(-signal.SIGKILL)  # executors die with their template
        self.spawns.clear(), self.kills.clear(), self.exits.clear()

    def _send(self, message: dict) -> None:
        if self.dead:
            raise SandboxUnavailable("the sandbox template process is gone")
        self.ctrl.send(json.dumps(message).encode())

    async def spawn(self, uid: int) -> tuple[dict, list[int], asyncio.Future]:
        """Fork an executor of `uid`: its message, its socket and pidfd, and the future of its exit code."""
        tag = str(next(self.tags))
        future = asyncio.get_running_loop().create_future()
        self.spawns[tag] = future
        self._send({"op": "spawn", "uid": uid, "tag": tag})
        return await future

    async def kill_uid(self, uid: int) -> None:
        future = self.kills.get(uid) or asyncio.get_running_loop().create_future()
        self.kills[uid] = future
        self._send({"op": "killuid", "uid": uid})
        await asyncio.wait_for(future, EXIT_WAIT_S)

    async def close(self) -> None:
        if not self.dead:
            try:
                self._send({"op": "exit"})
            except OSError:
                pass
        if self.process is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(self.process.wait), 5)
            except asyncio.TimeoutError:
                self.process.kill()
                await asyncio.to_thread(self.process.wait)
            processes.kill(self.process.pid)  # what is left of its session (executors die with it)
        if not self.dead:
            self._die("closed")
        self.ctrl.close()
