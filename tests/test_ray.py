"""`--executor ray` on a real local Ray cluster (a head and a second node started here with `ray start`),
against a latency server, with a worker killed in the middle of the run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.ray_executor import _Progress
from agentdata.agent.rundir import RunDir
from agentdata.agent.shard_status import read_sharded
from agentdata.events import listening
from agentdata.process_watcher import SNAPSHOT_S
from agentdata.records import Problem
from agentdata.settings import SettingError, build

# One test worker runs them all (pytest-xdist): with two local Ray clusters at once, one per worker (they share
# Ray's fixed default ports, such as the client server's 10001), a test worker died in a clean-clone run.
pytestmark = pytest.mark.xdist_group("ray")

REPO = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _processes_of(temp_dir: str, address: str) -> list:
    """Every process of the cluster: its daemons name its temp dir or its address; their children (workers)."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["cmdline"]):
        if any(temp_dir in part or address in part for part in process.info["cmdline"] or []):
            for member in [process, *process.children(recursive=True)]:
                found[member.pid] = member
    return list(found.values())


@pytest.fixture(scope="module")
def ray_cluster():
    """A head and a worker node, one CPU each, on 127.0.0.1; only the processes this fixture started are
    stopped at the end (by pid: `ray stop` would stop every Ray cluster on the machine)."""
    import psutil

    temp_dir = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    head = [str(RAY), "start", "--head", "--port", str(port), "--temp-dir", temp_dir, "--include-dashboard=false"]
    node = [str(RAY), "start", "--address", f"127.0.0.1:{port}"]
    try:
        for command in (head, node):
            subprocess.run([*command, *common], env=env, check=True, capture_output=True, timeout=240)
        yield f"127.0.0.1:{port}"
    finally:
        import ray

        ray.shutdown()
        processes = _processes_of(temp_dir, f":{port}")  # the client server names the node's own IP
        for process in processes:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=30)


def _problems(count: int) -> list[Problem]:
    return [Problem(f"What is 6 times 7? (take {i})", "42", id=f"p{i}") for i in range(count)]


def _config(address: str, **extra) -> CollectConfig:
    values = {"protocol": "hermes", "samples": 2, "concurrency": 2, "executor": "ray", "ray_address": address}
    return build(CollectConfig, {**values, **extra})


