"""Grade a program against its tests by running it in the sandbox.

The program is the last ```python block of the final answer (LiveCodeBench's convention).
It runs in stateless sandbox calls (a fresh, isolated, network-less process each), the
tests of a problem batched into one call by a harness sent as source: `code_harness` for
stdin and functional tests, `bench_harness` for tests that are code (HumanEval's check,
MBPP's asserts, BigCodeBench's unittest, KodCode's pytest, EvalPlus's differential inputs),
with a wall-clock limit per test and one for the whole problem. Stdin outputs are compared
by the problem's rule (`outputs_match`: LiveCodeBench's, or CodeContests' tokens); functional
results as JSON values; expected outputs of those never enter the sandbox. A batch that ends
early (a crash the harness could not catch, the call's own limit) is picked up again: its
first unreported test runs alone, so its verdict is its own, and the rest continue in a
fresh batch. A library the tests need that the sandbox lacks, or a benchmark's reference
solution that fails, is no verdict on the program: the grade says so (`unavailable`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
import zlib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentdata.code_tests import SCRIPT_TESTTYPES, CodeTests

HARNESS_SOURCE = (Path(__file__).with_name("code_harness.py")).read_text(encoding="utf-8")
BENCH_HARNESS_SOURCE = (Path(__file__).with_name("bench_harness.py")).read_text(encoding="utf-8")
# bench_harness imports it from the call's working dir: it travels as a file of the call.
BENCH_FILES = {"bench_environments.py": (Path(__file__).with_name("bench_environments.py")).read_text(encoding="utf-8")}
DEFAULT_TEST_TIMEOUT_S = 6.0  # LiveCodeBench's, for layouts that name no limit of their own
_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
# What a call that ended without reporting says about the test it was running.
_CALL_STATUS_VERDICT = {"timeout": "timeout", "oom": "memory", "killed": "crash", "error": "crash", "ok": "crash"}


@dataclass
class CodeLimits:
    test_timeout_s: float | None = field(
        default=None,
        metadata={
            "help": "Wall-clock seconds one test may run; default: the benchmark's own (LiveCodeBench 6, "
            "HumanEval and MBPP 3 for all, BigCodeBench 240, CodeContests 10, KodCode 30, EvalPlus 4 or 4x "
            "the reference's time per input)."
        },
    )
    total_timeout_s: float = field(
        default=60.0, metadata={"help": "Wall-clock seconds all tests of one problem may take."}
    )
    output_limit_mb: float = field(default=16.0, metadata={"help": "Output one test may print (MiB); more fails it."})
    memory_mb: int | None = field(
        default=None, metadata={"help": "Memory of the program (MiB); default: the sandbox's."}
    )

    def __post_init__(self) -> None:
        if min(self.test_timeout_s or 1, self.total_timeout_s, self.output_limit_mb) <= 0:
            raise ValueError("code test limits must be positive")

    def per_test_s(self, tests: CodeTests) -> float:
        """One test's limit: the one set here, else the benchmark's own."""
        return self.test_timeout_s or tests.time_limit_s or DEFAULT_TEST_TIMEOUT_S


@dataclass
class CaseResult:
    index: int
    status: str  # passed | wrong | error | timeout | output_limit | memory | crash | not_run | missing_library
    public: bool = False
    time_s: float = 0.0
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class CodeGrade:
    results: list[CaseResult]
    reason: str = ""  # "no code", "compile error: ...", or "" when the program ran
    test_s: float = 0.0
    unavailable: str = ""  # why the tests could not judge the program (a missing library): no verdict on it

    @property
    def passed(self) -> int:
        return sum(result.passed for result in self.results)

    @property
    def fraction(self) -> float:
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def correct(self) -> bool:
        return bool(self.results) and self.passed == len(self.results)

    def summary(self) -> dict[str, Any]:
        """What a trajectory keeps: counts, the reason, and each test's status and time."""
        return {
            "passed": self.passed,
            "total": len(self.results),
            "fraction": self.fraction,
            "reason": self.reason,
            **({"unavailable": self.unavailable} if self.unavailable else {}),
            "test_s": round(self.test_s, 4),
            "results": [{"status": r.status, "public": r.public, "time_s": r.time_s} for r in self.results],
        }


