"""The watcher that agentdata/processes.py starts: when agentdata ends, however it ends, what it started dies.

Run as a script (`python -I -S process_watcher.py FD OWNER_PID MARK`), stdlib only, so it starts in a few
milliseconds and imports nothing of agentdata's. It reads the pipe FD, whose write end only agentdata holds:
`+SID` and `-SID` lines register and forget the session of a child agentdata started. Every SNAPSHOT_S it
also notes the processes it would kill now (below), by pid and start time. The pipe's end (EOF) means
agentdata is gone or exiting (a normal exit, an exception, a signal, kill -9: the kernel closes the pipe
in every case), and then the watcher kills, with SIGKILL, every process that:
- is in a registered session (a child and whatever it started that stayed in its session),
- carries MARK in the environment it was started with (what agentdata's children, and the children that
  libraries start for it, such as the mcp SDK's server or a local Ray, inherit from agentdata's environment),
- was noted so at the last look (the same process: same pid and start time), which catches what lost both
  the mark and its ancestry (a process that retitles itself, as Ray's agents and vLLM's engine core do,
  writes over the environment /proc shows; one whose parent died first is no longer anyone's descendant),
- or descends from one of those (a child that made a session of its own);
again until none is left, within a bounded time. Then it exits.

agentdata/processes.py imports `doomed` to stop one child's session the same way on the ordinary path.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import NamedTuple

SWEEP_S = 10.0  # the most a sweep keeps looking for processes forked while it kills
SNAPSHOT_S = 1.0  # how often the processes to kill are noted (a scan of /proc: a few milliseconds of CPU)


class Proc(NamedTuple):
    parent: int
    session: int
    state: str
    started: int  # clock ticks after boot: with the pid, names one process (pids are reused)


def _processes() -> dict[int, Proc]:
    """Every process this one can see, by pid."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone since the listing
        table[int(name)] = Proc(int(fields[1]), int(fields[3]), fields[0].decode(), int(fields[19]))
    return table


def _descending(roots: set[int], table: dict[int, Proc]) -> set[int]:
    """`roots` and every process below them."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.parent, []).append(pid)
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _carries(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark in environ.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def doomed(
    sessions: set[int],
    mark: bytes | None = None,
    spare: frozenset[int] = frozenset(),
    known: dict[int, int] | None = None,
) -> set[int]:
    """The live (not zombie) processes in `sessions`, carrying `mark`, among `known` (pid -> start time), or
    descending from any of those; never `spare` nor this process."""
    return set(_doomed(_processes(), sessions, mark, spare, known or {}))


def _doomed(
    table: dict[int, Proc], sessions: set[int], mark: bytes | None, spare: frozenset[int], known: dict[int, int]
) -> dict[int, int]:
    """`doomed` in `table`, with their start times."""
    roots = {pid for pid, proc in table.items() if proc.session in sessions or (mark and _carries(pid, mark))}
    roots |= {pid for pid, started in known.items() if pid in table and table[pid].started == started}
    alive = {pid for pid in _descending(roots, table) if table[pid].state != "Z"}
    return {pid: table[pid].started for pid in alive - set(spare) - {os.getpid()}}


def sweep(
    sessions: set[int], mark: bytes | None, spare: frozenset[int], known: dict[int, int], seconds: float = SWEEP_S
) -> None:
    """SIGKILL everything `doomed` names until nothing is left (a process may fork while the others die)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        targets = doomed(sessions, mark, spare, known)
        if not targets:
            return
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _watch(fd: int, owner: int, mark: bytes) -> tuple[set[int], dict[int, int]]:
    """Until the pipe ends: the sessions still registered then, and the processes last noted as agentdata's."""
    sessions: set[int] = set()
    known: dict[int, int] = {}
    pending = b""
    next_snapshot = time.monotonic()
    while True:
        if time.monotonic() >= next_snapshot:  # on the clock, however busy the pipe is
            known = _doomed(_processes(), sessions, mark, frozenset({owner}), known)
            next_snapshot = time.monotonic() + SNAPSHOT_S
        if not select.select([fd], [], [], max(0.0, next_snapshot - time.monotonic()))[0]:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return sessions, known
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
    sessions, known = _watch(fd, owner, mark)
    sweep(sessions, mark, frozenset({owner}), known)


if __name__ == "__main__":
    main()