def _kill_a_shard_task_once(out: Path, stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the worker running a shard (Ray names its process ray::_run_shard) once its part has journaled
    3 trajectories: the worker that holds that journal open."""
    import psutil

    while not stop.is_set():
        for journal in out.glob("shard-*.journal.jsonl"):
            if journal.exists() and journal.read_text().count("\n") >= 4:  # the header and 3 trajectories
                for process in psutil.process_iter(["cmdline"]):
                    try:
                        running = (process.info["cmdline"] or [""])[0].startswith("ray::_run_shard")
                        if running and any(f.path == str(journal) for f in process.open_files()):
                            os.kill(process.pid, signal.SIGKILL)
                            killed.append(process.pid)
                            return
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
        time.sleep(0.02)


@pytest.mark.slow  # a Ray cluster of two nodes: about 40 s to start on a quiet 2-core machine
def test_every_shard_runs_as_a_ray_task_and_a_killed_worker_is_retried_and_resumes(ray_cluster, tmp_path):
    from agentdata.agent.runner import collect
    from bench.fake_openai_server import FakeOpenAIServer

    out, problems = tmp_path / "run", _problems(20)
    events, killed, stop = [], [], threading.Event()
    watcher = threading.Thread(target=_kill_a_shard_task_once, args=(out, stop, killed), daemon=True)
    with FakeOpenAIServer(latency=0.05) as server:
        config = _config(ray_cluster, model=f"openai:{server.url}", engine_options={"model": "fake-model"}, shards=2)
        watcher.start()
        with listening(events.append):
            summary = collect(problems, out, config)
        stop.set()
        requests = len(server.requests)
    assert killed, "no shard task was running to be killed"
    ids = [t.id for t in RunDir(out).trajectories()]
    assert sorted(ids) == sorted(f"p{i}-{s}" for i in range(20) for s in range(2))  # nothing lost, each once
    assert read_sharded(out).complete and read_sharded(out).count == 2
    assert summary.total == 40 and summary.correct == 40
    assert 0 < summary.new < 40  # the killed task's journaled trajectories were kept by its retry, not redone
    assert requests <= 2 * 40 + 2 * 2  # redone: at most what was in flight in the killed task (2 at a time)
    bar = [event for event in events if event.task == "collect"]
    assert [event.kind for event in bar[:1] + bar[-1:]] == ["start", "end"] and bar[0].total == 40
    assert max(event.completed for event in bar if event.kind == "advance") == 40  # both attempts counted
    # the same run again: every shard's task finds its part done; nothing is asked of the server
    with FakeOpenAIServer(latency=0.0) as idle:
        again = collect(
            problems, out, _config(ray_cluster, model=f"openai:{idle.url}", engine_options={"model": "fake-model"})
        )
        assert again.new == 0 and again.total == 40 and not idle.requests


@pytest.mark.slow
def test_a_shard_that_fails_on_its_own_stops_the_run_naming_it(ray_cluster, tmp_path):
    from agentdata.agent.runner import collect

    config = _config(ray_cluster, model="openai:http://127.0.0.1:9/v1", shards=2)
    with pytest.raises(Exception, match=r"--executor ray: shard [01]/2 failed: .*cannot be reached"):
        collect(_problems(4), tmp_path / "run", config)


def test_ray_settings_that_contradict_each_other_are_one_line():
    with pytest.raises(SettingError, match="runs one shard in this process; --executor ray runs them all"):
        build(CollectConfig, {"executor": "ray", "shard": "0/2"})
    with pytest.raises(SettingError, match="splits a run for --executor ray"):
        build(CollectConfig, {"shards": 4})


def test_the_progress_of_a_retried_shard_counts_what_its_dead_attempt_made():
    progress = _Progress()
    stats = {"accuracy": 0.5, "trajectories_per_s": 2.0, "tokens_per_s": 20.0, "tool_calls": 4}
    for shard in ("0/2", "1/2"):
        progress.report(shard, "start", 0, {})
        progress.report(shard, "advance", 4, stats)
    progress.report("1/2", "start", 0, {})  # shard 1's worker died: Ray runs it again
    progress.report("1/2", "advance", 1, {**stats, "accuracy": 1.0, "tool_calls": 1})
    completed, totals = progress.total()
    assert completed == 9 and totals["tool_calls"] == 9 and totals["accuracy"] == pytest.approx((2 + 2 + 1) / 9)
    assert json.dumps(totals)  # sent to the driver as is


@pytest.mark.slow
def test_eval_runs_its_shards_on_ray_then_reports(ray_cluster, tmp_path):
    from agentdata.agent.config import LoopConfig, ShardingConfig
    from agentdata.evaluation.config import EvalConfig
    from agentdata.evaluation.runner import run_eval
    from bench.fake_openai_server import FakeOpenAIServer

    bench = tmp_path / "bench.jsonl"
    rows = [{"question": f"What is 6*7? (take {i})", "answer": "42" if i % 3 else "7"} for i in range(6)]
    bench.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sharding = ShardingConfig(executor="ray", ray_address=ray_cluster, shards=2)
    config = EvalConfig(samples=2, loop=LoopConfig(protocol="hermes"), engine_options={"model": "m"}, sharding=sharding)
    with FakeOpenAIServer(latency=0.0) as server:
        report = run_eval([f"openai:{server.url}"], [bench], tmp_path / "eval", config)
    run_dir = Path(report.results[0].run_dir)
    assert read_sharded(run_dir).complete and read_sharded(run_dir).count == 2
    assert report.results[0].metrics.num_responses == 12 and report.results[0].metrics.avg_at_k == pytest.approx(4 / 6)
    assert (tmp_path / "eval" / "report.json").exists()


@pytest.mark.slow
def test_filter_profiles_the_student_on_ray_then_builds_the_pool(ray_cluster, tmp_path):
    from agentdata.agent.config import LoopConfig, ShardingConfig
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from bench.fake_openai_server import FakeOpenAIServer

    problems = [Problem(f"What is 6*7? (take {i})", "42" if i % 3 else "7", id=f"p{i}") for i in range(6)]
    sharding = ShardingConfig(executor="ray", ray_address=ray_cluster, shards=2)
    with FakeOpenAIServer(latency=0.0) as server:
        profiling = CollectConfig(
            model=f"openai:{server.url}",
            samples=2,
            engine_options={"model": "m"},
            loop=LoopConfig(protocol="hermes"),
            sharding=sharding,
        )
        built = run_filter(problems, tmp_path / "pool.parquet", PoolConfig(embedding="tfidf"), profiling)
    assert read_sharded(built.profile_dir).complete and read_sharded(built.profile_dir).count == 2
    rates = dict(built.result.profiled.select("problem_id", "pass_rate").iter_rows())
    assert rates == {p.id: (1.0 if p.answer == "42" else 0.0) for p in problems}


def names(pid: int) -> set[str]:
    import psutil

    found = set()
    for process in psutil.Process(pid).children(recursive=True):
        try:
            found.add(process.name())
        except psutil.NoSuchProcess:
            pass
    return found


LOCAL_CLUSTER = """
import sys, time, ray
from agentdata.agent.ray_executor import _connect
_connect(ray, "local")  # what --executor ray does with ray_address=local: ray.init starts a cluster here
print("up", flush=True)
time.sleep(600)
"""


def test_a_cluster_ray_init_started_here_stops_with_agentdata_killed_with_9(tmp_path):
    """Without agentdata's supervision Ray's DashboardAgent and RuntimeEnvAgent outlived the driver's kill -9
    by more than 10 s (measured); supervised, the whole cluster is gone within seconds."""
    import psutil

    # HOME: Ray writes an auth token to ~/.ray when ray.init starts a cluster, and `ray start` then turns token
    # auth on for every later cluster of this user, which the ray_cluster fixture's second node cannot join
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "HOME": str(tmp_path)}
    driver = subprocess.Popen([sys.executable, "-c", LOCAL_CLUSTER], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert driver.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 120
        while not {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names(driver.pid):
            assert time.monotonic() < deadline, names(driver.pid)
            time.sleep(0.1)
        # The agents retitle themselves (over the environment that carried agentdata's mark) and outlive the raylet
        # they descend from: the watcher knows them from its note of what it would kill, once a SNAPSHOT_S.
        time.sleep(3 * SNAPSHOT_S)
        cluster = psutil.Process(driver.pid).children(recursive=True)
    finally:
        driver.kill()
        driver.wait()
    assert any(process.name() == "raylet" for process in cluster)
    _, alive = psutil.wait_procs(cluster, timeout=10)
    assert [process.name() for process in alive] == []