# --------------------------------------------------------------------------- comparing


def final_program(text: str | None) -> str | None:
    """The last ```python block of `text`, or None."""
    blocks = _PYTHON_BLOCK.findall(text or "")
    return blocks[-1] if blocks and blocks[-1].strip() else None


def normalised(text: str) -> str:
    """LiveCodeBench's form: the whole output stripped, then each line stripped."""
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def outputs_match(actual: str, expected: str) -> bool:
    """LiveCodeBench's stdin rule: same lines after stripping; a differing line may still match as
    the same sequence of decimal numbers ("1.0" == "1.00"); anything else must be exact."""
    actual_lines, expected_lines = normalised(actual).split("\n"), normalised(expected).split("\n")
    if len(actual_lines) != len(expected_lines):
        return False
    return all(a == e or _same_decimals(a, e) for a, e in zip(actual_lines, expected_lines))


def _same_decimals(actual: str, expected: str) -> bool:
    try:
        return [Decimal(token) for token in actual.split()] == [Decimal(token) for token in expected.split()]
    except (InvalidOperation, ValueError):
        return False


_CONTEST_SPACE = re.compile(r"[ \n\t\r\v]+")
# What absl::SimpleAtod reads (one leading sign, decimal or exponent form, inf, nan); tokens are lower case here.
_CONTEST_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?|inf(?:inity)?|nan)")


def contest_tokens(text: str) -> list[str]:
    """CodeContests' view of an output: whitespace-separated tokens, lower case."""
    return [token.lower() for token in _CONTEST_SPACE.split(text) if token]


def codecontests_match(actual: str, expected: str) -> bool:
    """CodeContests' rule (execution/tester_sandboxer.cc): the same tokens, case ignored; where the token
    lists differ, each pair must match, two numbers within 1e-5 of each other and anything else exactly."""
    actual_tokens, expected_tokens = contest_tokens(actual), contest_tokens(expected)
    if actual_tokens == expected_tokens:
        return True
    if len(actual_tokens) != len(expected_tokens):
        return False
    return all(_contest_values_match(a, e) for a, e in zip(actual_tokens, expected_tokens))


def _contest_values_match(actual: str, expected: str) -> bool:
    if not (_CONTEST_NUMBER.fullmatch(actual) and _CONTEST_NUMBER.fullmatch(expected)):
        return actual == expected
    return abs(float(actual) - float(expected)) < 1e-5  # nan never matches, as in C++


COMPARE = {"livecodebench": (outputs_match, normalised), "codecontests": (codecontests_match, contest_tokens)}
RECHECK = "recheck"  # a long output known only by its hash: run the test alone, where more of it comes back
MAX_UNPACKED_BYTES = 64 << 20


def values_match(actual_json: str, expected_json: str) -> bool:
    try:
        return json.loads(actual_json) == json.loads(expected_json)
    except (json.JSONDecodeError, TypeError):
        return False


def _digest(form: str | list[str]) -> str:
    text = " ".join(form) if isinstance(form, list) else form
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _judge(report: dict[str, Any], test: dict[str, Any], compare: str) -> str:
    if test["testtype"] in SCRIPT_TESTTYPES:  # the harness ran the benchmark's own check: its status is the verdict
        return str(report.get("status") or "error")
    if report.get("status") != "ok":
        return str(report.get("status") or "error")
    expected = test["output"]
    if test["testtype"] == "functional":
        return "passed" if "output" in report and values_match(report["output"], expected) else "wrong"
    match, form = COMPARE[compare]
    if "output" in report:
        return "passed" if match(report["output"], expected) else "wrong"
    if "output_z" in report:  # the normalised form, compressed: both rules read it as they read an output
        packed = _unpacked(report["output_z"])
        if packed is not None:
            return "passed" if match(packed, expected) else "wrong"
    expected_form = form(expected)
    if report.get("sha") == _digest(expected_form):
        return "passed"
    if _tolerance_could_matter(report, expected_form):
        return RECHECK  # only the hash came back, and it differs: the rule may still match the whole output
    return "wrong"


