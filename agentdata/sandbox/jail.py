"""Linux isolation primitives used inside the sandbox worker processes (stdlib only).

The worker runs as a plain script, so this module must not import agentdata. Every
function here either succeeds or returns a reason string; the caller turns reasons
into one startup warning, so a machine without namespaces still runs code.
"""

from __future__ import annotations

import ctypes
import os
import resource

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MADV_COLLAPSE = 25
HUGE_PAGE = 2 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def encode(value: str | None) -> bytes | None:
        return value.encode() if value is not None else None

    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def unmount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), "prctl")


def enter_network_namespace() -> str | None:
    """A fresh network namespace has only a loopback that is down: nothing can connect anywhere."""
    try:
        unshare(CLONE_NEWNET)
        return None
    except OSError as error:
        return f"no network namespace ({error.strerror}); sandboxed code can reach the network"


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_user_namespace() -> str | None:
    """For non-root hosts: a user namespace makes the net and mount namespaces possible."""
    uid, gid = os.getuid(), os.getgid()
    try:
        unshare(CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
        return None
    except OSError as error:
        return f"no user namespace ({error.strerror})"


def make_mounts_private() -> str | None:
    """A private mount namespace: mounts made here are never seen by the host."""
    try:
        unshare(CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        return None
    except OSError as error:
        return f"no mount namespace ({error.strerror}); working dirs live on the host's /tmp"


def hide_shared_writable_dirs() -> None:
    """World-writable host dirs would let sandboxes leave files for each other: cover them."""
    for path in ("/var/tmp", "/run/lock"):
        if os.path.isdir(path):
            try:
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755")
            except OSError:
                pass


def _closed_ancestor(path: str) -> str | None:
    """The highest directory above `path` that other users cannot enter (like /root, mode 700)."""
    parts = os.path.abspath(path).split("/")[1:]
    for depth in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:depth])
        try:
            if not os.stat(ancestor).st_mode & 0o001:
                return ancestor
        except OSError:
            return None
    return None


def expose_paths(paths: list[str]) -> list[str]:
    """Make `paths` reachable by an unprivileged uid without opening their closed parents.

    The Python in use often lives under /root (pyenv). The closed parent is covered with an
    empty tmpfs holding bind mounts of just the needed paths, so the rest of it (keys,
    tokens, caches) stays out of sight. Returns the paths that could not be exposed.
    """
    by_ancestor: dict[str, list[str]] = {}
    for path in dict.fromkeys(os.path.abspath(p) for p in paths if p and os.path.exists(p)):
        ancestor = _closed_ancestor(path)
        if ancestor:
            by_ancestor.setdefault(ancestor, []).append(path)
    failed: list[str] = []
    for ancestor, needed in by_ancestor.items():
        needed = [p for p in needed if not any(p != q and p.startswith(q + "/") for q in needed)]
        handles = {path: os.open(path, os.O_PATH) for path in needed}
        try:
            mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
            for path, handle in handles.items():
                os.makedirs(path, mode=0o755, exist_ok=True)
                mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
        except OSError:
            failed.extend(needed)
        finally:
            for handle in handles.values():
                os.close(handle)
    return failed


def private_tmp(size_mb: int, keep: list[str] = ()) -> None:
    """Each executor gets its own mount namespace with a size-capped tmpfs on /tmp (also /dev/shm).

    The tmpfs vanishes with the namespace, i.e. when the executor and all it started are gone.
    `keep` names paths under /tmp that must stay reachable (a virtualenv checked out under
    /tmp: without its site-packages, lazily imported submodules such as sympy's fail); they
    are bound back into the new tmpfs, with their own (root-owned, read-only to others) modes.
    """
    under_tmp = sorted(
        {os.path.abspath(p) for p in keep if p and os.path.abspath(p).startswith("/tmp/") and os.path.exists(p)}
    )
    under_tmp = [p for p in under_tmp if not any(p != q and p.startswith(q + "/") for q in under_tmp)]
    unshare(CLONE_NEWNS)
    # Opened in the new namespace, before /tmp is covered: the handles still reach the paths after.
    handles = {path: os.open(path, os.O_PATH) for path in under_tmp}
    try:
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=1777")
        for path, handle in handles.items():
            _bind_into_tmpfs(path, handle)
    finally:
        for handle in handles.values():
            os.close(handle)
    if os.path.isdir("/dev/shm"):
        mount("/tmp", "/dev/shm", None, MS_BIND)


def _bind_into_tmpfs(path: str, handle: int) -> None:
    """Recreate `path`'s parents in the fresh tmpfs (root-owned, not writable by others) and bind it there."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    os.makedirs(path, mode=0o755, exist_ok=True)
    mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


LINUX_CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """No capability left, in any namespace: code that keeps the uid it was given (in a user namespace it is
    that namespace's root) can no longer chroot its way out of its view, mount, or override file permissions."""
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def drop_to_uid(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def set_limits(memory_mb: int, cpu_budget_s: int, max_processes: int, max_file_mb: int, nproc: bool) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # The hard CPU limit is the executor's whole budget; each call lowers the soft one (see worker).
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_budget_s, cpu_budget_s))
    file_size = max_file_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:
        # Counted per uid, so only meaningful after dropping to the executor's own uid.
        resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))


def die_with_parent(signal_number: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal_number)


def forbid_new_privileges() -> None:
    """setuid binaries (su, mount) cannot raise privileges again."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def heap_into_huge_pages() -> int:
    """Back the warm heap (anonymous and [heap] mappings) with 2 MiB pages; returns the bytes moved.

    fork() copies one page-table entry per 4 KiB page of private memory, and the child's exit
    frees them again: with numpy and sympy loaded that is ~12,000 entries per executor. On huge
    pages it is one per 2 MiB. A write after the fork still copies only the 4 KiB page it touches
    (the kernel splits the huge mapping first), so executors share as much as before.
    MADV_COLLAPSE needs Linux 6.1; elsewhere this does nothing.
    """
    moved = 0
    with open("/proc/self/maps") as handle:
        lines = handle.read().splitlines()
    for line in lines:
        parts = line.split()
        name = parts[5] if len(parts) > 5 else ""
        if parts[1] != "rw-p" or name not in ("", "[heap]"):
            continue
        start, end = (int(value, 16) for value in parts[0].split("-"))
        low, high = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
        if high - low < HUGE_PAGE:
            continue
        # MADV_COLLAPSE alone, without MADV_HUGEPAGE: memory allocated later (by the template
        # or an executor) keeps the system's default page size rather than 2 MiB per fault.
        if _libc.madvise(low, high - low, MADV_COLLAPSE) == 0:
            moved += high - low
    return moved
