"""Requests join the batch being generated between two of its steps; each result returns once it is done.

`batching.RequestBatcher` runs whole batches: a request that arrives while one runs waits for
its longest row. Here one worker thread runs while there is work. Before every step it takes the
waiting requests that share the running batch's sampling setting (while a request with another
setting waits, none: the batch drains and that one goes next), lets them join, runs one step,
and each row that finished is handed back to its caller's event loop at once. A caller that
went away (cancelled) leaves at the next step.

The model side is a `StepBatch` (hf_stream.RunningBatch behind ModelEngine): `admit(jobs)`,
`step()`, its size, and `fail_all`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from agentdata.engines.base import Generation, GenerationRequest, error_generation

CLOSED_BEFORE = "the engine was closed before this request ran"
CLOSED_DURING = "the engine was closed during generation"


@dataclass
class Job:
    """One request and the future its caller awaits, on the caller's event loop."""

    request: GenerationRequest
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop

    def deliver(self, generation: Generation) -> None:
        """Hand `generation` to the caller (from the worker thread); nothing if the caller's loop is gone."""
        try:
            self.loop.call_soon_threadsafe(_resolve, self.future, generation)
        except RuntimeError:  # the caller's event loop has closed: nobody waits
            pass

    def cancelled(self) -> bool:
        return self.future.done()  # a cancelled caller cancels the future it awaits


class StepBatch(Protocol):
    key: Hashable

    def __len__(self) -> int: ...
    def admit(self, jobs: list[Job]) -> None: ...
    def step(self) -> None: ...
    def fail_all(self, generation: Generation) -> None: ...
    def all_cancelled(self) -> bool: ...


def _resolve(future: asyncio.Future, generation: Generation) -> None:
    if not future.done():
        future.set_result(generation)


class StreamingBatcher:
    """One worker thread that lets waiting requests join `open_batch(key)`'s batch and steps it.

    `session()` wraps the worker's whole run (the model in eval mode, no gradients, stop checks
    between layers); `closing` is set when the engine closes: the worker stops within a step.
    """

    def __init__(
        self,
        open_batch: Callable[[Hashable], StepBatch],
        key_of: Callable[[GenerationRequest], Hashable],
        session: Callable[[], AbstractContextManager[Any]],
        closing: threading.Event,
        max_batch_size: int = 32,
    ):
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        self._open_batch, self._key_of, self._session, self._closing = open_batch, key_of, session, closing
        self.max_batch_size = max_batch_size
        self.batch_sizes: list[int] = []  # how many requests joined at each admission: batching at work
        self.active_s = 0.0  # wall time the worker generated
        self._inbox: deque[Job] = deque()
        self._lock = threading.Lock()  # the inbox and whether a worker runs
        self._model_lock = threading.Lock()  # held while the worker uses the model
        self._worker: threading.Thread | None = None
        self._starting = False
        self._batch: StepBatch | None = None
        self._admitting: list[Job] = []

    async def submit(self, request: GenerationRequest) -> Generation:
        loop = asyncio.get_running_loop()
        job = Job(request, loop.create_future(), loop)
        with self._lock:
            if self._closing.is_set():
                return error_generation(CLOSED_BEFORE)
            self._inbox.append(job)
            if not self._starting and not self._running():
                # Started on the next tick: requests made in this one (one gather) join together.
                self._starting = True
                loop.call_soon(self._start_worker)
        return await job.future

    def abandoned(self) -> bool:
        """Whether nobody waits for any row being generated: every caller was cancelled (Ctrl-C, SIGTERM).
        Safe to call from the worker thread, which should then stop."""
        batch, admitting = self._batch, self._admitting
        rows = [] if batch is None or not len(batch) else [batch]
        if not admitting and not rows:
            return False  # nothing is generating
        return all(job.cancelled() for job in admitting) and all(each.all_cancelled() for each in rows)

    async def aclose(self) -> None:
        self._closing.set()
        worker = self._worker
        if worker is not None:
            await asyncio.to_thread(worker.join)
        with self._lock:
            waiting, self._inbox = list(self._inbox), deque()
        for job in waiting:
            job.deliver(error_generation(CLOSED_BEFORE))

    def wait_idle(self) -> None:
        """Return once no worker uses the model: a row is delivered before its worker leaves `session()`
        (eval mode, no gradients, the stop hooks), and whoever uses the model next (GRPO's trainer) waits."""
        with self._model_lock:
            pass

    def _running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _start_worker(self) -> None:
        with self._lock:
            self._starting = False
            if self._running():
                return
            self._worker = threading.Thread(target=self._work, name="agentdata-generate", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        started = time.perf_counter()
        with self._model_lock, self._session():
            try:
                while (jobs := self._take()) is not None:
                    self._advance(jobs)
            finally:
                if self._batch is not None:  # closing: whoever still waits is told
                    self._batch.fail_all(error_generation(CLOSED_DURING))
                    self._batch = None
                self.active_s += time.perf_counter() - started

    def _take(self) -> list[Job] | None:
        """The jobs that join before the next step ([] for none); None when the worker should end.

        A new batch takes every waiting job of the oldest one's sampling setting; a running batch takes
        more of its own only while no job of another setting waits (which then goes once it drains).
        """
        batch = self._batch
        with self._lock:
            if self._closing.is_set():
                return None
            self._inbox = deque(job for job in self._inbox if not job.cancelled())
            running = len(batch) if batch is not None else 0
            key = batch.key if running else (self._key_of(self._inbox[0].request) if self._inbox else None)
            keys = [self._key_of(job.request) for job in self._inbox]
            if running and any(other != key for other in keys):
                keys = []  # another setting waits: this batch drains first
            room = self.max_batch_size - running
            chosen = [index for index, job_key in enumerate(keys) if job_key == key][:room]
            jobs = [self._inbox[index] for index in chosen]
            for index in reversed(chosen):
                del self._inbox[index]
            if not jobs and not running:
                self._worker = None  # only the worker calls this: a later request starts a new one
                return None
            return jobs

    def _advance(self, jobs: list[Job]) -> None:
        """Let `jobs` join (a new batch when none runs), then run one step."""
        if jobs:
            if self._batch is None or not len(self._batch):
                self._batch = self._open_batch(self._key_of(jobs[0].request))
            self.batch_sizes.append(len(jobs))
            self._admitting = jobs
            try:
                self._batch.admit(jobs)
            except Exception as exc:  # the prefill failed: these requests fail, the batch goes on
                for job in jobs:
                    job.deliver(self._failure(exc))
            finally:
                self._admitting = []
        if self._batch is not None and len(self._batch):
            try:
                self._batch.step()
            except Exception as exc:  # one broken step fails its rows, not the worker or later requests
                self._batch.fail_all(self._failure(exc))
                self._batch = None

    def _failure(self, exc: Exception) -> Generation:
        if self._closing.is_set():
            return error_generation(CLOSED_DURING)
        return error_generation(f"{type(exc).__name__}: {exc}")
