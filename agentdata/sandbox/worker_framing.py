"""Host <-> executor messages: a 4-byte length, then JSON (stdlib only).

Imported by the host (`agentdata.sandbox.worker_framing`) and, inside the worker script,
as a top-level module (see worker.py).
"""

from __future__ import annotations

import json
import socket
import struct

_HEADER = struct.Struct("!I")


def encode_frame(message: dict) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _HEADER.pack(len(body)) + body


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> dict | None:
    header = _recv_exactly(sock, _HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, _HEADER.unpack(header)[0])
    return None if body is None else json.loads(body)
