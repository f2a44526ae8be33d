"""Output capture inside an executor: fds 1 and 2 drained into capped buffers (stdlib only).

Runs inside the worker script as a top-level module (see worker.py).
"""

from __future__ import annotations

import os
import select
import threading


class _Capped:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        tail = bytes(self.tail[-self.half :])
        omitted = self.total - len(self.head) - len(tail)
        middle = f"\n... [{omitted} bytes of output omitted] ...\n".encode() if omitted > 0 else b""
        return (bytes(self.head) + middle + tail).decode("utf-8", "replace")


class OutputCapture:
    """Points fds 1 and 2 at pipes for one call; a thread drains them into capped buffers.

    fd-level capture also catches what subprocesses and C extensions print.
    """

    def __init__(self, limit: int, devnull: int):
        self.devnull = devnull
        self.buffers = {1: _Capped(limit), 2: _Capped(limit)}
        self.read_ends: dict[int, int] = {}
        self.stop_read, self.stop_write = os.pipe()
        for target in (1, 2):
            read_end, write_end = os.pipe()
            os.dup2(write_end, target)
            os.close(write_end)
            os.set_blocking(read_end, False)
            self.read_ends[read_end] = target
        self.thread = threading.Thread(target=self._drain, daemon=True)
        try:
            self.thread.start()
        except RuntimeError:  # no thread to be had (every process slot of the uid is taken): undone, for a retry
            self._release()
            raise

    def _release(self) -> None:
        os.dup2(self.devnull, 1)
        os.dup2(self.devnull, 2)
        for fd in (*self.read_ends, self.stop_read, self.stop_write):
            os.close(fd)

    def _read_available(self, read_end: int) -> bool:
        try:
            data = os.read(read_end, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.buffers[self.read_ends[read_end]].add(data)
        return True

    def _drain(self) -> None:
        open_ends = set(self.read_ends)
        while open_ends:
            ready, _, _ = select.select([*open_ends, self.stop_read], [], [])
            if self.stop_read in ready:
                break
            for read_end in ready:
                if not self._read_available(read_end):
                    open_ends.discard(read_end)
        for read_end in open_ends:  # what was written before the call ended is in the pipe now
            while True:
                try:
                    data = os.read(read_end, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    break
                self.buffers[self.read_ends[read_end]].add(data)

    def finish(self) -> tuple[str, str]:
        os.dup2(self.devnull, 1)
        os.dup2(self.devnull, 2)
        os.write(self.stop_write, b"x")
        self.thread.join()
        self._release()
        return self.buffers[1].text(), self.buffers[2].text()
