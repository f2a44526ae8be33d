"""The sandbox's worker process: one warm template that forks isolated executors.

Run as a script (`python -I worker.py CTRL_FD SETTINGS_JSON`), never imported into the
template by package, so the template holds only the stdlib and the preloaded modules. Its
parts are stdlib-only modules beside it, imported as top-level modules: `jail` (isolation
primitives), `worker_executor` (the executor, one per session or stateless call),
`worker_capture` (output capture) and `worker_framing` (host <-> executor messages).

Template: imports the common modules once, enters a network namespace and a private
mount namespace, then forks an executor per request. A fork of a warm process costs
about a millisecond instead of a Python start-up.

Host <-> template: SOCK_SEQPACKET, one JSON message per packet, executor sockets and
pidfds passed with SCM_RIGHTS. Host <-> executor: a stream socket, 4-byte length + JSON.
"""

from __future__ import annotations

import ast
import errno
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fs_view  # noqa: E402
    import jail  # noqa: E402
    from worker_capture import OutputCapture  # noqa: E402
    from worker_executor import executor_main, import_path, python_paths, set_environment  # noqa: E402

    sys.path.pop(0)
else:  # importable by package, e.g. to read it; the host only ever runs it as a script
    from agentdata.sandbox import fs_view, jail
    from agentdata.sandbox.worker_capture import OutputCapture
    from agentdata.sandbox.worker_executor import executor_main, import_path, python_paths, set_environment

PR_SET_CHILD_SUBREAPER = 36
VIEW_ROOT = "/dev/shm"  # covered, in the template's own mount namespace, by the views' skeleton (fs_view)


