"""The sandbox's worker processes: one warm template that forks isolated executors.

Run as a script (`python -I worker.py CTRL_FD SETTINGS_JSON`), never imported into the
template by package, so the template holds only the stdlib and the preloaded modules.

Template: imports the common modules once, enters a network namespace and a private
mount namespace, then forks an executor per request. A fork of a warm process costs
about a millisecond instead of a Python start-up.

Executor: one per session, or one per stateless call. Before any user code runs it gets
its own uid (so RLIMIT_NPROC counts only its processes and `kill(-1)` reaches exactly
them), its own size-capped tmpfs on /tmp, rlimits, a clean environment and no way to
regain privileges. It then runs cells like a notebook kernel and answers over a socket.

Host <-> template: SOCK_SEQPACKET, one JSON message per packet, executor sockets and
pidfds passed with SCM_RIGHTS. Host <-> executor: a stream socket, 4-byte length + JSON.
"""

from __future__ import annotations

import ast
import base64
import errno
import importlib
import json
import linecache
import os
import select
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jail  # noqa: E402

    sys.path.pop(0)
else:  # imported by the host for the framing helpers only
    from agentdata.sandbox import jail  # noqa: F401

PR_SET_CHILD_SUBREAPER = 36
CELL_FILENAME = "<cell>"
_HEADER = struct.Struct("!I")


# --------------------------------------------------------------------------- framing

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


# --------------------------------------------------------------------------- output capture

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
        tail = bytes(self.tail[-self.half:])
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
        self.thread.start()

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
        for fd in (*self.read_ends, self.stop_read, self.stop_write):
            os.close(fd)
        return self.buffers[1].text(), self.buffers[2].text()


# --------------------------------------------------------------------------- executor

