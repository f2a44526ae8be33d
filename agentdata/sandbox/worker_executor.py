"""The executor: one forked process per session or stateless call, running cells like a notebook kernel.

Before any user code runs it gets its own uid (so RLIMIT_NPROC counts only its processes
and `kill(-1)` reaches exactly them), its own size-capped tmpfs on /tmp, rlimits, a clean
environment and no way to regain privileges. Runs inside the worker script (stdlib only;
see worker.py); the host imports it only for `python_paths`.
"""

from __future__ import annotations

import ast
import base64
import builtins
import errno
import linecache
import os
import signal
import socket
import sys
import time
import traceback

if __package__:  # imported by the host as agentdata.sandbox.worker_executor
    from agentdata.sandbox import fs_view, jail
    from agentdata.sandbox.worker_capture import OutputCapture
    from agentdata.sandbox.worker_framing import encode_frame, recv_frame
else:  # a top-level module of the worker script, which puts this directory on sys.path
    import fs_view
    import jail
    from worker_capture import OutputCapture
    from worker_framing import encode_frame, recv_frame


# Said on the call that found the session's processes at its limit: what was stopped, and what was kept.
AT_LIMIT_NOTE = (
    "[the processes this session's code started reached the sandbox's limit of {limit} (a fork bomb?) and were all "
    "stopped; the session's variables are kept]\n"
)


SLOTS_FREED_S = 10.0  # how long the slots of killed processes may take to be freed (reaped by their new parent)


def at_process_limit(error: BaseException) -> bool:
    """The error a fork or a new thread meets when every process slot of the uid is taken."""
    if isinstance(error, OSError) and error.errno == errno.EAGAIN:
        return True
    return isinstance(error, RuntimeError) and "can't start new thread" in str(error)


class Executor:
    """Runs cells in one namespace, like a notebook kernel."""

    def __init__(self, sock: socket.socket, settings: dict, own_uid: bool, private_view: bool = False):
        self.sock = sock
        self.settings = settings
        self.own_uid = own_uid
        self.private_view = private_view  # the whole filesystem the code sees is its own (fs_view)
        self.pid = os.getpid()
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins}  # the module, as in a script
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
            # In a private view every path is the call's own; otherwise only the working dir is.
            if not self.private_view and (os.path.isabs(name) or ".." in name.split("/")):
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
        sys.stdin = open(0, closefd=False)

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
        status, exit_code, note, failure = "ok", 0, "", None
        signal.signal(signal.SIGINT, signal.default_int_handler)
        capture, limit_note = self._capture()
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
            status, exit_code, note, failure = (*self._classify(error), error)
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
        elif failure is not None and at_process_limit(failure):  # the code's processes hold every slot, forking on
            self.kill_others()
            limit_note = self._limit_note()
        return {
            "status": status,
            "stdout": stdout,
            "stderr": stderr + note + limit_note,
            "exit_code": exit_code,
            "duration_s": time.perf_counter() - started,
        }

    def _capture(self) -> tuple[OutputCapture, str]:
        """The call's output capture, and a note when processes an earlier call's code left running (a fork bomb
        that ran on after its call ended) held every process slot, so its thread could not start: they are
        stopped, and the session goes on, rather than the executor dying of the failed thread. The killed ones
        hold their slots until their new parent reaps them, so the thread is tried again for a while."""
        limit = int(self.settings["max_output_bytes"])
        try:
            return OutputCapture(limit, self.devnull), ""
        except RuntimeError as error:
            if not at_process_limit(error):
                raise
        deadline = time.monotonic() + SLOTS_FREED_S
        while True:
            self.kill_others()
            try:
                return OutputCapture(limit, self.devnull), self._limit_note()
            except RuntimeError as error:
                if not at_process_limit(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    def _limit_note(self) -> str:
        return AT_LIMIT_NOTE.format(limit=self.settings["max_processes"])

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
        if state["view"]:
            fs_view.enter_view(state["view"], state["view_binds"], int(settings["disk_mb"]))
            workdir = fs_view.make_session_dir(state["workdir"])
        elif state["private_tmp"]:
            jail.private_tmp(int(settings["disk_mb"]), keep=state["python_paths"])
            workdir = fs_view.make_session_dir(state["workdir"])
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
        if state["view"] and not state["own_uid"]:
            jail.drop_capabilities()  # without its own uid it is root in its user namespace: no way out of the view
        os.chdir(workdir)
        if state["private_tmp"]:  # the template has prepared both once for all executors
            sys.path[:] = state["import_path"]
        else:
            set_environment(workdir)
            sys.path[:] = import_path(workdir)
        executor = Executor(sock, settings, state["own_uid"], bool(state["view"]))
        # Pay this process's copy-on-write page faults now, while it waits as a spare.
        executor.run_cell({"code": "None", "timeout": 1})
        executor.cells = 0
    except BaseException as error:  # noqa: BLE001
        sock.sendall(
            encode_frame(
                {
                    "status": "error",
                    "stdout": "",
                    "stderr": f"sandbox setup failed: {error}\n",
                    "exit_code": 1,
                    "duration_s": 0.0,
                }
            )
        )
        os._exit(70)
    executor.serve()