_NON_INTEGER = re.compile(r"\d[.eE]|[.]\d")


def _tolerance_could_matter(report: dict[str, Any], expected_form: str | list[str]) -> bool:
    """Whether a hash mismatch could still be a match: as many lines (tokens) as expected, and numbers
    that are not integers, where "1.0" may stand for "1.00" (LiveCodeBench) or 1e-5 may separate them."""
    parts = len(expected_form) if isinstance(expected_form, list) else expected_form.count("\n") + 1
    text = " ".join(expected_form) if isinstance(expected_form, list) else expected_form
    return report.get("parts") == parts and bool(_NON_INTEGER.search(text))


def _unpacked(packed: str) -> str | None:
    """A compressed output from the harness, decompressed no further than the output limit allows."""
    try:
        decompressor = zlib.decompressobj()
        data = decompressor.decompress(base64.b64decode(packed, validate=True), MAX_UNPACKED_BYTES)
    except (ValueError, zlib.error):
        return None
    return None if decompressor.unconsumed_tail else data.decode("utf-8", "replace")


# --------------------------------------------------------------------------- running


def grade_code(tests: CodeTests, text: str | None, sandbox: Any, limits: CodeLimits | None = None) -> CodeGrade:
    """Run the final program of `text` on every test; never raises for anything the program does."""
    limits = limits or CodeLimits()
    program = final_program(text)
    if program is None:
        return CodeGrade(_all(tests, "not_run"), reason="no code")
    return _Run(tests, program, sandbox, limits).run()


def _all(tests: CodeTests, status: str, error: str = "") -> list[CaseResult]:
    return [CaseResult(index, status, bool(test.get("public")), 0.0, error) for index, test in enumerate(tests.tests)]


