"""The sandbox service against hostile clients: every field type-checked (HTTP 400 naming it, never a
500), the server's limits are ceilings, a client that hangs up frees its worker, and a well-behaved
client is answered within its own limit while endless code, huge timeouts and hang-ups come in."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from agentdata.sandbox import Sandbox
from agentdata.sandbox.service import build_app
from tests.sandboxfusion_standin import ServedApp, free_port

SERVER_TIMEOUT_S = 2.0
ENDLESS = "while True:\n    pass"

# Each field, and a valid value of it: every other JSON type is refused with HTTP 400 naming the field.
RUN_CODE_FIELDS = {
    "code": "print(1)",
    "language": "python",
    "run_timeout": 1,
    "compile_timeout": 1,
    "memory_limit_MB": 256,
    "stdin": "",
    "files": {},
    "fetch_files": [],
}
SESSION_FIELDS = {
    "code": "print(1)",
    "session_id": "s",
    "timeout": 1,
    "memory_mb": 256,
    "stdin": "",
    "files": {},
    "display_last": True,
}
JSON_VALUES = {"string": "abc", "integer": 5, "number": 2.5, "boolean": True, "list": [1], "object": {"a": 1}}
SAME_KIND = {int: ("integer", "number"), float: ("integer", "number"), str: ("string",), bool: ("boolean",)}
SAME_KIND.update({dict: ("object",), list: ("list",)})
# Values of the right type that are still no limit at all, written as raw JSON (NaN is not valid JSON).
BAD_NUMBERS = {
    "run_timeout": ["NaN", "-1", "0", "1e300", "Infinity", "-Infinity", "1e400"],
    "memory_limit_MB": ["8", "1.5", "-5", "1e300", "1e400", "NaN"],
}


@pytest.fixture(scope="module")
def service():
    sandbox = Sandbox(workers=2, timeout_s=SERVER_TIMEOUT_S, memory_mb=384, prefork=1)
    server = ServedApp(build_app(sandbox))
    yield server
    server.stop()
    sandbox.close()


def wrong_values(name: str, valid: object) -> list[tuple[str, object]]:
    right = SAME_KIND[type(valid)]
    return [(kind, value) for kind, value in JSON_VALUES.items() if kind not in right]


def cases(fields: dict) -> list[tuple[str, object]]:
    return [(name, value) for name, valid in fields.items() for _, value in wrong_values(name, valid)]


@pytest.mark.parametrize(("path", "fields"), [("/run_code", RUN_CODE_FIELDS), ("/v1/run", SESSION_FIELDS)])
def test_every_field_of_a_wrong_json_type_is_a_400_naming_it(service, path, fields):
    with httpx.Client(base_url=service.url, timeout=30) as client:
        for name, value in cases(fields):
            reply = client.post(path, json={**fields, name: value})
            message = reply.json().get("message") or reply.json().get("error")
            assert reply.status_code == 400 and message.startswith(f"{name}:"), (name, value, reply.text)
        assert client.post(path, json=fields).status_code == 200  # the valid request itself runs


def test_limits_that_are_no_limit_and_bad_files_are_refused(service):
    with httpx.Client(base_url=service.url, timeout=30) as client:
        for name, raws in BAD_NUMBERS.items():
            for raw in raws:
                body = f'{{"code": "print(1)", "{name}": {raw}}}'
                reply = client.post("/run_code", content=body, headers={"content-type": "application/json"})
                assert reply.status_code == 400, (name, raw, reply.text)
                assert reply.json()["message"].startswith(("body:", f"{name}:")), reply.text
        for files, says in [
            ({"a.txt": 5}, "files['a.txt']: expected base64 text or null"),
            ({"a.txt": "not base64!"}, "files['a.txt']: not valid base64"),
            ({"": "YQ=="}, "files: a file name is empty"),
            (["a.txt"], "files: expected an object"),
        ]:
            reply = client.post("/run_code", json={"code": "print(1)", "files": files})
            assert reply.status_code == 400 and reply.json()["message"].startswith(says), reply.text
        skipped = client.post(
            "/run_code", json={"code": "import os; print(os.path.exists('n.txt'))", "files": {"n.txt": None}}
        )
        assert skipped.json()["run_result"]["stdout"] == "False\n"  # a null file is skipped, as SandboxFusion does
        long = client.post("/run_code", json={"code": "x", "run_timeout": "9" * 100_000})
        assert long.status_code == 400 and len(long.text) < 500  # the value is cut in the message
        for body in (b"not json", b"[" * 100_000, b'"a string"', b"[1, 2]"):
            reply = client.post("/run_code", content=body, headers={"content-type": "application/json"})
            assert reply.status_code == 400 and reply.json()["message"].startswith("body:"), reply.text


def test_a_body_over_the_bound_is_refused(service, monkeypatch):
    monkeypatch.setattr("agentdata.sandbox.service.MAX_BODY_BYTES", 1024)
    reply = httpx.post(f"{service.url}/run_code", json={"code": "#" * 4096}, timeout=30)
    assert reply.status_code == 413 and reply.json()["message"].startswith("body: more than")


def test_the_servers_limits_are_ceilings_a_request_can_only_lower(service):
    started = time.monotonic()
    reply = httpx.post(f"{service.url}/run_code", json={"code": ENDLESS, "run_timeout": 3600}, timeout=60).json()
    assert reply["run_result"]["status"] == "TimeLimitExceeded"
    assert time.monotonic() - started < SERVER_TIMEOUT_S + 10  # the server's 2 s, not the asked-for hour
    lowered = httpx.post(f"{service.url}/run_code", json={"code": ENDLESS, "run_timeout": 0.3}, timeout=60).json()
    assert lowered["run_result"]["execution_time"] < SERVER_TIMEOUT_S
    hog = "x = bytearray(600 * 2**20)\nprint('allocated')"
    above = httpx.post(f"{service.url}/run_code", json={"code": hog, "memory_limit_MB": 100_000}, timeout=60).json()
    assert "allocated" not in above["run_result"]["stdout"] and "MemoryError" in above["run_result"]["stderr"]
    small = "x = bytearray(200 * 2**20)\nprint('allocated')"
    below = httpx.post(f"{service.url}/run_code", json={"code": small, "memory_limit_MB": 64}, timeout=60).json()
    assert "MemoryError" in below["run_result"]["stderr"]
    session = httpx.post(f"{service.url}/v1/run", json={"code": ENDLESS, "timeout": 3600}, timeout=60).json()
    assert session["status"] == "timeout" and session["duration_s"] < SERVER_TIMEOUT_S + 5


def hang_up_after(url: str, body: dict, seconds: float) -> None:
    """Send a request, then close the connection before the answer comes."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        time.sleep(seconds)


