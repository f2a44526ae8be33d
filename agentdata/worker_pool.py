"""Worker processes that answer one JSON line per request, within a deadline, and the pool that reuses them.

Why processes: some work can run for ever (sympy on `9^{9^{9^9}}`, a user tool that spins), and a stuck
thread cannot be stopped; a process can be killed. Workers are plain subprocesses (not `multiprocessing`),
so a pool works from threads, from daemonic worker processes, and after `fork` (a forked child drops its
parent's workers and starts its own on first use). A worker that passes its deadline, dies or answers out
of step is killed and never reused; the next request starts a fresh one.

The math-verify pool (`verify/workers.py`) and user tools (`tools/function.py`) both run on this.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentdata import processes


class WorkerGone(RuntimeError):
    """The worker died, could not start or passed its deadline; it is replaced on the next request."""


class WorkerTimedOut(WorkerGone, TimeoutError):
    """The worker gave no answer within the request's deadline (it is killed)."""


class WorkerDidNotStart(RuntimeError):
    """A new worker failed its start (a broken install, a tool that does not import): not the request's fault."""


class LineWorker:
    """One subprocess speaking one JSON line per request and one per answer."""

    def __init__(self, command: list[str]):
        """The worker and what it starts are a session of their own (agentdata/processes.py), killed together;
        a Ctrl-C reaches agentdata, which ends them."""
        self.process = processes.popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True
        )

    def exchange(self, message: dict[str, Any], timeout: float) -> Any:
        """Send `message`, return the answer read within `timeout` seconds."""
        self.send(message)
        return self.receive(timeout)

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.process.stdin.write((json.dumps(message, default=str) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError as error:
            raise WorkerGone(f"its process is gone ({error})") from None

    def receive(self, timeout: float) -> Any:
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise WorkerTimedOut(f"no answer within {timeout:g} s")
        line = self.process.stdout.readline()
        if not line:
            raise WorkerGone(f"its process ended (exit code {self.process.wait()})")
        return json.loads(line)

    def kill(self) -> None:
        processes.kill(self.process.pid)  # the worker and anything it started
        self.process.wait()
        self.close_pipes()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class WorkerPool:
    """Idle workers kept for the next request; `start` makes a new one when none is idle."""

    def __init__(self, start: Callable[[], LineWorker]):
        self.start = start
        self._lock = threading.Lock()
        self._idle: list[LineWorker] = []
        self._all: set[LineWorker] = set()

    @property
    def workers(self) -> set[LineWorker]:
        """Every live worker, idle or busy."""
        with self._lock:
            return set(self._all)

    @contextmanager
    def borrowed(self) -> Iterator[LineWorker]:
        """A worker for one request: back to the idle ones after, killed if the request raised (stopped
        mid-answer, its pipe would be out of step)."""
        worker = self._take()
        try:
            yield worker
        except BaseException:
            self._discard(worker)
            raise
        with self._lock:
            self._idle.append(worker)

    def warm_up(self, workers: int) -> None:
        """Start workers now, up to `workers` in all, so the first requests do not pay the start."""
        for _ in range(workers - len(self.workers)):
            worker = self.start()
            with self._lock:
                self._all.add(worker)
                self._idle.append(worker)

    def close(self) -> None:
        """Kill every worker (a later request starts a fresh one)."""
        with self._lock:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()

    def forget(self) -> None:
        """In a forked child: the parent's workers are not ours to use or kill; close our copies of their pipes."""
        for worker in self._all:
            worker.close_pipes()
        self._all, self._idle, self._lock = set(), [], threading.Lock()

    def _take(self) -> LineWorker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        worker = self.start()
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: LineWorker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
