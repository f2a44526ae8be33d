"""The runnable examples: the remote layout on 127.0.0.1, the quickstart script's commands, the GPU configs.

The full quickstart (minutes of SmolLM2 on a CPU) is a benchmark, not a test:
`python bench/bench_quickstart.py` (results in bench/RESULTS_quickstart.md).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer

from agentdata.cli.app import app
from agentdata.records import Trajectory, read_records
from agentdata.rl.config import GRPOStageConfig
from agentdata.sft.config import SFTStageConfig
from agentdata.train.settings import train_settings

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart" / "run.sh"
sys.path.insert(0, str(REPO / "bench"))
from fake_openai_server import FakeOpenAIServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def agentdata_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentdata.cli.app", *args]


# ------------------------------------------------------------------ examples/remote on one machine


def ancestry_probe(service_pid: int) -> str:
    """Code that prints whether it runs in a process below the sandbox service's, then 6*7."""
    return (
        "import os\n"
        "pid, ancestors = os.getpid(), []\n"
        "while pid > 1:\n"
        "    pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "    ancestors.append(pid)\n"
        f"print('inside service:', {service_pid} in ancestors, 6 * 7)\n"
    )


def teacher_script(service_pid: int):
    """A scripted teacher: one tool call running the probe, then it boxes what the tool printed."""
    call = {"name": "code_interpreter", "arguments": {"code": ancestry_probe(service_pid)}}

    def respond(body: dict) -> str:
        last = body["messages"][-1]["content"] or ""
        if "<tool_response>" not in last and body["messages"][-1]["role"] != "tool":
            return f"<tool_call>{json.dumps(call)}</tool_call>"
        # Only the service's own sandbox prints True; the answer is right only then.
        return "The answer is \\boxed{42}." if "inside service: True 42" in last else "\\boxed{0}"

    return respond


