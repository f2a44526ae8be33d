"""The watcher that agentdata/processes.py starts: when agentdata ends, however it ends, what it started dies.

Run as a script (`python -I -S process_watcher.py FD OWNER_PID MARK`), stdlib only, so it starts in a few
milliseconds and imports nothing of agentdata's. It reads the pipe FD, whose write end only agentdata holds:
`+SID` and `-SID` lines register and forget the session of a child agentdata started. The pipe's end (EOF)
means agentdata is gone or exiting (a normal exit, an exception, a signal, kill -9: the kernel closes the pipe
in every case), and then the watcher kills, with SIGKILL, every process that:
- is in a registered session (a child and whatever it started that stayed in its session),
- carries MARK in the environment it was started with (what agentdata's children, and the children that
  libraries start for it, such as the mcp SDK's server or a local Ray, inherit from agentdata's environment),
- or descends from one of those (a child that made a session of its own);
again until none is left, within a bounded time. Then it exits.

agentdata/processes.py imports `doomed` to stop one child's session the same way on the ordinary path.
"""

from __future__ import annotations

import os
import signal
import sys
import time

SWEEP_S = 10.0  # the most a sweep keeps looking for processes forked while it kills


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, state) of every process this one can see."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone since the listing
        table[int(name)] = (int(fields[1]), int(fields[3]), fields[0].decode())
    return table


def _carries(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark in environ.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def doomed(sessions: set[int], mark: bytes | None = None, spare: frozenset[int] = frozenset()) -> set[int]:
    """The live (not zombie) processes in `sessions`, carrying `mark`, or descending from either; never `spare`
    nor this process."""
    table = _processes()
    roots = {pid for pid, (_, sid, _) in table.items() if sid in sessions or (mark and _carries(pid, mark))}
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    alive = {pid for pid in found if table[pid][2] != "Z"}
    return alive - set(spare) - {os.getpid()}


def sweep(sessions: set[int], mark: bytes | None, spare: frozenset[int], seconds: float = SWEEP_S) -> None:
    """SIGKILL everything `doomed` names until nothing is left (a process may fork while the others die)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        targets = doomed(sessions, mark, spare)
        if not targets:
            return
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _read_registrations(fd: int) -> set[int]:
    """The sessions still registered when the pipe ends."""
    sessions: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not chunk:
            return sessions
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                sessions.add(int(line[1:]))
            elif line[:1] == b"-":
                sessions.discard(int(line[1:]))


def main() -> None:
    fd, owner, mark = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)  # a Ctrl-C meant for agentdata must not end the watch
    sessions = _read_registrations(fd)
    sweep(sessions, mark, frozenset({owner}))


if __name__ == "__main__":
    main()
