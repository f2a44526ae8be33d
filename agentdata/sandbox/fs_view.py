"""Each sandbox call's private, throwaway view of the filesystem (stdlib only; runs in the worker script).

Code in a call may write anywhere it could on a machine of its own (`/mnt/b`, `/home/x`,
`/tmp/y`, a new `/data` folder), and it reads only what it needs to run: the system (`/usr`,
`/etc`), the Python install and its import paths. The host's other files are not in the view
at all, and nothing a call writes outlives it or reaches another call.

The template builds, once, a directory (`build_view`) holding:
- `skeleton/`: the lower layer of every view: the top-level folders (the usual writable ones
  sticky and world-writable like /tmp), a few device nodes, the merged-/usr symlinks and empty
  mount points for what is bound in;
- `ro/...`: the read-only bind mounts of what code may read, plus /proc and /sys;
- `next/`: where each executor mounts its own disk.
Each executor (`enter_view`), in its own mount namespace: a size-capped tmpfs (the call's
whole disk) holding an overlay upper layer over the skeleton, the binds on top, then chroot.
The executor then drops to its own uid without capabilities, so it cannot leave the chroot.
"""

from __future__ import annotations

import errno
import os
import stat

if __package__:
    from agentdata.sandbox import jail
else:  # a top-level module of the worker script (see worker.py)
    import jail

MS_REMOUNT = 32
MS_RELATIME = 1 << 21
# statvfs flags that must be kept when a bind mount is remounted (in a user namespace the
# kernel refuses to drop a flag the original mount has): rdonly, nosuid, nodev, noexec, noatime, nodiratime
_KEPT_FLAGS = 1 | 2 | 4 | 8 | 1024 | 2048
ST_RELATIME = 4096

WRITABLE_DIRS = ("tmp", "var/tmp", "dev/shm", "mnt", "media", "home", "srv", "opt", "run")
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
SYSTEM_DIRS = ("/usr", "/etc")
LIB_NAMES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def _inside(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip("/") + "/")


def session_dir(bound: list[str]) -> str:
    """Where each call works (its files, HOME, TMPDIR, the first import path), in a view or a private /tmp: /tmp,
    unless a host path is bound in under it (an interpreter or venv installed under the host's /tmp, bound at its
    own path so that it imports), which would take a name among the call's own files (a checkout at /tmp/x made
    the call's file `x` the host's folder). Then the first of /tmp/work, /tmp/work-2, ... that holds no host path
    and lies in none: the call's files are its own wherever the host's files are."""
    bound = [path for path in bound if _inside(path, "/tmp")]
    candidates = ["/tmp", "/tmp/work", *(f"/tmp/work-{number}" for number in range(2, len(bound) + 3))]
    return next(c for c in candidates if not any(_inside(path, c) or _inside(c, path) for path in bound))


