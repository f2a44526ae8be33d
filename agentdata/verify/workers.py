"""A small pool of math-verify worker processes with a hard deadline per check.

Why processes: sympy can run for ever on some inputs (`9^{9^{9^9}}`), math-verify's own
timeout uses `signal.alarm`, which only works in the main thread, and a stuck thread cannot
be stopped. A separate process can be killed (`agentdata.worker_pool`, which user tools share).

A check that passes its deadline kills its worker and counts as "not equal"; the next
check starts a fresh worker.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from agentdata.worker_pool import LineWorker, WorkerDidNotStart, WorkerGone, WorkerPool

STARTUP_TIMEOUT_S = 120.0  # importing sympy on a loaded machine can take many seconds

__all__ = ["VerifierPool", "WorkerGone", "default_pool_size", "shared_pool"]


def _start_worker(memory_mb: int) -> LineWorker:
    worker = LineWorker([sys.executable, "-m", "agentdata.verify._worker", str(memory_mb)])
    try:
        ready = worker.receive(STARTUP_TIMEOUT_S)
    except WorkerGone:
        ready = None
    if ready != "ready":
        worker.kill()
        raise WorkerDidNotStart("math-verify worker did not start")
    return worker


class VerifierPool:
    """Up to `size` workers shared by all threads; each check borrows one."""

    def __init__(self, size: int, memory_mb: int = 4096):
        self.size = size
        self.memory_mb = memory_mb
        self.timeouts = 0
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._workers = WorkerPool(lambda: _start_worker(memory_mb))

    def check(self, gold: str, answer: str, timeout_s: float) -> bool:
        """math-verify's verdict, or False when it takes longer than timeout_s."""
        with self._slots:
            try:
                with self._workers.borrowed() as worker:
                    return worker.exchange({"gold": gold, "answer": answer}, timeout_s) is True
            except WorkerGone:  # killed and dropped by the pool
                with self._lock:
                    self.timeouts += 1
                return False

    def warm_up(self, workers: int = 1) -> None:
        """Start workers now so the first checks do not pay the sympy import."""
        self._workers.warm_up(min(workers, self.size))

    def close(self) -> None:
        self._workers.close()

    def forget(self) -> None:
        """In a forked child: drop the parent's workers without killing them."""
        self._workers.forget()


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