class Executor:
    """Runs cells in one namespace, like a notebook kernel."""

    def __init__(self, sock: socket.socket, settings: dict, own_uid: bool):
        self.sock = sock
        self.settings = settings
        self.own_uid = own_uid
        self.pid = os.getpid()
        self.namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.real_streams = (sys.stdin, sys.stdout, sys.stderr)
        self.cells = 0

    # -- processes the code started
    def kill_others(self) -> None:
        """Every other process this executor's code started (same uid, or same session)."""
        if self.own_uid:
            # As an unprivileged uid, kill(-1) reaches exactly our own processes. The kernel
            # walks the process list under the lock that fork() needs, so a fork bomb cannot
            # slip a new child past it. (It reports success even when it found none of ours,
            # so there is nothing to gain from repeating it.)
            os.kill(-1, signal.SIGKILL)
            self._reap_children()
            return
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == self.pid:
                continue
            try:
                with open(f"/proc/{name}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == self.pid:  # session id
                    os.kill(int(name), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                pass

    @staticmethod
    def _reap_children() -> None:
        """Our own dead children stay zombies (and count as alive for kill) until waited for."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    # -- one cell
    def _prepare_files(self, files: dict) -> None:
        for name, content in (files or {}).items():
            if os.path.isabs(name) or ".." in name.split("/"):
                raise ValueError(f"file name {name!r} must be relative, inside the working directory")
            if os.path.dirname(name):
                os.makedirs(os.path.dirname(name), exist_ok=True)
            with open(name, "wb") as handle:
                handle.write(base64.b64decode(content))

    def _prepare_stdin(self, text: str) -> None:
        fd = os.memfd_create("stdin")
        os.write(fd, text.encode())
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = open(0, "r", closefd=False)

    def _set_call_limits(self, timeout: float, memory_mb: int | None) -> None:
        import resource

        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_used = int(used.ru_utime + used.ru_stime)
        _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = cpu_used + int(timeout) + 2
        if cpu_hard != resource.RLIM_INFINITY:
            soft = min(soft, cpu_hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
        _, memory_hard = resource.getrlimit(resource.RLIMIT_AS)
        memory = memory_hard if not memory_mb else min(memory_mb * 1024 * 1024, memory_hard)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory_hard))

    def _compile(self, code: str, display_last: bool) -> list:
        self.cells += 1
        filename = f"<cell {self.cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename=filename)
        last = tree.body[-1] if display_last and tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = tree.body[:-1] if last is not None else tree.body
        units = [compile(ast.Module(body=body, type_ignores=[]), filename, "exec")]
        if last is not None:  # "single" mode prints a non-None value through sys.displayhook
            units.append(compile(ast.Interactive(body=[last]), filename, "single"))
        return units

    def _traceback(self, error: BaseException) -> str:
        tb = error.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next  # hide the executor's own frames
        return "".join(traceback.format_exception(type(error), error, tb))

    def run_cell(self, request: dict) -> dict:
        started = time.perf_counter()
        status, exit_code, note = "ok", 0, ""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        capture = OutputCapture(int(self.settings["max_output_bytes"]), self.devnull)
        sys.stdout = open(1, "w", closefd=False, errors="backslashreplace")
        sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
        try:
            self._set_call_limits(float(request.get("timeout") or 30), request.get("memory_mb"))
            self._prepare_files(request.get("files"))
            self._prepare_stdin(request.get("stdin") or "")
            for unit in self._compile(request["code"], request.get("display_last", True)):
                exec(unit, self.namespace)
        except BaseException as error:  # noqa: BLE001 -- whatever the code does is a result
            if os.getpid() != self.pid:
                os._exit(1)  # a child the code forked must never answer for the executor
            status, exit_code, note = self._classify(error)
        if os.getpid() != self.pid:
            os._exit(0)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        sys.stdin, sys.stdout, sys.stderr = self.real_streams
        stdout, stderr = capture.finish()
        if status == "timeout":
            self.kill_others()
        return {
            "status": status,
            "stdout": stdout,
            "stderr": stderr + note,
            "exit_code": exit_code,
            "duration_s": time.perf_counter() - started,
        }

    def _classify(self, error: BaseException) -> tuple[str, int, str]:
        if isinstance(error, SystemExit):
            code = error.code
            if code is None or code == 0:
                return "ok", 0, ""
            if isinstance(code, int):
                return "error", code, ""
            return "error", 1, f"{code}\n"
        if isinstance(error, KeyboardInterrupt):  # only the host sends SIGINT, at the wall limit
            return "timeout", -signal.SIGINT, "TimeoutError: the call ran past its time limit\n"
        trace = self._traceback(error)
        if isinstance(error, MemoryError):
            return "oom", 1, trace or "MemoryError\n"
        return "error", 1, trace

    def serve(self) -> None:
        while True:
            try:
                request = recv_frame(self.sock)
            except KeyboardInterrupt:  # a late timeout signal that found us idle
                continue
            except (OSError, ValueError):
                request = None
            if request is None or request.get("op") == "close":
                self.kill_others()
                os._exit(0)
            try:
                result = self.run_cell(request)
            except KeyboardInterrupt:
                result = {"status": "timeout", "stdout": "", "stderr": "", "exit_code": -2, "duration_s": 0.0}
            if request.get("once"):
                self.kill_others()  # a stateless call leaves nothing running behind it
            try:
                self.sock.sendall(encode_frame(result))
            except OSError:
                os._exit(0)
            if request.get("once"):
                os._exit(0)


def set_environment(workdir: str) -> None:
    """The executor's environment, with `workdir` as home and temp dir.

    The template sets it once when every executor works in the same place (its private
    /tmp); executors then inherit it instead of rebuilding it on every fork.
    """
    keep = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    os.environ.clear()
    os.environ.update(keep)
    os.environ.update({"HOME": workdir, "TMPDIR": workdir, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})


def import_path(workdir: str) -> list[str]:
    """The executor's sys.path: its working dir first, then the template's existing entries.

    Only ever assigned in an executor: the template itself (root) must never import from a
    /tmp that others can write to.
    """
    return [workdir] + [p for p in sys.path if p and p != workdir and os.path.isdir(p)]


def python_paths() -> list[str]:
    """Where the interpreter and its imports live: sandboxed code must be able to read them."""
    return [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), *sys.path]


def executor_main(sock: socket.socket, uid: int, settings: dict, state: dict) -> None:
    """Runs in the forked child, as root until `drop_to_uid`; never returns."""
    try:
        os.setsid()
        if state["private_tmp"]:
            jail.private_tmp(int(settings["disk_mb"]), keep=state["python_paths"])
            workdir = "/tmp"
        else:
            workdir = f"{state['tmp_root']}/exec-{uid}-{os.getpid()}"
            os.mkdir(workdir, 0o700)
            if state["own_uid"]:
                os.chown(workdir, uid, uid)
        if state["own_uid"]:
            jail.drop_to_uid(uid)
            try:
                os.kill(-1, signal.SIGKILL)  # leftovers of an earlier user of this uid
            except ProcessLookupError:
                pass
        jail.set_limits(
            int(settings["memory_mb"]),
            int(settings["cpu_budget_s"]),
            int(settings["max_processes"]),
            int(settings["max_file_mb"]),
            nproc=state["own_uid"],
        )
        jail.die_with_parent(signal.SIGKILL)
        jail.forbid_new_privileges()
        os.chdir(workdir)
        if state["private_tmp"]:  # the template has prepared both once for all executors
            sys.path[:] = state["import_path"]
        else:
            set_environment(workdir)
            sys.path[:] = import_path(workdir)
        executor = Executor(sock, settings, state["own_uid"])
        # Pay this process's copy-on-write page faults now, while it waits as a spare.
        executor.run_cell({"code": "None", "timeout": 1})
        executor.cells = 0
    except BaseException as error:  # noqa: BLE001
        sock.sendall(encode_frame({"status": "error", "stdout": "", "stderr": f"sandbox setup failed: {error}\n",
                                   "exit_code": 1, "duration_s": 0.0}))
        os._exit(70)
    executor.serve()


# --------------------------------------------------------------------------- template

class Template:
    def __init__(self, ctrl: socket.socket, settings: dict):
        self.ctrl = ctrl
        self.settings = settings
        self.executors: dict[int, dict] = {}  # pid -> {"uid", "workdir"}
        self.killers: dict[int, int] = {}  # killer pid -> uid
        self.warnings: list[str] = []
        self.state = {"own_uid": False, "private_tmp": False, "tmp_root": "/tmp"}

    def send(self, message: dict, fds: list[int] = ()) -> None:
        data = json.dumps(message).encode()
        if fds:
            socket.send_fds(self.ctrl, [data], list(fds))
        else:
            self.ctrl.send(data)

    def preload(self) -> None:
        for name in self.settings["preload"]:
            try:
                importlib.import_module(name)
            except Exception as error:  # noqa: BLE001
                self.warnings.append(f"could not preload {name}: {error}")

    def warm_up(self) -> None:
        """Touch the executor's code paths once here, so forked children start with them ready.

        gc.freeze() moves every object so far out of the collector's sight: a child's first
        collection would otherwise write to (and so copy) every page of the preloaded modules.
        """
        import gc
        import resource  # noqa: F401 -- used by executors

        compile(ast.Interactive(body=ast.parse("1").body), "<warm-up>", "single")
        capture = OutputCapture(64, os.open(os.devnull, os.O_RDWR))
        os.dup2(capture.devnull, 1)
        os.dup2(capture.devnull, 2)
        os.write(capture.stop_write, b"x")
        capture.thread.join()
        if self.state["private_tmp"]:
            set_environment("/tmp")
            self.state["import_path"] = import_path("/tmp")
        gc.collect()
        gc.freeze()
        jail.heap_into_huge_pages()

    def isolate(self) -> None:
        self.state["python_paths"] = python_paths()  # once here, not in every executor
        is_root = os.geteuid() == 0
        wants_isolation = self.settings["isolate_network"] or self.settings["isolate_filesystem"]
        if not is_root and wants_isolation:
            reason = jail.enter_user_namespace()
            if reason:
                self.warnings.append(reason)
        if self.settings["isolate_network"]:
            reason = jail.enter_network_namespace()
            if reason:
                self.warnings.append(reason)
        if self.settings["isolate_filesystem"]:
            reason = jail.make_mounts_private()
            if reason:
                self.warnings.append(reason)
            else:
                jail.hide_shared_writable_dirs()
                self.state["private_tmp"] = self._probe_private_tmp()
        if not self.state["private_tmp"]:
            import tempfile

            self.state["tmp_root"] = tempfile.mkdtemp(prefix="agentdata-sandbox-")
            os.chmod(self.state["tmp_root"], 0o711)
        if self.settings["drop_privileges"] and is_root:
            self.state["own_uid"] = True
            needed = self.state["python_paths"]
            hidden = jail.expose_paths(needed) if self.state["private_tmp"] else [
                p for p in needed if p and os.path.exists(p) and jail._closed_ancestor(p)]
            if hidden:
                self.warnings.append(f"sandboxed code cannot read {sorted(set(hidden))[:3]}: imports from there fail")
        elif self.settings["drop_privileges"]:
            self.warnings.append(
                "not root: executors keep the host's uid, so the process limit is not per sandbox "
                "and leftover processes are found by session id"
            )

    def _probe_private_tmp(self) -> bool:
        """Mounting a tmpfs per executor needs CAP_SYS_ADMIN: try it once in a throwaway child."""
        pid = os.fork()
        if pid == 0:
            try:
                jail.private_tmp(1)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            self.warnings.append("cannot mount a private /tmp per executor; working dirs live on the host's /tmp")
            return False
        return True

    def spawn(self, uid: int, tag: str) -> None:
        parent_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.ctrl.close()
            parent_end.close()
            executor_main(child_end, uid, self.settings, self.state)
        child_end.close()
        pidfd = os.pidfd_open(pid)
        workdir = None if self.state["private_tmp"] else f"{self.state['tmp_root']}/exec-{uid}-{pid}"
        self.executors[pid] = {"uid": uid, "workdir": workdir}
        self.send({"op": "spawned", "tag": tag, "pid": pid, "uid": uid}, [parent_end.fileno(), pidfd])
        parent_end.close()
        os.close(pidfd)

    def kill_uid(self, uid: int) -> None:
        """Fork a killer that takes the uid and signals every process of it."""
        if not self.state["own_uid"]:
            for pid, info in self.executors.items():
                if info["uid"] == uid:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            self.send({"op": "killed", "uid": uid})
            return
        pid = os.fork()
        if pid == 0:
            try:
                jail.drop_to_uid(uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(0)
        self.killers[pid] = uid

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            if pid in self.killers:
                self.send({"op": "killed", "uid": self.killers.pop(pid)})
            elif pid in self.executors:
                info = self.executors.pop(pid)
                if info["workdir"]:
                    import shutil

                    shutil.rmtree(info["workdir"], ignore_errors=True)
                self.send({"op": "exited", "pid": pid, "code": code})

    def handle(self, message: dict) -> bool:
        op = message.get("op")
        if op == "spawn":
            self.spawn(int(message["uid"]), str(message["tag"]))
        elif op == "killuid":
            self.kill_uid(int(message["uid"]))
        elif op == "exit":
            return False
        return True

    def shutdown(self) -> None:
        for uid in {info["uid"] for info in self.executors.values()}:
            self.kill_uid(uid)
        deadline = time.monotonic() + 2
        while (self.killers or self.executors) and time.monotonic() < deadline:
            try:
                self.reap()
            except OSError:
                pass
            time.sleep(0.01)
        if not self.state["private_tmp"]:
            import shutil

            shutil.rmtree(self.state["tmp_root"], ignore_errors=True)

    def serve(self) -> None:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        os.set_blocking(wake_read, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        jail.prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans of executors come back here to be reaped
        self.send({"op": "ready", "warnings": self.warnings, "own_uid": self.state["own_uid"],
                   "private_tmp": self.state["private_tmp"], "pid": os.getpid()})
        selector = selectors.DefaultSelector()
        selector.register(self.ctrl, selectors.EVENT_READ, "ctrl")
        selector.register(wake_read, selectors.EVENT_READ, "child")
        running = True
        while running:
            for key, _ in selector.select():
                if key.data == "child":
                    try:
                        while os.read(wake_read, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    self.reap()
                    continue
                try:
                    data = self.ctrl.recv(1 << 16)
                except InterruptedError:
                    continue
                except OSError as error:
                    if error.errno == errno.EINTR:
                        continue
                    data = b""
                if not data:
                    running = False
                    break
                running = self.handle(json.loads(data))
        self.shutdown()


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    settings = json.loads(sys.argv[2])
    template = Template(ctrl, settings)
    template.preload()
    template.isolate()
    template.warm_up()
    template.serve()


if __name__ == "__main__":
    main()