def make_session_dir(path: str) -> str:
    """The call's working dir, made in its fresh view (or private /tmp) before it drops to its own uid."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o1777)  # as /tmp: the executor's uid writes there
    return path


def view_sources(python_paths: list[str]) -> list[str]:
    """What a view binds in, read-only: the system dirs and a minimal cover of the Python paths.

    A path reached through a symlink is bound both where it is named and where it really is,
    so the interpreter finds its files either way (a venv's `python` links into the base install).
    """
    wanted = list(SYSTEM_DIRS)
    wanted += [f"/{name}" for name in LIB_NAMES if os.path.isdir(f"/{name}") and not os.path.islink(f"/{name}")]
    for path in python_paths:
        if not path or not os.path.exists(path):
            continue
        directory = path if os.path.isdir(path) else os.path.dirname(path)
        wanted += [os.path.abspath(directory), os.path.realpath(directory)]
    cover: list[str] = []
    for path in sorted(set(wanted), key=lambda p: (p.count("/"), p)):
        if path != "/" and not any(_inside(path, kept) for kept in cover):
            cover.append(path)
    return cover


def _remount_read_only(path: str) -> None:
    current = os.statvfs(path).f_flag
    flags = (current & _KEPT_FLAGS) | (MS_RELATIME if current & ST_RELATIME else 0)
    jail.mount(None, path, None, jail.MS_BIND | MS_REMOUNT | jail.MS_RDONLY | jail.MS_NOSUID | flags)


def _make_skeleton(skeleton: str, sources: list[str], bound_devices: bool) -> None:
    for name in WRITABLE_DIRS:
        os.makedirs(f"{skeleton}/{name}", exist_ok=True)
        os.chmod(f"{skeleton}/{name}", 0o1777)
    for name in LIB_NAMES:
        if os.path.islink(f"/{name}"):
            os.symlink(os.readlink(f"/{name}"), f"{skeleton}/{name}")
    for name, link in DEV_LINKS.items():
        os.symlink(link, f"{skeleton}/dev/{name}")
    for name, (major, minor) in DEVICES.items():
        if bound_devices:
            open(f"{skeleton}/dev/{name}", "w").close()  # a mount point for the host's node
        else:
            os.mknod(f"{skeleton}/dev/{name}", 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(f"{skeleton}/dev/{name}", 0o666)  # mknod's mode went through the umask
    for source in [*sources, "/proc", "/sys"]:
        os.makedirs(skeleton + source, mode=0o755, exist_ok=True)


def build_view(root: str, python_paths: list[str]) -> list[tuple[str, str]]:
    """In the template, once: the skeleton and the read-only sources under `root` (an empty dir).

    Returns the binds each executor makes, as (source under `root`, target in the view).
    Raises OSError where the kernel does not allow it (then the caller falls back).
    """
    jail.mount("tmpfs", root, "tmpfs", jail.MS_NOSUID, "size=16m,mode=755")
    skeleton = f"{root}/skeleton"
    os.makedirs(f"{skeleton}/dev")
    os.mkdir(f"{root}/next")
    sources = view_sources(python_paths)
    try:
        os.mknod(f"{root}/probe", 0o600 | stat.S_IFCHR, os.makedev(*DEVICES["null"]))
        os.unlink(f"{root}/probe")
        bound_devices = False
    except PermissionError:  # in a user namespace: bind the host's nodes instead
        bound_devices = True
    _make_skeleton(skeleton, sources, bound_devices)
    binds = []
    for source in sources:
        os.makedirs(f"{root}/ro{source}")
        jail.mount(source, f"{root}/ro{source}", None, jail.MS_BIND | jail.MS_REC)
        _remount_read_only(f"{root}/ro{source}")
        binds.append((f"{root}/ro{source}", source))
    for source in ("/proc", "/sys"):
        os.makedirs(f"{root}/ro{source}")
        try:
            jail.mount(source, f"{root}/ro{source}", None, jail.MS_BIND)  # not recursive: no cgroup mounts
        except OSError as error:  # in a user namespace a tree with locked mounts under it binds only whole
            if error.errno != errno.EINVAL:
                raise
            jail.mount(source, f"{root}/ro{source}", None, jail.MS_BIND | jail.MS_REC)
        if source == "/sys":
            _remount_read_only(f"{root}/ro{source}")
        binds.append((f"{root}/ro{source}", source))
    if bound_devices:
        os.makedirs(f"{root}/ro/dev")
        for name in DEVICES:
            open(f"{root}/ro/dev/{name}", "w").close()
            jail.mount(f"/dev/{name}", f"{root}/ro/dev/{name}", None, jail.MS_BIND)
            binds.append((f"{root}/ro/dev/{name}", f"/dev/{name}"))
    return binds


def enter_view(root: str, binds: list[tuple[str, str]], size_mb: int) -> None:
    """In an executor, before any user code: its own mount namespace, then chroot into its fresh view."""
    jail.unshare(jail.CLONE_NEWNS)
    disk = f"{root}/next"
    jail.mount("tmpfs", disk, "tmpfs", jail.MS_NOSUID, f"size={size_mb}m,mode=755")
    os.mkdir(f"{disk}/upper", 0o755)
    os.chmod(f"{disk}/upper", 0o1777)  # the view's "/": anyone may add to it, as in /tmp
    os.mkdir(f"{disk}/work")
    os.mkdir(f"{disk}/root")
    layers = f"lowerdir={root}/skeleton,upperdir={disk}/upper,workdir={disk}/work"
    jail.mount("overlay", f"{disk}/root", "overlay", jail.MS_NOSUID, layers)
    for source, target in binds:
        jail.mount(source, f"{disk}/root{target}", None, jail.MS_BIND | jail.MS_REC)
    os.chroot(f"{disk}/root")
    os.chdir("/tmp")