class _Run:
    def __init__(self, tests: CodeTests, program: str, sandbox: Any, limits: CodeLimits):
        self.tests, self.program, self.sandbox, self.limits = tests, program, sandbox, limits
        self.mode = tests.mode
        self.script = self.mode in SCRIPT_TESTTYPES  # tests that are code: bench_harness runs them
        self.per_test_s = limits.per_test_s(tests)
        self.results: dict[int, CaseResult] = {}
        self.reason = ""
        self.unavailable = ""
        self.test_s = 0.0

    def run(self) -> CodeGrade:
        # Never below one test's own limit: BigCodeBench gives a task 240 s, more than the usual total.
        deadline = time.monotonic() + max(self.limits.total_timeout_s, self._budget(1))
        pending = list(range(len(self.tests.tests)))
        while pending and not self.reason and not self.unavailable and time.monotonic() < deadline:
            batch = pending
            reported, status = self._call(batch, deadline)
            pending = [index for index in pending if index not in reported]
            if pending and status != "stopped" and not self.reason and not self.unavailable:
                suspect = pending.pop(0)  # the call ended while this test ran: run it alone for its verdict
                if len(batch) > 1:
                    reported, status = self._call([suspect], deadline)
                if suspect not in reported and not self.unavailable:
                    self._set(
                        suspect, _CALL_STATUS_VERDICT.get(status, "crash"), 0.0, f"the sandbox call ended: {status}"
                    )
        for index in [i for i, result in self.results.items() if result.status == RECHECK]:
            # Alone, a test gets the whole budget for its output: compressed, most long outputs fit.
            reported, _ = self._call([index], deadline, alone=True)
            if index not in reported or self.results[index].status == RECHECK:
                self._set(index, "wrong", self.results[index].time_s, "the output differs (compared by its hash)")
        left = "missing_library" if self.unavailable.startswith("missing") else "not_run"
        for index in range(len(self.tests.tests)):
            if index not in self.results:
                status = left if self.unavailable else "error" if self.reason else "not_run"
                self._set(index, status, 0.0, self.unavailable or self.reason)
        ordered = [self.results[index] for index in range(len(self.tests.tests))]
        return CodeGrade(ordered, reason=self.reason, test_s=self.test_s, unavailable=self.unavailable)

    def _budget(self, count: int) -> float:
        """The wall-clock a call running `count` tests may take, the harness's own outer limits included."""
        if self.mode == "diff":  # the reference's values first, then EvalPlus's min(60, limits) + 3
            return 30.0 + 63.0 + 5.0
        if self.script:  # one forked child per test, each with its harness's outer limit (at most the limit + 5 s)
            return count * (self.per_test_s + 8.0)
        return count * self.per_test_s + 2.0

    def _payload(self, indices: list[int], nonce: str, alone: bool = False) -> dict[str, Any]:
        tests = self.tests
        payload = {
            "program": self.program,
            "mode": self.mode,
            "func_name": tests.func_name,
            "inputs": [tests.tests[index]["input"] for index in indices],
            "nonce": nonce,
            "time_limit_s": self.per_test_s,
        }
        if self.script:
            payload |= {
                "program": tests.prefix + self.program,  # HumanEval: prompt + completion, as its harness builds it
                "libs": tests.libs,
                "reference": tests.reference,
                "atol": tests.atol,
                "dataset": tests.dataset,
            }
        else:
            payload |= {
                "compare": tests.compare,
                "output_limit_bytes": int(self.limits.output_limit_mb * 1024 * 1024),
                # What comes back inline must fit the sandbox's captured output; a test rerun alone gets it all.
                "inline_bytes": 24576 if alone else max(256, min(16384, 24576 // len(indices))),
            }
        return payload

    def _call(self, indices: list[int], deadline: float, alone: bool = False) -> tuple[set[int], str]:
        """Run `indices` in one sandbox call; returns the tests it reported and how the call ended."""
        nonce = secrets.token_hex(8)
        budget = min(deadline - time.monotonic(), self._budget(len(indices)))
        if budget <= 0:
            return set(), "timeout"
        result = self.sandbox.run(
            BENCH_HARNESS_SOURCE if self.script else HARNESS_SOURCE,
            timeout=budget,
            stdin=json.dumps(self._payload(indices, nonce, alone)),
            files=BENCH_FILES if self.script else None,
            display_last=False,
            memory_mb=self.limits.memory_mb,
        )
        self.test_s += float(getattr(result, "duration_s", 0.0) or 0.0)
        reported: set[int] = set()
        for report in _reports(result.stdout, nonce):
            if "compile_error" in report:
                self.reason = f"compile error: {report['compile_error']}"
                return reported, "ok"
            if "missing" in report:
                self.unavailable = f"missing libraries: {', '.join(map(str, report['missing']))}"
                return reported, "ok"
            if "reference_error" in report:
                self.unavailable = f"the benchmark's reference solution failed: {report['reference_error']}"
                return reported, "ok"
            index = indices[int(report["index"])]
            self._set(
                index,
                _judge(report, self.tests.tests[index], self.tests.compare),
                float(report.get("time_s", 0.0)),
                str(report.get("error") or ""),
            )
            reported.add(index)
        ended_cleanly = result.status == "ok" and reported
        return reported, "stopped" if ended_cleanly else result.status

    def _set(self, index: int, status: str, time_s: float, error: str) -> None:
        public = bool(self.tests.tests[index].get("public"))
        self.results[index] = CaseResult(index, status, public, round(time_s, 4), error[:200])


def _reports(stdout: str, nonce: str) -> list[dict[str, Any]]:
    reports = []
    for line in (stdout or "").splitlines():
        if line.startswith(nonce + " "):
            try:
                reports.append(json.loads(line[len(nonce) + 1 :]))
            except json.JSONDecodeError:
                continue
    return reports
