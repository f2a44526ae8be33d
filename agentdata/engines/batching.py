"""Collect the requests that wait at a moment and serve them with one blocking batch call.

Local engines generate in batches: while one batch runs (in a worker thread, so the event
loop stays free), new requests queue up, and the next batch takes all of them at once.
The queue belongs to the running event loop, so an engine can be used from several
`asyncio.run` calls one after another.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

from agentdata.engines.base import Engine, Generation, GenerationRequest, error_generation

BatchFunction = Callable[[list[GenerationRequest]], list[Generation]]


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future


class RequestBatcher:
    """Queues requests and calls `run_batch(requests) -> generations` on up to `max_batch_size` at a time."""

    def __init__(self, run_batch: BatchFunction, max_batch_size: int = 64):
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.batch_sizes: list[int] = []  # one entry per batch call: how well batching works
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        # One batch at a time even if two event loops (in two threads) share the engine.
        self._model_lock = threading.Lock()
        self._running: list[asyncio.Future] = []  # the futures of the batch being generated

    async def submit(self, request: GenerationRequest) -> Generation:
        queue = self._queue_for_running_loop()
        future = asyncio.get_running_loop().create_future()
        await queue.put(_Pending(request, future))
        return await future

    def _queue_for_running_loop(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            self._loop = loop
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._serve(self._queue))
        return self._queue

    async def _serve(self, queue: asyncio.Queue) -> None:
        while True:
            batch = [await queue.get()]
            # Requests created in the same event-loop tick (e.g. by one gather) join this batch.
            await asyncio.sleep(0)
            while len(batch) < self.max_batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            live = [pending for pending in batch if not pending.future.done()]
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self._run_locked, live)
            except asyncio.CancelledError:  # the engine is closing: nobody waits for ever
                _fail_all(live, "the engine was closed during generation")
                _fail_all(_drain(queue), "the engine was closed before this request ran")
                raise
            for pending, result in zip(live, results):
                if not pending.future.done():
                    pending.future.set_result(result)

    def _run_locked(self, live: list[_Pending]) -> list[Generation]:
        requests = [pending.request for pending in live]
        with self._model_lock:
            self.batch_sizes.append(len(requests))
            self._running = [pending.future for pending in live]
            try:
                results = self._run_batch(requests)
            except Exception as exc:  # one broken batch must not kill the worker or raise to callers
                return [error_generation(f"{type(exc).__name__}: {exc}") for _ in requests]
            finally:
                self._running = []
        if len(results) != len(requests):
            return [error_generation("engine returned a wrong number of results") for _ in requests]
        return results

    def wait_idle(self) -> None:
        """Return once no batch is generating (results are handed over only after theirs ends)."""
        with self._model_lock:
            pass

    def abandoned(self) -> bool:
        """Whether nobody waits for the batch being generated any more: every caller was cancelled
        (Ctrl-C, SIGTERM, a run that stops). Safe to call from the generating thread, which should stop.

        A cancelled caller's task cancels the future it awaits at once, so this turns True as soon
        as the callers are cancelled, before the event loop runs any of their cleanup.
        """
        running = self._running
        return bool(running) and all(future.done() for future in running)

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done() and worker.get_loop() is asyncio.get_running_loop():
            worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                pass


def _drain(queue: asyncio.Queue) -> list[_Pending]:
    pending = []
    while not queue.empty():
        pending.append(queue.get_nowait())
    return pending


def _fail_all(pending: list[_Pending], message: str) -> None:
    for item in pending:
        if not item.future.done():
            item.future.set_result(error_generation(message))


class BatchedEngine(Engine):
    """An engine whose `generate` queues each request for one consumer that runs whole batches:
    the subclass sets `self._batcher = RequestBatcher(self._run_batch, ...)` and writes `_run_batch`."""

    _batcher: RequestBatcher

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self._batcher.submit(request)

    @property
    def batch_sizes(self) -> list[int]:
        """How many requests each batch held: batching at work."""
        return self._batcher.batch_sizes

    def wait_idle(self) -> None:
        """Block until the model is free: after the last result, before anything else uses it."""
        self._batcher.wait_idle()

    async def aclose(self) -> None:
        await self._batcher.aclose()
