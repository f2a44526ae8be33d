"""The host side of the local sandbox: the template process, warm executors and sessions.

Everything here runs on one asyncio loop (the Sandbox's own thread). Calls wait in a
queue for one of `workers` slots; a stateless call takes a pre-forked executor and
throws it away afterwards; a session keeps its executor between calls.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from agentdata.sandbox.config import MAX_EXECUTORS, SandboxConfig
from agentdata.sandbox.result import ExecResult
from agentdata.sandbox.worker import encode_frame

logger = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
UID_BASE = 100_000_000  # far above any real account; each template owns MAX_EXECUTORS uids from here
TEMPLATE_START_TIMEOUT_S = 120.0
EXIT_WAIT_S = 3.0
DRAIN_WAIT_S = 1.0  # an exited executor's last words are already in our socket buffer; this is ample


class SandboxUnavailable(RuntimeError):
    """The sandbox's own machinery failed (not the code it ran)."""


@dataclass
class _Executor:
    pid: int
    uid: int
    pidfd: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    exited: asyncio.Future
    template: "_Template"
    busy: bool = False  # a call is reading its reply: the stream and the uid must stay ours until it is done
    retired: bool = False

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


async def _read_frame(reader: asyncio.StreamReader) -> dict | None:
    try:
        header = await reader.readexactly(4)
        body = await reader.readexactly(int.from_bytes(header, "big"))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return json.loads(body)