class Template:
    def __init__(self, ctrl: socket.socket, settings: dict):
        self.ctrl = ctrl
        self.settings = settings
        self.executors: dict[int, dict] = {}  # pid -> {"uid", "workdir"}
        self.killers: dict[int, int] = {}  # killer pid -> uid (killers forked here: the fallback)
        self.killer: socket.socket | None = None  # the lean killer process's channel (worker_killer.py)
        self.killer_uids: list[int] = []  # uids sent to it, not yet answered
        self.killer_pid: int | None = None
        self.selector: selectors.BaseSelector | None = None
        self.warnings: list[str] = []
        # view: the root of the private filesystem views (fs_view), or None where the kernel allows none
        self.state = {"own_uid": False, "private_tmp": False, "tmp_root": "/tmp", "view": None, "view_binds": []}

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
            set_environment(self.state["workdir"])
            self.state["import_path"] = import_path(self.state["workdir"])
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
                drop_uid = is_root and self.settings["drop_privileges"]
                self.state["private_tmp"] = self._probe_view(drop_uid) or self._probe_private_tmp()
        if self.state["private_tmp"]:  # the host paths bound under the call's /tmp: its working dir avoids them
            bound = [target for _, target in self.state["view_binds"]] or self.state["python_paths"]
            self.state["workdir"] = fs_view.session_dir([os.path.abspath(path) for path in bound if path])
        else:
            import tempfile

            self.state["tmp_root"] = tempfile.mkdtemp(prefix="agentdata-sandbox-")
            os.chmod(self.state["tmp_root"], 0o711)
        if self.settings["drop_privileges"] and is_root:
            self.state["own_uid"] = True
            needed = self.state["python_paths"]
            if self.state["view"]:
                hidden = []  # the view binds them in under open parents
            elif self.state["private_tmp"]:
                hidden = jail.expose_paths(needed)
            else:
                hidden = [p for p in needed if p and os.path.exists(p) and jail._closed_ancestor(p)]
            if hidden:
                self.warnings.append(f"sandboxed code cannot read {sorted(set(hidden))[:3]}: imports from there fail")
        elif self.settings["drop_privileges"]:
            self.warnings.append(
                "not root: executors keep the host's uid, so the process limit is not per sandbox "
                "and leftover processes are found by session id"
            )

    def _probe_view(self, drop_uid: bool) -> bool:
        """Build the private filesystem views' skeleton, then try one in a throwaway child, as an executor would.

        The skeleton lives on a tmpfs mounted over /dev/shm in this process's own mount namespace: the
        host sees nothing of it (no folder of ours in its /tmp for a cleaner to remove under us), and
        nothing here uses /dev/shm. Executors never see it either: they chroot into their own view.
        """
        root = VIEW_ROOT if os.path.isdir(VIEW_ROOT) else None
        try:
            if root is None:
                raise OSError(f"no {VIEW_ROOT} to mount the skeleton on")
            binds = fs_view.build_view(root, self.state["python_paths"])
        except OSError as error:
            self.warnings.append(f"no private filesystem view per call ({error}); trying a private /tmp only")
            return False
        pid = os.fork()
        if pid == 0:
            try:
                fs_view.enter_view(root, binds, 1)
                if drop_uid:  # as executors will: an unprivileged uid must be able to write there
                    jail.drop_to_uid(99_999_999)
                with open("/mnt/agentdata-probe", "w") as probe:
                    probe.write("x")
                os._exit(2 if os.path.exists(f"{root}/skeleton") else 0)  # the view must not show the skeleton's source
            except BaseException:  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            self.warnings.append("cannot enter a private filesystem view per call; trying a private /tmp only")
            jail.unmount(root)
            return False
        self.state["view"], self.state["view_binds"] = root, binds
        return True

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
        if self.killer is not None:
            try:
                self.killer.send(str(uid).encode())
                self.killer_uids.append(uid)
                return
            except OSError:
                self._killer_gone()
        pid = os.fork()  # the fallback: a killer forked from this process (costlier: see worker_killer)
        if pid == 0:
            try:
                jail.drop_to_uid(uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(0)
        self.killers[pid] = uid

    def start_killer(self) -> None:
        """The lean killer process (worker_killer.py), in this process's namespaces; none where it cannot start."""
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_killer.py")
        try:
            self.killer_pid = subprocess.Popen(
                [sys.executable, "-I", "-S", script, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            ).pid
        except OSError as error:
            self.warnings.append(f"no lean killer process ({error}): each closed session forks one from the template")
            ours.close()
        else:
            self.killer = ours
        finally:
            theirs.close()

    def on_killer(self) -> None:
        """A uid the killer is done with, or its end: then the uids it still owed are killed the fallback way."""
        try:
            answer = self.killer.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            answer = b""
        if not answer:
            self._killer_gone()
            return
        self.killer_uids.remove(int(answer))
        self.send({"op": "killed", "uid": int(answer)})

    def _killer_gone(self) -> None:
        killer, self.killer = self.killer, None
        if self.selector is not None:
            self.selector.unregister(killer)
        killer.close()
        owed, self.killer_uids = self.killer_uids, []
        for uid in owed:
            self.kill_uid(uid)

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
                if not self.state["own_uid"]:
                    # Its group outlives it: a host kill that comes after this reap finds no executor of the uid.
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
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
        if self.killer is not None:
            self._killer_gone()  # the last kills are waited for below, as forked killers
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
        self.send(
            {
                "op": "ready",
                "warnings": self.warnings,
                "own_uid": self.state["own_uid"],
                "private_tmp": self.state["private_tmp"],
                "private_view": bool(self.state["view"]),
                "pid": os.getpid(),
                "killer_pid": self.killer_pid,
            }
        )
        selector = selectors.DefaultSelector()
        selector.register(self.ctrl, selectors.EVENT_READ, "ctrl")
        selector.register(wake_read, selectors.EVENT_READ, "child")
        if self.killer is not None:
            selector.register(self.killer, selectors.EVENT_READ, "killer")
        self.selector = selector
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
                if key.data == "killer":
                    self.on_killer()
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
    if template.state["own_uid"]:
        template.start_killer()
    template.warm_up()
    template.serve()


if __name__ == "__main__":
    main()
