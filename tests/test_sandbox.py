"""The local sandbox: API, sessions, and a suite of bad and hostile code.

Every hostile case is contained by limits set before the code runs (small process,
memory, disk and output limits in the fixture), and each is followed by a check that
the sandbox still serves the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from agentdata.sandbox import ExecResult, Sandbox, SandboxConfig
from agentdata.sandbox.config import MAX_EXECUTORS
from agentdata.sandbox.executors import UID_BASE

# Without root the sandbox still runs (in a user namespace where the kernel allows one), but
# executors keep the caller's uid: the per-sandbox process limit and the refusal to signal
# the host's processes need the executors' own uid, so only those tests need root.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: executors get their own uid only as root")

LIMITS = dict(
    workers=4,
    timeout_s=5.0,
    memory_mb=768,
    max_processes=24,
    disk_mb=32,
    max_file_mb=8,
    max_output_bytes=4096,
    prefork=1,
    interrupt_grace_s=0.3,
)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(**LIMITS)) as box:
        yield box


def uid_block(box: Sandbox) -> range:
    start = UID_BASE + box._pool.template.info["pid"] * MAX_EXECUTORS
    return range(start, start + MAX_EXECUTORS)


def executor_pids(box: Sandbox) -> set[int]:
    pool = box._pool
    return {e.pid for e in pool.sessions.values()} | {e.pid for e in list(pool.spares._queue)}


def _sandbox_processes(box: Sandbox) -> list[psutil.Process]:
    """Every process of the sandbox: those running as one of its uids (as root), and every
    descendant of its template (orphans come back to the template, a child subreaper)."""
    block = uid_block(box)
    found = {}
    for process in psutil.process_iter(["uids", "pid"]):
        uids = process.info["uids"]
        if uids and uids.real in block:
            found[process.pid] = process
    try:
        found.update((child.pid, child) for child in psutil.Process(box._pool.template.info["pid"]).children(True))
    except psutil.NoSuchProcess:
        pass
    return list(found.values())


def _leftovers_now(box: Sandbox) -> list[psutil.Process]:
    live, leftovers = executor_pids(box) | {box._pool.template.info.get("killer_pid")}, []  # the template's own
    for process in _sandbox_processes(box):
        try:
            if process.pid not in live and process.status() != psutil.STATUS_ZOMBIE:
                leftovers.append(process)
        except psutil.NoSuchProcess:
            pass
    return leftovers


def leftover_processes(box: Sandbox, settle_s: float = 2.0) -> list[psutil.Process]:
    """Processes of this sandbox that are not a live executor.

    A stateless executor exits just after it answers and spares are forked in the
    background, so this waits (briefly) for the pool to settle before judging.
    """
    deadline = time.monotonic() + settle_s
    while True:
        leftovers = _leftovers_now(box)
        if not leftovers or time.monotonic() > deadline:
            return leftovers
        time.sleep(0.02)


def assert_still_serving(box: Sandbox) -> None:
    result = box.run("print(6 * 7)")
    assert result.status == "ok" and result.stdout == "42\n", result


# --------------------------------------------------------------------------- API and sessions


def test_fresh_call_prints_and_reports(sandbox):
    result = sandbox.run("print('hello')")
    assert isinstance(result, ExecResult)
    assert (result.status, result.stdout, result.exit_code) == ("ok", "hello\n", 0)
    assert 0 < result.duration_s < 5


def test_last_expression_is_displayed_like_a_notebook(sandbox):
    assert sandbox.run("x = 20\nx + 1").stdout == "21\n"
    assert sandbox.run("None").stdout == ""
    assert sandbox.run("x = 3\nx + 1", display_last=False).stdout == ""


def test_sessions_share_state_and_are_private(sandbox):
    assert sandbox.run("secret = 41", session_id="a").status == "ok"
    assert sandbox.run("secret + 1", session_id="a").stdout == "42\n"
    other = sandbox.run("secret", session_id="b")
    assert other.status == "error" and "NameError" in other.stderr
    assert sandbox.run("secret", session_id=None).status == "error"  # a fresh call sees nothing
    sandbox.close_session("a")
    assert "NameError" in sandbox.run("secret", session_id="a").stderr
    sandbox.close_session("a")
    sandbox.close_session("b")


def test_error_traceback_points_at_the_cell(sandbox):
    result = sandbox.run("def f():\n    return 1 / 0\nf()")
    assert result.status == "error" and result.exit_code == 1
    assert "ZeroDivisionError" in result.stderr and "<cell" in result.stderr
    assert "worker.py" not in result.stderr


def test_syntax_error_is_a_result(sandbox):
    result = sandbox.run("def broken(:\n  pass")
    assert result.status == "error" and "SyntaxError" in result.stderr


def test_common_modules_are_preloaded_and_stdin_and_files_work(sandbox):
    result = sandbox.run("import sympy, numpy\nprint(sympy.factor(sympy.Symbol('x')**2 - 1), numpy.arange(3).sum())")
    assert result.stdout == "(x - 1)*(x + 1) 3\n"
    assert sandbox.run("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
    assert sandbox.run("print(open('data/in.txt').read())", files={"data/in.txt": "payload"}).stdout == "payload\n"


def test_subprocess_output_is_captured(sandbox):
    result = sandbox.run("import subprocess\n_ = subprocess.run(['echo', 'from a child'])")
    assert result.stdout == "from a child\n"


def test_arun_does_not_block_the_event_loop(sandbox):
    async def scenario():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        result = await sandbox.arun("import time; time.sleep(0.4); print('done')")
        task.cancel()
        return result, ticks

    result, ticks = asyncio.run(scenario())
    assert result.stdout == "done\n"
    assert ticks >= 15


def test_many_concurrent_calls_queue_instead_of_failing(sandbox):
    async def scenario():
        calls = [sandbox.arun(f"print({i} * 2)", session_id=f"c{i % 5}" if i % 2 else None) for i in range(60)]
        return await asyncio.gather(*calls)

    results = asyncio.run(scenario())
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(60)]
    for i in range(5):
        sandbox.close_session(f"c{i}")


# --------------------------------------------------------------------------- hostile code


@needs_root
def test_process_limit_holds_for_a_harmless_count_first(sandbox):
    code = (
        "import subprocess\nstarted, refused = [], 0\n"
        "for _ in range(40):\n"
        "    try:\n        started.append(subprocess.Popen(['sleep', '30']))\n"
        "    except OSError:\n        refused += 1\n"
        "print(len(started), refused)"
    )
    result = sandbox.run(code)
    started, refused = map(int, result.stdout.split())
    assert started < LIMITS["max_processes"] and refused > 0
    assert leftover_processes(sandbox) == []  # a stateless call leaves nothing behind


@needs_root  # without RLIMIT_NPROC per uid a fork bomb would reach the host user's processes
def test_fork_bomb_is_contained(sandbox):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = sandbox.run(code, timeout=1.5)
    assert result.status == "timeout"
    assert leftover_processes(sandbox) == []
    assert_still_serving(sandbox)


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(4 * 1024 ** 3)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 ** 2))",
        "import numpy\nnumpy.ones((1024, 1024, 1024))",
    ],
)
def test_memory_bomb_is_an_oom_result(sandbox, code):
    result = sandbox.run(code)
    assert result.status == "oom", result
    assert "MemoryError" in result.stderr
    assert_still_serving(sandbox)


def test_infinite_loop_times_out_and_the_session_survives(sandbox):
    sandbox.run("kept = 'still here'", session_id="loop")
    started = time.monotonic()
    result = sandbox.run("while True:\n    pass", session_id="loop", timeout=1)
    assert result.status == "timeout"
    assert time.monotonic() - started < 3
    assert sandbox.run("kept", session_id="loop").stdout == "'still here'\n"
    sandbox.close_session("loop")


def test_interrupt_proof_loop_is_killed_at_the_limit(sandbox):
    code = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    started = time.monotonic()
    result = sandbox.run(code, session_id="stubborn", timeout=1)
    assert result.status == "timeout"
    assert time.monotonic() - started < 4
    assert "NameError" in sandbox.run("undefined_here", session_id="stubborn").stderr  # a fresh session
    sandbox.close_session("stubborn")
    assert_still_serving(sandbox)


def test_sleep_past_the_limit_times_out(sandbox):
    started = time.monotonic()
    result = sandbox.run("import time\ntime.sleep(30)", timeout=1)
    assert result.status == "timeout"
    assert time.monotonic() - started < 3
    assert_still_serving(sandbox)


def test_huge_output_is_capped_keeping_head_and_tail(sandbox):
    code = "import sys\nsys.stdout.write('HEAD' + 'x' * 100_000_000 + 'TAIL')\nprint('x' * 10, file=sys.stderr)"
    result = sandbox.run(code, timeout=20)
    assert result.status == "ok"
    assert result.stdout.startswith("HEAD") and result.stdout.endswith("TAIL")
    assert "omitted" in result.stdout and len(result.stdout) < LIMITS["max_output_bytes"] + 200
    assert result.stderr == "x" * 10 + "\n"


def test_no_network_even_to_the_hosts_loopback(sandbox):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')"
        result = sandbox.run(code)
        assert result.status == "error" and "OSError" in result.stderr
        with pytest.raises(socket.timeout):
            listener.accept()


def needs_view(box: Sandbox) -> None:
    if not box.isolation["private_view"]:
        pytest.skip(f"this kernel allows no private filesystem view: {box.isolation['warnings']}")


@pytest.mark.parametrize(
    "path",
    [
        "/mnt/agentdata-sandbox-test",
        "/agentdata-sandbox-test",
        "/home/agentdata-sandbox-test",
        "/var/tmp/agentdata-sandbox-test",
        "/dev/shm/agentdata-sandbox-test",
        "/tmp/agentdata-sandbox-test/nested",
    ],
)
def test_writes_anywhere_stay_inside_the_call(sandbox, path):
    needs_view(sandbox)
    code = f"import os\nos.makedirs(os.path.dirname({path!r}), exist_ok=True)\nopen({path!r}, 'w').write('x')\n"
    result = sandbox.run(code + f"print(open({path!r}).read())")
    assert (result.status, result.stdout) == ("ok", "x\n"), result
    assert not os.path.exists(path)  # the host never sees it
    assert sandbox.run(f"import os\nprint(os.path.exists({path!r}))").stdout == "False\n"  # nor does the next call


@pytest.mark.parametrize(
    "path", ["/etc/agentdata-sandbox-test", "/usr/agentdata-sandbox-test", "/usr/lib/agentdata-sandbox-test"]
)
def test_the_system_is_read_only(sandbox, path):
    result = sandbox.run(f"open({path!r}, 'w').write('x')")
    assert result.status == "error"
    assert not os.path.exists(path)


def test_the_hosts_files_are_out_of_sight(sandbox, tmp_path):
    needs_view(sandbox)
    secrets = [tmp_path / "secret.txt", Path(__file__).resolve().parent / "conftest.py"]
    secrets[0].write_text("host")
    home = tempfile.NamedTemporaryFile(dir=Path.home(), prefix=".agentdata-secret-", delete=False)
    secrets.append(Path(home.name))
    try:
        for secret in secrets:
            result = sandbox.run(f"print(open({str(secret)!r}).read())")
            assert result.status == "error" and "FileNotFoundError" in result.stderr, (secret, result)
    finally:
        os.unlink(home.name)
    listing = sandbox.run("import os\nprint(sorted(os.listdir('/work')), sorted(os.listdir('/root')))").stdout
    assert "PREAMBLE.md" not in listing and ".bashrc" not in listing  # only the Python install's own folders


def test_files_given_at_absolute_paths_are_written_into_the_view(sandbox):
    needs_view(sandbox)
    result = sandbox.run("print(open('/data/in.txt').read())", files={"/data/in.txt": b"given"})
    assert result.stdout == "given\n" and not os.path.exists("/data/in.txt")


def python_skeleton() -> list[str]:
    """What a fresh private /tmp holds: nothing, except the top folders of a Python install kept under /tmp
    (a virtualenv in a checkout under /tmp is bound back in, or its lazy imports would fail)."""
    from agentdata.sandbox.worker_executor import python_paths

    return sorted(
        {p.split("/")[2] for p in map(os.path.abspath, python_paths()) if p.startswith("/tmp/") and os.path.exists(p)}
    )


def test_working_dir_is_private_and_temporary(sandbox, tmp_path):
    host_file = tmp_path / "host.txt"
    host_file.write_text("host")
    result = sandbox.run(f"import os\nprint(os.getcwd(), os.listdir('.'), os.path.exists({str(host_file)!r}))")
    # empty wherever the host's Python lives: under /tmp it is bound in beside the call's own dir (fs_view.session_dir)
    assert result.stdout.split(" ", 1)[1] == "[] False\n"


def test_host_environment_is_not_visible(sandbox, monkeypatch):
    monkeypatch.setenv("AGENTDATA_SANDBOX_SECRET", "do-not-leak")
    os.environ["AGENTDATA_SANDBOX_SECRET"] = "do-not-leak"
    code = (
        "import os\nprint(dict(os.environ))\n"
        f"for pid in (1, {os.getpid()}, os.getppid()):\n"
        "    try:\n        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError as error:\n        print('denied', pid)"
    )
    result = sandbox.run(code)
    assert "do-not-leak" not in result.stdout + result.stderr
    assert "AGENTDATA_SANDBOX_SECRET" not in result.stdout


@needs_root
def test_killing_the_parent_or_host_is_refused(sandbox):
    result = sandbox.run(f"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill({os.getpid()}, 9)")
    assert result.status == "error" and "PermissionError" in result.stderr
    assert_still_serving(sandbox)


@pytest.mark.parametrize(
    "code, status, exit_code",
    [
        ("import sys\nsys.exit(0)", "ok", 0),
        ("import sys\nsys.exit(3)", "error", 3),
        ("import os\nos._exit(4)", "error", 4),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed", -9),
    ],
)
def test_exits_are_results(sandbox, code, status, exit_code):
    result = sandbox.run(code)
    assert (result.status, result.exit_code) == (status, exit_code), result
    assert_still_serving(sandbox)


def test_sys_exit_keeps_a_session_and_os_exit_replaces_it(sandbox):
    sandbox.run("value = 1", session_id="exits")
    assert sandbox.run("import sys\nsys.exit(2)", session_id="exits").exit_code == 2
    assert sandbox.run("value", session_id="exits").stdout == "1\n"
    died = sandbox.run("import os\nos._exit(0)", session_id="exits")
    assert "state is lost" in died.stderr
    assert "NameError" in sandbox.run("value", session_id="exits").stderr
    sandbox.close_session("exits")


@pytest.mark.parametrize(
    "spawn",
    [
        "import subprocess\nsubprocess.Popen(['sleep', '60'])",
        # Without an own uid, leftovers are found by session id: a new session escapes that.
        pytest.param("import os\nos.system('setsid sleep 60 > /dev/null 2>&1 &')", marks=needs_root),
        pytest.param(
            "import os\nif os.fork() == 0:\n    os.setsid()\n    import time\n    time.sleep(60)", marks=needs_root
        ),
    ],
)
def test_spawned_processes_do_not_outlive_the_call(sandbox, spawn):
    assert sandbox.run(spawn).status == "ok"
    assert leftover_processes(sandbox) == []


def test_session_processes_are_gone_after_timeout_and_close(sandbox):
    sandbox.run("import subprocess\nkeep = subprocess.Popen(['sleep', '60'])", session_id="procs")
    assert len(leftover_processes(sandbox, settle_s=0.3)) == 1  # alive while the session is
    assert sandbox.run("import time\ntime.sleep(10)", session_id="procs", timeout=0.5).status == "timeout"
    assert leftover_processes(sandbox) == []
    sandbox.run("import subprocess\nkeep = subprocess.Popen(['sleep', '60'])", session_id="procs")
    sandbox.close_session("procs")
    assert leftover_processes(sandbox) == []


@needs_root
def test_closed_sessions_processes_are_killed_by_the_lean_killer_and_without_it():
    """A session's processes are killed by the template's lean killer (worker_killer.py); when it is gone,
    by killers forked from the template, and nothing is left either way."""
    with Sandbox(SandboxConfig(**LIMITS)) as box:
        killer = psutil.Process(box._pool.template.info["killer_pid"])
        assert killer.cmdline()[-2].endswith("worker_killer.py")
        for round_ in ("killer", "fallback"):
            box.run("import subprocess\nkeep = subprocess.Popen(['sleep', '60'])", session_id=round_)
            assert len(leftover_processes(box, settle_s=0.3)) == 1
            box.close_session(round_)
            assert leftover_processes(box) == [], round_
            if round_ == "killer":
                killer.kill()
                killer.wait(5)
        assert_still_serving(box)


def test_filling_the_disk_is_stopped(sandbox):
    one_big_file = sandbox.run("open('big', 'wb').write(b'0' * 64 * 1024 ** 2)")
    assert one_big_file.status == "error" and "File too large" in one_big_file.stderr
    many_files = sandbox.run(
        "for i in range(100):\n    open(f'part{i}', 'wb').write(b'0' * 4 * 1024 ** 2)", session_id="disk"
    )
    assert many_files.status == "error" and "No space left" in many_files.stderr
    sandbox.close_session("disk")
    assert_still_serving(sandbox)


def test_files_from_one_session_are_invisible_to_others(sandbox):
    sandbox.run("open('notes.txt', 'w').write('mine')\nopen('/tmp/also.txt', 'w').write('mine')", session_id="s1")
    assert sandbox.run("print(open('notes.txt').read())", session_id="s1").stdout == "mine\n"
    for other in ("s2", None):
        result = sandbox.run("import os\nprint(sorted(os.listdir('.')), sorted(os.listdir('/tmp')))", session_id=other)
        private_tmp = sorted(python_skeleton() + (["work"] if python_skeleton() else []))  # fs_view.session_dir
        assert result.stdout == f"[] {private_tmp}\n"
    sandbox.close_session("s1")
    sandbox.close_session("s2")


def test_a_dead_session_worker_is_replaced(sandbox):
    sandbox.run("x = 1", session_id="dies")
    assert sandbox.run("import os\nos.kill(os.getpid(), 9)", session_id="dies").status == "killed"
    assert sandbox.run("print('fresh')", session_id="dies").stdout == "fresh\n"
    sandbox.close_session("dies")


def test_memory_limit_per_call_lowers_the_limit(sandbox):
    result = sandbox.run("x = bytearray(300 * 1024 ** 2)", memory_mb=200)
    assert result.status == "oom"


def test_reply_is_read_even_when_the_exit_notice_comes_first(monkeypatch):
    """A stateless executor answers and exits at once; the template's exit notice can be handled
    before the answer is read from the socket. The answer must not be lost then."""
    from agentdata.sandbox import executors

    read_frame = executors._read_frame

    async def read_after_the_exit_notice(reader):
        reader._transport.pause_reading()  # hold the answer in the socket buffer ...
        await asyncio.sleep(0.3)  # ... until the executor has exited and its notice was handled
        reader._transport.resume_reading()
        return await read_frame(reader)

    monkeypatch.setattr(executors, "_read_frame", read_after_the_exit_notice)
    with Sandbox(workers=1, prefork=0, timeout_s=5) as box:
        results = [box.run(f"print({i})") for i in range(3)]
    assert [(r.status, r.stdout) for r in results] == [("ok", f"{i}\n") for i in range(3)]


# --------------------------------------------------------------------------- without privileges


def test_runs_without_uid_isolation(tmp_path):
    with Sandbox(workers=1, prefork=0, drop_privileges=False, timeout_s=5) as box:
        assert box.isolation["own_uid"] is False
        assert box.run("print(2 + 2)").stdout == "4\n"
        box.run("import subprocess\np = subprocess.Popen(['sleep', '60'])\nprint(p.pid)", session_id="s")
        pid = int(box.run("p.pid", session_id="s").stdout)
        assert psutil.pid_exists(pid)
        box.close_session("s")
        assert ended_within(pid, seconds=5)


def ended_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` is gone (or a zombie) within `seconds`: killing is prompt, but a loaded
    machine may take more than a fixed 0.1 s to schedule it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="workers"):
        SandboxConfig(workers=0)


WITHOUT_ROOT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from agentdata.sandbox.local import Sandbox
escape = '''
import os
os.makedirs("/tmp/x", exist_ok=True)
top = os.open("/", os.O_RDONLY)
os.chroot("/tmp/x")
os.fchdir(top)
for _ in range(32):
    os.chdir("..")
os.chroot(".")
print(sorted(os.listdir("/")))
'''
with Sandbox(workers=1, prefork=0, preload=("math",), timeout_s=20) as box:
    wrote = box.run("open('/mnt/b', 'w').write('x')\nprint(open('/mnt/b').read())")
    left = box.run(escape)
    result = {"isolation": box.isolation, "wrote": wrote.stdout, "left": [left.status, left.stderr]}
    print("RESULT" + json.dumps(result))
"""


