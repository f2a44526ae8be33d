"""Runs one program against a batch of tests inside ONE sandbox call (sent as source text).

This file is not imported by agentdata: `agentdata.verify.code` sends its source to the
sandbox, which runs it in a fresh, isolated, network-less process; the payload (program,
test inputs, limits) arrives on stdin as JSON. Expected outputs never enter the sandbox:
the program cannot read them, and the grader compares outside.

For each test the harness gives the program a fresh `__main__` namespace, the test's input
on fd 0 (so `input()`, `sys.stdin.buffer` and `open(0)` all work), a capped in-memory
stdout, and a wall-clock alarm; then writes one line `<nonce> <json>` to fd 1 with the
status, the output (whole when small; else its normalised form compressed when that fits, and
always the hash of that form), and the time. A test that leaves something behind (a thread
still running, a child process) ends the batch after its own report: the grader runs the rest
in fresh calls. Whatever the
program does is caught here; what cannot be caught (a hard crash, a blocked signal) ends
the call, and the grader notices the missing reports.
"""

import base64
import builtins
import hashlib
import io
import json
import os
import re
import signal
import sys
import threading
import time
import zlib


class TestTimeout(BaseException):
    """Raised by the alarm: a BaseException, so the program's own `except Exception` lets it through."""


class OutputLimit(BaseException):
    pass


class CappedSink(io.RawIOBase):
    def __init__(self, limit, raise_on_overflow=True):
        self.data = bytearray()
        self.limit = limit
        self.raise_on_overflow = raise_on_overflow

    def writable(self):
        return True

    def write(self, chunk):
        if len(self.data) + len(chunk) > self.limit:
            if self.raise_on_overflow:
                raise OutputLimit()
            return len(chunk)
        self.data += chunk
        return len(chunk)


def normalised(text):
    """LiveCodeBench's form: the whole text stripped, then each line stripped."""
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def digest_form(text, compare):
    """What a too-long output is hashed as: its normalised form under the problem's comparison rule."""
    if compare == "codecontests":  # whitespace-separated tokens, lower case
        return " ".join(token.lower() for token in re.split(r"[ \n\t\r\v]+", text) if token)
    return normalised(text)


def feed_stdin(text):
    fd = os.memfd_create("test-stdin")
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    return open(0, closefd=False)


def on_alarm(signum, frame):
    raise TestTimeout()


def call_function(namespace, func_name, test_input):
    arguments = [json.loads(line) for line in test_input.split("\n") if line.strip()]
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, func_name):
        function = getattr(solution(), func_name)
    else:
        function = namespace[func_name]
    result = function(*arguments)
    if isinstance(result, tuple):
        result = list(result)
    return json.dumps(result)


def join_new_threads(before, deadline):
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon:
            thread.join(max(deadline - time.monotonic(), 0))


def left_behind(harness_pid, before):
    if any(thread not in before and thread.is_alive() for thread in threading.enumerate()):
        return True
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True  # a child is still running


def run_one(code, payload, test_input, streams):
    stdout_sink = CappedSink(payload["output_limit_bytes"])
    sys.stdin = feed_stdin(test_input if payload["mode"] == "stdin" else "")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(stdout_sink), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(CappedSink(1 << 16, False)), encoding="utf-8", errors="replace")
    status, error, returned = "ok", "", None
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    before = set(threading.enumerate())
    started = time.monotonic()
    deadline = started + payload["time_limit_s"]
    signal.setitimer(signal.ITIMER_REAL, payload["time_limit_s"])
    try:
        try:
            exec(code, namespace)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                status, error = "error", f"SystemExit({exit_.code!r})"
        if status == "ok" and payload["mode"] == "functional":
            returned = call_function(namespace, payload["func_name"], test_input)
        join_new_threads(before, deadline)
        sys.stdout.flush()
    except TestTimeout:
        status, error = "timeout", "time limit exceeded"
    except OutputLimit:
        status, error = "output_limit", "output limit exceeded"
    except MemoryError:
        status, error = "error", "MemoryError"
    except BaseException as raised:  # noqa: BLE001 -- whatever the program raises is its verdict
        status, error = "error", f"{type(raised).__name__}: {raised}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.monotonic() - started
    if os.getpid() != streams["pid"]:
        os._exit(0)  # a child the program forked must never report
    sys.stdin, sys.stdout, sys.stderr = streams["stdio"]
    sys.setrecursionlimit(streams["recursion_limit"])
    output = returned if returned is not None else stdout_sink.data.decode("utf-8", "replace")
    report = {"status": status, "error": error, "time_s": round(elapsed, 4), "bytes": len(output)}
    form = digest_form(output, payload.get("compare"))
    report["sha"] = hashlib.sha256(form.encode("utf-8")).hexdigest()
    report["parts"] = form.count(" " if payload.get("compare") == "codecontests" else "\n") + 1
    if len(output) <= payload["inline_bytes"]:
        report["output"] = output
    else:  # too long to send as it is: its normalised form compressed, where that fits (numbers compress well)
        packed = base64.b64encode(zlib.compress(form.encode("utf-8"), 6)).decode("ascii")
        if len(packed) <= payload["inline_bytes"]:
            report["output_z"] = packed
    return report, left_behind(streams["pid"], before)


def main():
    payload = json.loads(sys.stdin.read())
    signal.signal(signal.SIGALRM, on_alarm)
    streams = {
        "stdio": (sys.stdin, sys.stdout, sys.stderr),
        "pid": os.getpid(),
        "recursion_limit": sys.getrecursionlimit(),
    }
    report_fd = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # fd-level writes of the program go nowhere
    try:
        code = compile(payload["program"], "<solution>", "exec")
    except (SyntaxError, ValueError) as error:
        line = json.dumps({"compile_error": f"{type(error).__name__}: {error}"[:300]})
        os.write(report_fd, f"{payload['nonce']} {line}\n".encode())
        return
    for index, test_input in enumerate(payload["inputs"]):
        report, stop = run_one(code, payload, test_input, streams)
        report["index"] = index
        os.write(report_fd, f"{payload['nonce']} {json.dumps(report)}\n".encode())
        if stop:
            return


if __name__ == "__main__":
    main()
