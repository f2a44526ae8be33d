"""SandboxFusion's own runner cases, as we wrote them, against a real `agentdata sandbox serve`.

bytedance/SandboxFusion checks its python runner (sandbox/tests/runners/test_python.py: output,
timeout, assertion and syntax errors, files in nested folders, stdin, `fetch_files` of a relative
and an absolute path) and its pytest runner (test_pytest.py: the same test code passes or fails
under `language: "pytest"` and is a plain script under `python`). These are our equivalents, sent
through the real `sandbox-fusion` client (its own venv, scripts/peers.sh) to the service started
by the CLI, with checks on the raw HTTP answer where the client hides a field.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.sandboxfusion_standin import free_port
from tests.test_sandbox_fusion import sfclient_python

PASSING_TESTS = """
def word_count(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


class TestWordCount:
    def test_case_is_ignored(self):
        assert word_count("Case case CASE") == {"case": 3}

    def test_reads_a_file(self, tmp_path, capsys):
        path = tmp_path / "words.txt"
        path.write_text("a b a")
        print(word_count(path.read_text()))
        assert capsys.readouterr().out == "{'a': 2, 'b': 1}\\n"
"""
FAILING_TESTS = PASSING_TESTS.replace('{"case": 3}', '{"case": 2}')


@pytest.fixture(scope="module")
def serve():
    """`agentdata sandbox serve` as a user starts it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--port", str(port), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            health = httpx.get(f"{url}/health", timeout=1).json()
            break
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"sandbox serve did not start: {process.stderr.read()[-2000:]}")
            time.sleep(0.2)
    yield url, health
    process.terminate()
    process.wait(timeout=30)


def run_code(url: str, **request) -> dict:
    return httpx.post(f"{url}/run_code", json={"language": "python", **request}, timeout=60).json()


# The same cases through the real client: its models parse every answer, so a field it cannot read fails here.
CLIENT_SCRIPT = r"""
import json, sys
from concurrent.futures import ThreadPoolExecutor
from sandbox_fusion import RunCodeRequest, run_code
endpoint, cases = sys.argv[1], json.loads(sys.argv[2])
def call(fields):
    reply = run_code(RunCodeRequest(**fields), endpoint=endpoint, max_attempts=1)
    run = reply.run_result
    return {"status": reply.status.value, "run_status": run.status.value, "return_code": run.return_code,
            "stdout": run.stdout, "stderr": run.stderr, "files": reply.files}
with ThreadPoolExecutor(4) as pool:  # as a client's many rollouts would send them
    out = dict(zip(cases, pool.map(call, cases.values())))
print("RESULT" + json.dumps(out))
"""


def sandboxfusion_cases() -> dict:
    secret = base64.b64encode(b"a nested secret").decode()
    return {
        "print": dict(language="python", code="print(123)", run_timeout=5),
        "timeout": dict(language="python", code="import time; time.sleep(0.5)", run_timeout=0.1),
        "assertion": dict(language="python", code="assert 1 == 2", run_timeout=5),
        "syntax": dict(language="python", code="int a = 1", run_timeout=5),
        "file_read": dict(
            language="python",
            code="print(open('d1/d2/d3/flag').read())",
            run_timeout=5,
            files={"d1/d2/d3/flag": secret},
        ),
        "stdin": dict(language="python", code="print(int(input()))", run_timeout=5, stdin="65535"),
        "fetch": dict(
            language="python",
            code="open('a.txt', 'w').write('secret'); open('/mnt/b', 'w').write('sauce')",
            run_timeout=5,
            fetch_files=["a.txt", "/mnt/b"],
        ),
        "pytest_pass": dict(language="pytest", code=PASSING_TESTS, run_timeout=30),
        "pytest_imports_a_file": dict(
            language="pytest",
            code="from helper import double\n\ndef test_double():\n    assert double(21) == 42\n",
            files={"helper.py": base64.b64encode(b"def double(x):\n    return 2 * x\n").decode()},
            run_timeout=30,
        ),
        "pytest_fail": dict(language="pytest", code=FAILING_TESTS, run_timeout=30),
        "pytest_as_python": dict(language="python", code=FAILING_TESTS, run_timeout=5),
    }


def test_sandboxfusion_runner_cases_through_the_real_client(serve):
    url, health = serve
    if not health["isolation"]["private_view"]:
        pytest.skip(f"this kernel allows no private filesystem view: {health['isolation']['warnings']}")
    python = sfclient_python()
    if python is None:
        pytest.skip("the sandbox-fusion client is not installed: run `bash scripts/peers.sh sfclient`")
    done = subprocess.run(
        [str(python), "-c", CLIENT_SCRIPT, url, json.dumps(sandboxfusion_cases())],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.split("RESULT", 1)[1])
    assert (got["print"]["status"], got["print"]["stdout"].strip()) == ("Success", "123")
    assert (got["timeout"]["status"], got["timeout"]["run_status"]) == ("Failed", "TimeLimitExceeded")
    for name, error in (("assertion", "AssertionError"), ("syntax", "SyntaxError: invalid syntax")):
        assert (got[name]["status"], got[name]["run_status"]) == ("Failed", "Finished"), got[name]
        assert error in got[name]["stderr"]
    assert got["file_read"]["status"] == "Success" and "a nested secret" in got["file_read"]["stdout"]
    assert (got["stdin"]["status"], got["stdin"]["stdout"]) == ("Success", "65535\n")
    fetched = got["fetch"]
    assert fetched["status"] == "Success", fetched
    assert {name: base64.b64decode(data).decode() for name, data in fetched["files"].items()} == {
        "a.txt": "secret",
        "/mnt/b": "sauce",
    }
    assert got["pytest_pass"]["status"] == "Success", got["pytest_pass"]["stdout"][-2000:]
    assert "2 passed" in got["pytest_pass"]["stdout"]
    assert got["pytest_imports_a_file"]["status"] == "Success"  # the file runs beside the files sent with it
    assert (got["pytest_fail"]["status"], got["pytest_fail"]["return_code"]) == ("Failed", 1)
    assert "1 failed, 1 passed" in got["pytest_fail"]["stdout"]
    assert got["pytest_as_python"]["status"] == "Success"  # under `python` the tests are only defined
    assert not os.path.exists("/mnt/b")  # the call's /mnt/b was its own


def test_a_write_to_an_absolute_path_is_the_calls_own(serve):
    url, health = serve
    if not health["isolation"]["private_view"]:
        pytest.skip(f"this kernel allows no private filesystem view: {health['isolation']['warnings']}")
    first = run_code(url, code="open('/mnt/b', 'w').write('first')", fetch_files=["/mnt/b"])
    assert base64.b64decode(first["files"]["/mnt/b"]) == b"first"
    second = run_code(url, code="import os\nprint(os.path.exists('/mnt/b'))", fetch_files=["/mnt/b"])
    assert second["run_result"]["stdout"] == "False\n" and second["files"] == {}
    assert not os.path.exists("/mnt/b")


def test_an_unknown_language_names_the_ones_served(serve):
    url, _ = serve
    reply = httpx.post(f"{url}/run_code", json={"code": "x", "language": "cobol"}, timeout=30)
    assert reply.status_code == 400 and "python, python3, pytest" in reply.json()["message"]
