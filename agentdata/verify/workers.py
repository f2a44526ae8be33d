"""A small pool of math-verify worker processes with a hard deadline per check.

Why processes: sympy can run for ever on some inputs (`9^{9^{9^9}}`), math-verify's own
timeout uses `signal.alarm`, which only works in the main thread, and a stuck thread cannot
be stopped. A separate process can be killed. Workers are plain subprocesses (not
`multiprocessing`), so the pool works from threads, from daemonic worker processes, and
after `fork` (a forked child starts its own workers on first use).

A check that passes its deadline kills its worker and counts as "not equal"; the next
check starts a fresh worker.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading

STARTUP_TIMEOUT_S = 120.0  # importing sympy on a loaded machine can take many seconds


class WorkerGone(RuntimeError):
    """The worker died or passed its deadline; it must be replaced."""


class _Worker:
    def __init__(self, memory_mb: int):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentdata.verify._worker", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        if self._read_line(STARTUP_TIMEOUT_S) != "ready":
            self.kill()
            raise WorkerGone("math-verify worker did not start")

    def check(self, gold: str, answer: str, timeout_s: float) -> bool:
        request = json.dumps({"gold": gold, "answer": answer}) + "\n"
        try:
            self.process.stdin.write(request.encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise WorkerGone(str(error)) from None
        return self._read_line(timeout_s) == "1"

    def _read_line(self, timeout_s: float) -> str:
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                raise WorkerGone(f"no verdict within {timeout_s} s")
        line = self.process.stdout.readline()
        if not line:
            raise WorkerGone("worker exited")
        return line.decode("utf-8").strip()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.close_pipes()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class VerifierPool:
    """Up to `size` workers shared by all threads; each check borrows one."""

    def __init__(self, size: int, memory_mb: int = 4096):
        self.size = size
        self.memory_mb = memory_mb
        self.timeouts = 0
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()

    def check(self, gold: str, answer: str, timeout_s: float) -> bool:
        """math-verify's verdict, or False when it takes longer than timeout_s."""
        with self._slots:
            worker = self._take()
            try:
                verdict = worker.check(gold, answer, timeout_s)
            except WorkerGone:
                self._discard(worker)
                with self._lock:
                    self.timeouts += 1
                return False
            except BaseException:
                self._discard(worker)  # a half-answered request would desync the pipe
                raise
            with self._lock:
                self._idle.append(worker)
            return verdict

    def warm_up(self, workers: int = 1) -> None:
        """Start workers now so the first checks do not pay the sympy import."""
        for _ in range(min(workers, self.size) - len(self._all)):
            worker = _Worker(self.memory_mb)
            with self._lock:
                self._all.add(worker)
                self._idle.append(worker)

    def close(self) -> None:
        with self._lock:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()

    def forget(self) -> None:
        """In a forked child: drop the parent's workers without killing them."""
        for worker in self._all:
            worker.close_pipes()
        self._all, self._idle = set(), []

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        worker = _Worker(self.memory_mb)
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)


_POOL: VerifierPool | None = None
_POOL_LOCK = threading.Lock()


def default_pool_size() -> int:
    return int(os.environ.get("AGENTDATA_VERIFY_WORKERS", 0)) or min(4, os.cpu_count() or 1)


def shared_pool() -> VerifierPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = VerifierPool(default_pool_size())
        return _POOL


def _forget_after_fork() -> None:
    global _POOL, _POOL_LOCK
    _POOL_LOCK = threading.Lock()  # the parent may have held it while forking
    if _POOL is not None:
        _POOL.forget()
        _POOL = None


def _close_at_exit() -> None:
    if _POOL is not None:
        _POOL.close()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(_close_at_exit)