def test_a_client_that_hangs_up_has_its_call_cancelled_and_frees_its_worker():
    with Sandbox(workers=1, timeout_s=60, memory_mb=384, prefork=1) as sandbox:
        server = ServedApp(build_app(sandbox))
        try:
            hang_up_after(server.url, {"code": ENDLESS}, 0.5)
            started = time.monotonic()
            reply = httpx.post(f"{server.url}/run_code", json={"code": "print(6 * 7)"}, timeout=30).json()
            assert reply["run_result"]["stdout"] == "42\n"
            assert time.monotonic() - started < 15  # the one worker was freed, not held for its 60 s
        finally:
            server.stop()


def test_a_well_behaved_client_is_answered_while_hostile_clients_run(service):
    stop = threading.Event()
    statuses: list[int] = []

    def hostile(body: dict | None = None, raw: str | None = None, hang_up: bool = False) -> None:
        with httpx.Client(base_url=service.url, timeout=120) as client:
            while not stop.is_set():
                if hang_up:
                    hang_up_after(service.url, body, 0.3)
                    continue
                if raw is not None:
                    reply = client.post("/run_code", content=raw, headers={"content-type": "application/json"})
                else:
                    reply = client.post("/run_code", json=body)
                statuses.append(reply.status_code)

    attackers = [
        *[{"body": {"code": ENDLESS, "run_timeout": 1e300}} for _ in range(3)],
        *[{"body": {"code": ENDLESS, "run_timeout": 80000}} for _ in range(2)],
        *[{"raw": f'{{"code": {json.dumps(ENDLESS)}, "run_timeout": NaN}}'} for _ in range(2)],
        *[{"body": {"code": ENDLESS}, "hang_up": True} for _ in range(3)],
    ]
    threads = [threading.Thread(target=hostile, kwargs=kwargs, daemon=True) for kwargs in attackers]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)  # the attack is under way
        own_limit_s = 4 * SERVER_TIMEOUT_S + 10  # the calls ahead of it, each at most the server's 2 s
        for number in range(3):
            started = time.monotonic()
            reply = httpx.post(f"{service.url}/run_code", json={"code": f"print({number} * 7)"}, timeout=own_limit_s)
            assert reply.json()["run_result"]["stdout"] == f"{number * 7}\n"
            assert time.monotonic() - started < own_limit_s
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert 500 not in statuses and 400 in statuses and 200 in statuses


def first_json_document(stream) -> dict:
    text = ""
    for line in stream:
        text += line
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"no JSON document in {text!r}")


def test_serve_json_prints_its_settings_and_a_taken_port_is_one_line():
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        refused = subprocess.run(
            [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--port", str(port)],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(errors) == 1 and "Address already in use" in errors[0], refused.stderr
    assert f"--port {port}" in errors[0] and time.monotonic() - started < 60
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "agentdata.cli.app", "sandbox", "serve", "--port", str(port), "--json",
         "-w", "1", "--prefork", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        settings = first_json_document(server.stdout)
        assert settings["port"] == port and settings["workers"] == 1 and settings["timeout_s"] == 30
        assert settings["url"] == f"http://127.0.0.1:{port}/run_code" and "own_uid" in settings["isolation"]
        code = base64.b64encode(b"x").decode()
        reply = httpx.post(settings["url"], json={"code": "print(open('x').read())", "files": {"x": code}}, timeout=60)
        assert reply.json()["run_result"]["stdout"] == "x\n"
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