@contextlib.contextmanager
def readable_copy_of_the_package():
    """A copy of agentdata in a folder any user can read: the checkout (or pytest's tmp_path, mode 0700) may sit
    under a folder another user cannot enter, and a security test must not depend on where the clone lives."""
    place = tempfile.mkdtemp(prefix="agentdata-readable-", dir="/tmp")
    try:
        package = Path(__file__).resolve().parents[1] / "agentdata"
        shutil.copytree(package, Path(place) / "agentdata", ignore=shutil.ignore_patterns("__pycache__"))
        for folder, _, files in os.walk(place):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_without_root_the_view_still_holds_and_cannot_be_left():
    """As an unprivileged user the sandbox runs in a user namespace, where its code is that namespace's root:
    it still gets its private view, and it cannot chroot its way back out of it to the host's files."""
    python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not python.exists() or not shutil.which("setpriv"):
        pytest.skip("needs root, /usr/bin/python3 and setpriv to run the sandbox as another user")
    with readable_copy_of_the_package() as place:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(python), "-c", WITHOUT_ROOT, place],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=place,
            env={"PATH": "/usr/bin:/bin"},
        )
    assert "RESULT" in done.stdout, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT", 1)[1])
    if not result["isolation"]["private_view"]:
        pytest.skip(f"this kernel allows no private view in a user namespace: {result['isolation']['warnings']}")
    assert result["isolation"]["own_uid"] is False and result["wrote"] == "x\n"
    status, stderr = result["left"]
    assert status == "error" and "PermissionError" in stderr  # no capability left to chroot with