@pytest.fixture()
def sandbox_service():
    """`agentdata sandbox serve` in its own process, as on machine B."""
    port = free_port()
    process = subprocess.Popen(
        agentdata_command(
            "sandbox", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2", "--prefork", "1"
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"sandbox service did not start: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    yield url, process.pid
    process.terminate()
    process.wait(timeout=20)


def test_collect_runs_code_through_a_remote_sandbox_service(sandbox_service, tmp_path):
    url, service_pid = sandbox_service
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(json.dumps({"question": f"What is 6 times 7? ({i})", "answer": "42"}) + "\n" for i in range(3))
    )
    out = tmp_path / "run"
    with FakeOpenAIServer(script=teacher_script(service_pid), model="served-teacher") as teacher:
        completed = subprocess.run(
            agentdata_command(
                "collect",
                str(problems),
                "--teacher",
                f"openai:{teacher.url}",
                "--model",
                "served-teacher",
                "--sandbox",
                url,
                "--samples",
                "2",
                "--protocol",
                "hermes",
                "--out",
                str(out),
            ),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
        assert {request["model"] for request in teacher.requests} == {"served-teacher"}
    trajectories = [
        trajectory
        for shard in sorted((out / "trajectories").glob("*.parquet"))
        for trajectory in read_records(shard, Trajectory)
    ]
    assert len(trajectories) == 6
    for trajectory in trajectories:
        tool_outputs = [m["content"] for m in trajectory.messages if m["role"] == "tool"]
        assert [output.strip() for output in tool_outputs] == ["inside service: True 42"], tool_outputs
        assert trajectory.correct and trajectory.num_tool_calls == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert url in json.dumps(manifest)


def test_the_probe_tells_a_local_sandbox_apart(tmp_path):
    """The check above can fail: run locally, the probe prints False."""
    from agentdata.sandbox import Sandbox

    with Sandbox(workers=1, prefork=1) as sandbox:
        result = sandbox.run(ancestry_probe(os.getpid() + 10**7))
    assert result.stdout == "inside service: False 42\n", result


# ------------------------------------------------------------------ examples/quickstart


def printed_commands(*args: str, env: dict | None = None, script: Path = QUICKSTART) -> list[list[str]]:
    completed = subprocess.run(
        ["bash", str(script), "--dry-run", *args], capture_output=True, text=True, check=True, env=env
    )
    return [shlex.split(line[2:].removesuffix("&")) for line in completed.stdout.splitlines() if line.startswith("$ ")]


def parse_with_the_cli(argv: list[str]):
    """Resolve `agentdata SUB [SUB] ARGS` through the real typer app without running it.

    Returns the command's parsed parameters; a bad flag or value raises typer's (vendored)
    click UsageError / BadParameter.
    """
    command = typer.main.get_command(app)
    args = argv[1:]
    while hasattr(command, "get_command"):  # a group: `synth`, `sandbox`, or the app itself
        name, *args = args
        command = command.get_command(command.make_context(argv[0], [name], resilient_parsing=True), name)
        assert command is not None, f"no command {name!r} in {argv}"
    return command.make_context(argv[0], list(args)).params


def test_parse_with_the_cli_catches_bad_commands():
    assert parse_with_the_cli(["agentdata", "collect", "p.jsonl", "--samples", "2"])["samples"] == 2
    assert parse_with_the_cli(["agentdata", "synth", "problems", "--n", "3"])["n"] == 3
    for bad in (
        ["agentdata", "collect", "--no-such-flag"],
        ["agentdata", "synth", "problems", "--n", "many"],
        ["agentdata", "curate", "run", "--tool-calls"],
    ):
        with pytest.raises(Exception, match="(?i)option|valid|requires|argument"):
            parse_with_the_cli(bad)


def test_quickstart_dry_run_prints_every_step_and_each_parses(tmp_path):
    out = tmp_path / "qs"
    commands = printed_commands("--out", str(out))
    removals = [argv for argv in commands if argv[0] == "rm"]
    assert removals and all(path.startswith(str(out) + "/") for argv in removals for path in argv[2:])
    commands = [argv for argv in commands if argv[0] != "rm"]
    steps = [" ".join(c[1:3]) if c[1] in ("synth", "sandbox") else c[1] for c in commands]
    assert steps == [
        "synth problems",
        "collect",
        "synth stitch",
        "curate",
        "filter",
        "train",
        "synth problems",
        "synth problems",
        "eval",
    ]
    for argv in commands:
        assert argv[0] == "agentdata"
        parse_with_the_cli(argv)
        for value in argv:  # every file it names is under the output folder or in the example
            if value.startswith("/") or "=" in value and value.split("=", 1)[1].startswith(("/", "hf:/")):
                path = value.split("=", 1)[-1].removeprefix("hf:")
                assert path.startswith((str(out), str(QUICKSTART.parent))), value
    assert not out.exists(), "a dry run writes nothing"


def test_quickstart_output_folder_from_the_environment(tmp_path):
    env = {**os.environ, "QUICKSTART_OUT": str(tmp_path / "elsewhere")}
    commands = printed_commands(env=env)
    assert any(str(tmp_path / "elsewhere" / "collect") in argv for argv in commands)


def test_quickstart_rejects_unknown_arguments():
    completed = subprocess.run(["bash", str(QUICKSTART), "--fast"], capture_output=True, text=True)
    assert completed.returncode == 2 and "unknown argument '--fast'" in completed.stderr


def test_quickstart_stops_at_the_first_failing_step(tmp_path):
    """A stand-in `agentdata` that fails on collect: the script names the step and runs nothing after it."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    fake = bin_dir / "agentdata"
    fake.write_text(f'#!/usr/bin/env bash\necho "$1" >> {calls}\n[ "$1" != collect ]\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    completed = subprocess.run(
        ["bash", str(QUICKSTART), "--out", str(tmp_path / "qs")], capture_output=True, text=True, env=env
    )
    assert completed.returncode == 1
    assert "step 'collect' failed" in completed.stderr
    assert calls.read_text().split() == ["synth", "collect"]
    assert (tmp_path / "qs" / "timings.tsv").read_text().startswith("problems\t")


def test_the_quickstarts_last_lines_say_what_to_open_next(tmp_path):
    """A stand-in `agentdata` for which every step succeeds: the script ends naming the report and the viewer
    (it ended naming only the folder)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agentdata").write_text("#!/usr/bin/env bash\nexit 0\n")
    (bin_dir / "agentdata").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = tmp_path / "qs"
    completed = subprocess.run(["bash", str(QUICKSTART), "--out", str(out)], capture_output=True, text=True, env=env)
    assert completed.returncode == 0, completed.stderr
    last = completed.stdout.strip().splitlines()[-2:]
    assert f"the eval report {out}/eval/report.json" in last[0] and last[1].endswith(f"agentdata view {out}")


def test_the_install_script_says_each_step_as_it_starts(tmp_path):
    """It ran 4.5 minutes without a line. Run against a stand-in venv whose python does nothing: a line per
    step, in order, and one when it is done."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "install.sh").write_text((REPO / "scripts" / "install.sh").read_text())
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("#!/usr/bin/env bash\nexit 0\n")
    (venv_bin / "python").chmod(0o755)
    (venv_bin / "activate").write_text(f'export PATH="{venv_bin}:$PATH"\n')
    env = {**os.environ, "AGENTDATA_SKIP_VLLM": "1"}
    completed = subprocess.run(
        ["bash", str(repo / "scripts" / "install.sh")], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert [line.split("]")[0] for line in lines[:-1]] == [f"install.sh: [{n}/5" for n in range(1, 5)], lines
    assert "torch" in lines[1] and lines[-1].startswith("install.sh: done in ")


def test_scripts_quickstart_installs_then_runs_the_example():
    lines = [
        line.strip()
        for line in (REPO / "scripts" / "quickstart.sh").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    install = next(i for i, line in enumerate(lines) if line.startswith("bash scripts/install.sh"))
    example = next(i for i, line in enumerate(lines) if "examples/quickstart/run.sh" in line)
    assert "set -euo pipefail" in lines and install < example


# ------------------------------------------------------------------ examples/gpu


def test_gpu_recipe_dry_run_commands_parse(tmp_path):
    commands = printed_commands(
        env={**os.environ, "GPU_OUT": str(tmp_path / "gpu")}, script=REPO / "examples/gpu/run.sh"
    )
    ours = []
    for argv in commands:
        if argv[:2] == ["accelerate", "launch"]:  # accelerate launch ... -m agentdata.cli.app ARGS
            argv = ["agentdata", *argv[argv.index("agentdata.cli.app") + 1 :]]
        if argv[0] == "agentdata":
            ours.append(argv)
            parse_with_the_cli(argv)
    assert [argv[1] for argv in ours] == ["sandbox", "collect", "curate", "filter", "train", "eval"]
    assert not (tmp_path / "gpu").exists(), "a dry run writes nothing"


@pytest.mark.parametrize(
    "config_file", sorted((REPO / "examples").glob("*/train*.yaml")), ids=lambda p: str(p.parent.name)
)
def test_example_train_configs_are_valid(config_file):
    import yaml

    assert set(yaml.safe_load(config_file.read_text())) <= {"sft", "rl"}
    built = train_settings(config_file)  # every key known and every value in range, else a UserError
    assert isinstance(built["sft"], SFTStageConfig) and isinstance(built["rl"], GRPOStageConfig)
