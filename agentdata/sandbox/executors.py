"""The host side of the local sandbox: warm executors, sessions and calls.

Everything here runs on one asyncio loop (the Sandbox's own thread). Calls wait in a
queue for one of `workers` slots; a stateless call takes a pre-forked executor and
throws it away afterwards; a session keeps its executor between calls. The template
process that forks the executors is reached through `template.TemplateChannel`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import signal
import socket
import time
from collections import OrderedDict

from agentdata.sandbox.base import SandboxUnavailable
from agentdata.sandbox.channel import EXIT_WAIT_S, ExecutorHandle, TemplateChannel
from agentdata.sandbox.config import MAX_EXECUTORS, SandboxConfig
from agentdata.sandbox.result import ExecResult
from agentdata.sandbox.worker_framing import encode_frame

__all__ = ["Pool", "UID_BASE"]

logger = logging.getLogger(__name__)

UID_BASE = 100_000_000  # far above any real account; each template owns MAX_EXECUTORS uids from here
DRAIN_WAIT_S = 1.0  # an exited executor's last words are already in our socket buffer; this is ample


async def _read_frame(reader: asyncio.StreamReader) -> dict | None:
    try:
        header = await reader.readexactly(4)
        body = await reader.readexactly(int.from_bytes(header, "big"))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return json.loads(body)


def _death_result(code: int, started: float, note: str) -> ExecResult:
    """The executor process ended in the middle of a call (os._exit, a signal, a CPU limit)."""
    duration = time.perf_counter() - started
    if code == -signal.SIGXCPU:
        return ExecResult("timeout", "", f"TimeoutError: the call used up its CPU time{note}\n", code, duration)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return ExecResult("killed", "", f"the process was killed by {name}{note}\n", code, duration)
    return ExecResult(
        "ok" if code == 0 else "error", "", f"the process exited with code {code}{note}\n", code, duration
    )


class Pool:
    """Runs code in warm, isolated executors; one instance per Sandbox, on its loop."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.template: TemplateChannel | None = None
        self.slots = asyncio.Semaphore(config.workers)
        self.spares: asyncio.Queue[ExecutorHandle] = asyncio.Queue()
        self.spawning = 0
        self.sessions: OrderedDict[str, ExecutorHandle] = OrderedDict()
        self.session_locks: dict[str, asyncio.Lock] = {}
        self.free_uids: list[int] = []
        self.warnings: list[str] = []
        self.closed = False
        self.background: set[asyncio.Task] = set()

    # -- template and executors
    async def start(self) -> None:
        template = TemplateChannel(self.config)
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
        return {
            "own_uid": info.get("own_uid", False),
            "private_tmp": info.get("private_tmp", False),
            "private_view": info.get("private_view", False),
            "warnings": list(self.warnings),
        }

    async def _ensure_template(self) -> TemplateChannel:
        if self.template is None or self.template.dead:
            logger.warning("sandbox template is gone; starting a new one (open sessions are lost)")
            self.sessions.clear()
            await self.start()
        return self.template

    async def _spawn(self) -> ExecutorHandle:
        template = await self._ensure_template()
        uid = self.free_uids.pop()
        try:
            message, fds, exited = await template.spawn(uid)
        except BaseException:
            self.free_uids.append(uid)
            raise
        sock = socket.socket(fileno=fds[0])
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        executor = ExecutorHandle(message["pid"], uid, fds[1], reader, writer, exited, template)
        exited.add_done_callback(lambda _: self._on_exit(executor))
        return executor

    def _on_exit(self, executor: ExecutorHandle) -> None:
        executor.close_pidfd()
        # The exit notice can overtake the executor's reply, which then still sits in our socket
        # buffer: a call in progress reads it first and retires the executor itself.
        if not executor.busy:
            self._retire(executor)

    def _retire(self, executor: ExecutorHandle) -> None:
        if executor.retired:
            return
        executor.retired = True
        executor.writer.close()
        self._release_uid(executor)

    def _release_uid(self, executor: ExecutorHandle) -> None:
        """The uid goes back once the executor is gone and no killer of it is still on its way: a late killer
        would kill the uid's next executor."""
        if executor.retired and not executor.killing and not executor.uid_released:
            executor.uid_released = True
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

    async def _take_executor(self) -> ExecutorHandle:
        while True:
            if self.spares.empty():
                executor = await self._spawn()
            else:
                executor = self.spares.get_nowait()
            self._refill()
            if executor.alive:
                return executor

    async def _kill(self, executor: ExecutorHandle) -> None:
        """Kill the executor and everything it started, and wait until they are gone."""
        executor.signal(signal.SIGKILL)
        template = self.template
        if template is not None and not template.dead:
            executor.killing = True
            try:
                await template.kill_uid(executor.uid)
            except (asyncio.TimeoutError, SandboxUnavailable):
                pass
            finally:
                executor.killing = False
                self._release_uid(executor)
        try:
            await asyncio.wait_for(asyncio.shield(executor.exited), EXIT_WAIT_S)
        except asyncio.TimeoutError:
            logger.warning("sandbox executor %d did not exit after SIGKILL", executor.pid)

    # -- one call
    async def _await_reply(self, executor: ExecutorHandle, reply: asyncio.Future, timeout: float) -> bool:
        """True when the reply (a frame, or the end of the stream) came within `timeout`."""
        done, _ = await asyncio.wait({reply, executor.exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if reply in done:
            return True
        if executor.exited in done:
            await self._finish_reading(executor, reply)
            return True
        return False

    async def _finish_reading(self, executor: ExecutorHandle, reply: asyncio.Future) -> None:
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

    async def _call(self, executor: ExecutorHandle, request: dict, timeout: float) -> ExecResult:
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
                return ExecResult(
                    "timeout",
                    "",
                    f"TimeoutError: the call ran past its {timeout:g} s limit and was killed\n",
                    -signal.SIGKILL,
                    time.perf_counter() - started,
                )
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
    def _request(
        code: str,
        timeout: float,
        stdin: str | None,
        files: dict | None,
        memory_mb: int | None,
        display_last: bool,
        once: bool,
    ) -> dict:
        encoded = {}
        for name, content in (files or {}).items():
            data = content.encode() if isinstance(content, str) else bytes(content)
            encoded[name] = base64.b64encode(data).decode()
        return {
            "op": "run",
            "code": code,
            "timeout": timeout,
            "stdin": stdin or "",
            "files": encoded,
            "memory_mb": memory_mb,
            "display_last": display_last,
            "once": once,
        }

    async def run(
        self,
        code: str,
        session_id: str | None = None,
        timeout: float | None = None,
        stdin: str | None = None,
        files: dict | None = None,
        memory_mb: int | None = None,
        display_last: bool = True,
    ) -> ExecResult:
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

    async def _session_executor(self, session_id: str) -> ExecutorHandle:
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

    async def _close_executor(self, executor: ExecutorHandle) -> None:
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