SESSION_FILES = r"""
import json, sys
from agentdata.sandbox.local import Sandbox
name = sys.argv[1]
code = f"print(open({name!r}).read())\nopen({name!r}, 'w').write('again')\nprint(open({name!r}).read())"
with Sandbox(workers=1, prefork=0, preload=("math",), timeout_s=20) as box:
    done = box.run(code, files={name: "mine"})
    result = {"isolation": box.isolation, "stdout": done.stdout, "stderr": done.stderr}
    print("RESULT" + json.dumps(result))
"""


def test_a_sessions_files_are_its_own_wherever_the_hosts_python_lives():
    """Probe (issue 41): with the checkout (and its venv) at /tmp/x, a session's file `x` read back nothing: the
    host's interpreter is bound into the view at its own path, /tmp/x/.venv, and so /tmp/x, in the session's
    working dir, was the host's folder. Here the host's venv is reached through /tmp/<name>/venv, and the session
    writes a file of that very name."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs a virtualenv to reach through a link under /tmp")
    place = Path(tempfile.mkdtemp(prefix="agentdata-host-", dir="/tmp"))
    try:
        (place / "venv").symlink_to(Path(sys.prefix).resolve())
        done = subprocess.run(
            [str(place / "venv" / "bin" / "python"), "-c", SESSION_FILES, place.name],
            capture_output=True,
            text=True,
            timeout=300,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert "RESULT" in done.stdout, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT", 1)[1])
    if not (result["isolation"]["private_view"] or result["isolation"]["private_tmp"]):
        pytest.skip(f"no private files per session here: {result['isolation']['warnings']}")
    assert result["stdout"] == "mine\nagain\n", result
