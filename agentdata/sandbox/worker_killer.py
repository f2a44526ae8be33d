"""The template's killer: a lean interpreter that kills every process of a uid, one uid per request.

Run by the template (`python -I -S worker_killer.py FD`, stdlib only, never imported into it). Killing
a uid's processes takes a process of that uid (`kill(-1)` as it reaches exactly them); forked from the
template, such a killer copies the page tables of numpy and sympy and pays for them again at its exit,
about 4.7 ms of CPU per closed session against 0.6 ms forked from this ~10 MB process (bench/RESULTS.md).
It runs nothing but this loop, as the template's own user, in the template's namespaces.

Template <-> killer: SOCK_SEQPACKET, one uid in decimal per packet; the uid comes back once its
processes are gone. The killer ends when the template closes its end (or dies).
"""

from __future__ import annotations

import os
import signal
import socket
import sys


def kill_uid(uid: int) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # the kernel walks the process list under the lock fork needs
        except BaseException:  # noqa: BLE001 -- no process of the uid left is no failure
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    while True:
        try:
            request = channel.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not request:
            return
        kill_uid(int(request))
        channel.send(request)


if __name__ == "__main__":
    main()