def _template_environment() -> dict[str, str]:
    """The template starts with almost nothing, so the host's secrets never reach sandboxed code."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class _Template:
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
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(WORKER_SCRIPT), str(child_end.fileno()), settings],
            pass_fds=[child_end.fileno()], env=_template_environment(), cwd="/",
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
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
            self.exits[message["pid"]] = asyncio.get_running_loop().create_future()
            future = self.spawns.pop(message["tag"], None)
            if future is not None and not future.done():
                future.set_result((message, fds))
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

    async def spawn(self, uid: int) -> tuple[dict, list[int]]:
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
        if not self.dead:
            self._die("closed")
        self.ctrl.close()


def _death_result(code: int, started: float, note: str) -> ExecResult:
    """The executor process ended in the middle of a call (os._exit, a signal, a CPU limit)."""
    duration = time.perf_counter() - started
    if code == -signal.SIGXCPU:
        return ExecResult("timeout", "", f"TimeoutError: the call used up its CPU time{note}\n", code, duration)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return ExecResult("killed", "", f"the process was killed by {name}{note}\n", code, duration)
    return ExecResult("ok" if code == 0 else "error", "", f"the process exited with code {code}{note}\n", code, duration)


class Pool:
    """Runs code in warm, isolated executors; one instance per Sandbox, on its loop."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.template: _Template | None = None
        self.slots = asyncio.Semaphore(config.workers)
        self.spares: asyncio.Queue[_Executor] = asyncio.Queue()
        self.spawning = 0
        self.sessions: OrderedDict[str, _Executor] = OrderedDict()
        self.session_locks: dict[str, asyncio.Lock] = {}
        self.free_uids: list[int] = []
        self.warnings: list[str] = []
        self.closed = False
        self.background: set[asyncio.Task] = set()

    # -- template and executors
    async def start(self) -> None:
        template = _Template(self.config)
        await template.start()
        self.template = template
        block = UID_BASE + template.info["pid"] * MAX_EXECUTORS
        self.free_uids = list(range(block + MAX_EXECUTORS - 1, block - 1, -1))
        self.spares = asyncio.Queue()
        self.spawning = 0
        for warning in template.info["warnings"]:
            if warning not in self.warnings:
                self.warnings.append(warning)
        self._refill()

    @property
    def isolation(self) -> dict:
        info = self.template.info if self.template else {}
        return {"own_uid": info.get("own_uid", False), "private_tmp": info.get("private_tmp", False),
                "warnings": list(self.warnings)}

    async def _ensure_template(self) -> _Template:
        if self.template is None or self.template.dead:
            logger.warning("sandbox template is gone; starting a new one (open sessions are lost)")
            self.sessions.clear()
            await self.start()
        return self.template

    async def _spawn(self) -> _Executor:
        template = await self._ensure_template()
        uid = self.free_uids.pop()
        try:
            message, fds = await template.spawn(uid)
        except BaseException:
            self.free_uids.append(uid)
            raise
        sock = socket.socket(fileno=fds[0])
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        exited = template.exits[message["pid"]]
        executor = _Executor(message["pid"], uid, fds[1], reader, writer, exited, template)
        exited.add_done_callback(lambda _: self._on_exit(executor))
        return executor

    def _on_exit(self, executor: _Executor) -> None:
        executor.close_pidfd()
        # The exit notice can overtake the executor's reply, which then still sits in our socket
        # buffer: a call in progress reads it first and retires the executor itself.
        if not executor.busy:
            self._retire(executor)

    def _retire(self, executor: _Executor) -> None:
        if executor.retired:
            return
        executor.retired = True
        executor.writer.close()
        if executor.template is self.template:
            self.free_uids.append(executor.uid)  # the next user of the uid kills any leftovers first

    def _refill(self) -> None:
        missing = self.config.prefork - self.spares.qsize() - self.spawning
        for _ in range(max(missing, 0)):
            self.spawning += 1
            task = asyncio.ensure_future(self._spawn_spare())
            self.background.add(task)
            task.add_done_callback(self.background.discard)

    async def _spawn_spare(self) -> None:
        try:
            self.spares.put_nowait(await self._spawn())
        except Exception as error:  # noqa: BLE001 -- a failed spare is retried on the next call
            logger.warning("could not fork a sandbox executor: %s", error)
        finally:
            self.spawning -= 1

    async def _take_executor(self) -> _Executor:
        while True:
            if self.spares.empty():
                executor = await self._spawn()
            else:
                executor = self.spares.get_nowait()
            self._refill()
            if executor.alive:
                return executor

    async def _kill(self, executor: _Executor) -> None:
        """Kill the executor and everything it started, and wait until they are gone."""
        executor.signal(signal.SIGKILL)
        template = self.template
        if template is not None and not template.dead:
            try:
                await template.kill_uid(executor.uid)
            except (asyncio.TimeoutError, SandboxUnavailable):
                pass
        try:
            await asyncio.wait_for(asyncio.shield(executor.exited), EXIT_WAIT_S)
        except asyncio.TimeoutError:
            logger.warning("sandbox executor %d did not exit after SIGKILL", executor.pid)

    # -- one call
    async def _await_reply(self, executor: _Executor, reply: asyncio.Future, timeout: float) -> bool:
        """True when the reply (a frame, or the end of the stream) came within `timeout`."""
        done, _ = await asyncio.wait({reply, executor.exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if reply in done:
            return True
        if executor.exited in done:
            await self._finish_reading(executor, reply)
            return True
        return False

    async def _finish_reading(self, executor: _Executor, reply: asyncio.Future) -> None:
        """The executor exited mid-call: read what it sent, up to the end of its stream.

        The stream ends by itself unless a process the code left behind still holds the
        executor's socket; such processes are killed (the uid is still ours: see `busy`).
        """
        done, _ = await asyncio.wait({reply}, timeout=DRAIN_WAIT_S)
        if not done:
            await self._kill(executor)
            done, _ = await asyncio.wait({reply}, timeout=DRAIN_WAIT_S)
        if not done:
            executor.writer.close()  # ends the stream on our side; the reader sees its end
            await asyncio.wait({reply}, timeout=EXIT_WAIT_S)

    async def _call(self, executor: _Executor, request: dict, timeout: float) -> ExecResult:
        started = time.perf_counter()
        executor.busy = True
        executor.writer.write(encode_frame(request))
        reply = asyncio.ensure_future(_read_frame(executor.reader))
        try:
            await executor.writer.drain()
            answered = await self._await_reply(executor, reply, timeout)
            if not answered:
                executor.signal(signal.SIGINT)  # a KeyboardInterrupt keeps the session's state
                answered = await self._await_reply(executor, reply, self.config.interrupt_grace_s)
            if not answered:
                await self._kill(executor)
                reply.cancel()
                return ExecResult("timeout", "", f"TimeoutError: the call ran past its {timeout:g} s limit "
                                  "and was killed\n", -signal.SIGKILL, time.perf_counter() - started)
            frame = reply.result() if reply.done() else None
            if not reply.done():  # the stream never ended (see _finish_reading): no answer came
                reply.cancel()
        except asyncio.CancelledError:
            reply.cancel()
            await asyncio.shield(self._kill(executor))
            raise
        except ConnectionError:
            frame = None
        finally:
            executor.busy = False
            if not executor.alive:
                self._retire(executor)
        if frame is None:
            try:
                code = await asyncio.wait_for(asyncio.shield(executor.exited), EXIT_WAIT_S)
            except asyncio.TimeoutError:
                await self._kill(executor)
                code = -signal.SIGKILL
            note = "" if request.get("once") else "; the session's state is lost"
            return _death_result(code, started, note)
        return ExecResult.from_dict(frame)

    @staticmethod
    def _request(code: str, timeout: float, stdin: str | None, files: dict | None, memory_mb: int | None,
                 display_last: bool, once: bool) -> dict:
        encoded = {}
        for name, content in (files or {}).items():
            data = content.encode() if isinstance(content, str) else bytes(content)
            encoded[name] = base64.b64encode(data).decode()
        return {"op": "run", "code": code, "timeout": timeout, "stdin": stdin or "", "files": encoded,
                "memory_mb": memory_mb, "display_last": display_last, "once": once}

    async def run(self, code: str, session_id: str | None = None, timeout: float | None = None,
                  stdin: str | None = None, files: dict | None = None, memory_mb: int | None = None,
                  display_last: bool = True) -> ExecResult:
        if self.closed:
            raise SandboxUnavailable("the sandbox is closed")
        timeout = float(timeout or self.config.timeout_s)
        request = self._request(code, timeout, stdin, files, memory_mb, display_last, session_id is None)
        if session_id is None:
            async with self.slots:
                executor = await self._take_executor()
                return await self._call(executor, request, timeout)
        lock = self.session_locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            async with self.slots:
                executor = await self._session_executor(session_id)
                result = await self._call(executor, request, timeout)
                if not executor.alive or result.exit_code == -signal.SIGKILL and result.status == "timeout":
                    self.sessions.pop(session_id, None)
                return result

    async def _session_executor(self, session_id: str) -> _Executor:
        executor = self.sessions.get(session_id)
        if executor is not None and executor.alive:
            self.sessions.move_to_end(session_id)
            return executor
        await self._evict_if_full()
        executor = await self._take_executor()
        self.sessions[session_id] = executor
        return executor

    async def _evict_if_full(self) -> None:
        while len(self.sessions) >= self.config.max_sessions:
            idle = [sid for sid in self.sessions if not self.session_locks[sid].locked()]
            if not idle:
                return
            logger.info("closing idle sandbox session %s: more than %d sessions", idle[0], self.config.max_sessions)
            await self._close_executor(self.sessions.pop(idle[0]))
            self.session_locks.pop(idle[0], None)

    async def _close_executor(self, executor: _Executor) -> None:
        if executor.alive:
            await self._kill(executor)

    async def close_session(self, session_id: str) -> None:
        lock = self.session_locks.get(session_id)
        if lock is None:
            return
        async with lock:
            executor = self.sessions.pop(session_id, None)
            if executor is not None:
                await self._close_executor(executor)
        self.session_locks.pop(session_id, None)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in list(self.background):
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        executors = list(self.sessions.values())
        while not self.spares.empty():
            executors.append(self.spares.get_nowait())
        self.sessions.clear()
        await asyncio.gather(*(self._close_executor(e) for e in executors), return_exceptions=True)
        if self.template is not None:
            await self.template.close()
