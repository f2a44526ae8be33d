"""`--executor ray`: every shard of a run (agent/shards.py) as a task on an existing Ray cluster.

The driver (the `collect`, `eval` or `filter` process) connects with `ray.init(address=...)`, puts the
problems in the object store once and starts one task per shard; each task is an ordinary `--shard I/N`
run on whichever node Ray places it, writing its own files into the run dir, which must be on storage
every node sees. Nothing else is shared: each task opens its own engine (an `openai:` fleet's URLs are
balanced by each task over the whole fleet, by outstanding requests, so N tasks load K servers evenly
and a dead one is failed over) and its own sandbox (`local`: one per task, on the task's node, so the
sandbox replicas spread over the nodes with the tasks; URLs: balanced the same way).

A task whose worker process or node dies is run again by Ray (`ray_retries`, Ray's own `max_retries`
for system failures); it resumes its shard like any `--shard` run: what it journaled is kept, only
what was in flight is made again. A task that fails on its own (a UserError: bad problems, an engine
that refuses) is not retried; the first such failure stops the run, naming the shard. The tasks report
their progress to one small actor, and the driver turns the sum into the usual "collect" events: one
progress bar for the whole run. When every task is done, the driver reads the run dir as one run.

Ray is an optional dependency (`pip install "agentdata[ray]"`); it is imported only here. The processes of a
cluster that `ray.init` starts itself (`ray_address=local`) are agentdata's children and stop with it
(agentdata/processes.py); a cluster begun with `ray start` is not agentdata's and is left running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentdata import processes
from agentdata.agent.config import CollectConfig, ShardingConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.shards import MAX_SHARDS, Shard, tags_in
from agentdata.errors import UserError
from agentdata.events import Event, listening, task
from agentdata.records import Problem

POLL_S = 0.5  # how often the driver reads the progress actor (and a task reports to it, at most)


def collect_on_ray(
    problems: list[Problem],
    out_dir: str | Path,
    config: CollectConfig,
    collect: Callable[..., Any],
    engine: Any = None,
    sandbox: Any = None,
) -> Any:
    """Run every shard of `config`'s run as a Ray task, then return the whole run's `CollectSummary`.

    `collect` is `agent.runner.collect`, which each task runs on its shard and the driver reads the whole run
    with; the runner hands itself in when it dispatches here, so neither module imports the other."""
    if engine is not None or sandbox is not None:
        raise UserError(
            "--executor ray builds each task's engine and sandbox on its node from the settings (--teacher, "
            "--sandbox): an engine or sandbox object made in this process cannot be sent to it"
        )
    ray = _import_ray()
    sharding = config.sharding
    _connect(ray, sharding.ray_address)
    count = _shard_count(ray, Path(out_dir), sharding)
    local = replace(config, sharding=ShardingConfig())
    problems_ref = ray.put(list(problems))
    progress = ray.remote(_Progress).remote()
    run_shard = ray.remote(_run_shard).options(
        num_cpus=sharding.ray_cpus, max_retries=sharding.ray_retries, retry_exceptions=False
    )
    started = time.perf_counter()
    pending = {
        run_shard.remote(
            collect,
            problems_ref,
            str(out_dir),
            replace(local, sharding=ShardingConfig(shard=Shard(i, count))),
            progress,
        ): i
        for i in range(count)
    }
    made = _wait_all(ray, pending, progress, lambda: _still_to_make(problems, out_dir, config), count)
    summary = collect(problems, out_dir, local)  # the parts read as one run: nothing is generated
    summary.new, summary.new_completion_tokens = sum(s.new for s in made), sum(s.new_completion_tokens for s in made)
    summary.stale, summary.retried = sum(s.stale for s in made), sum(s.retried for s in made)
    summary.elapsed_s = time.perf_counter() - started
    return summary


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError('--executor ray needs Ray: pip install "agentdata[ray]" (or "ray[default]")') from None
    return ray


def _connect(ray: Any, address: str) -> None:
    if ray.is_initialized():
        return
    processes.supervise()  # a cluster ray.init starts here (ray_address=local) carries the mark: it dies with us
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except ConnectionError as error:
        raise UserError(
            f"ray_address={address}: no Ray cluster to connect to ({' '.join(str(error).split())[:200]}); "
            "start one (ray start --head) or give its address"
        ) from None


def _shard_count(ray: Any, out: Path, sharding: ShardingConfig) -> int:
    """shards=N, else the split the run dir already has (a resume), else one per task's CPUs the cluster has."""
    existing = {shard.count for shard in tags_in(out)}
    if sharding.shards is not None:
        return sharding.shards
    if existing:
        return max(existing)  # more than one split is refused by the tasks, naming both
    cpus = ray.cluster_resources().get("CPU", 1.0)
    return max(1, min(MAX_SHARDS, int(cpus // sharding.ray_cpus)))


def _still_to_make(problems: list[Problem], out_dir: str | Path, config: CollectConfig) -> int:
    """The progress bar's total: every trajectory of the run minus those already on disk (shards and journals)."""
    run = RunDir(out_dir)
    on_disk = run.done_ids() | {t.id for t in run.journaled()} if run.path.is_dir() else set()
    wanted = {f"{problem.id}-{index}" for problem in problems[: config.limit] for index in range(config.samples)}
    return len(wanted - on_disk)


def _wait_all(ray: Any, pending: dict[Any, int], progress: Any, still_to_make: Any, count: int) -> list[Any]:
    """Wait for every task, emitting the summed progress; returns their summaries. The first task that
    fails for good stops the run (the others are cancelled; every part resumes on the next run)."""
    made, total = [], still_to_make()
    with task("collect", total, message=f"{count} shards on Ray") as advance:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_S, fetch_local=False)
            for ref in ready:
                shard = Shard(pending.pop(ref), count)
                try:
                    made.append(ray.get(ref))
                except Exception as error:
                    for other in pending:
                        ray.cancel(other, force=True)
                    raise UserError(f"--executor ray: shard {shard} failed: {_cause(ray, error)}") from None
            completed, stats = ray.get(progress.total.remote())
            advance(completed, **stats)
        advance(total - still_to_make(), **stats)  # from the run dir: a task's last report may still be on its way
    return made


def _cause(ray: Any, error: Exception) -> str:
    """The task's own error line, or what happened to its worker after the retries ran out."""
    if isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        return " ".join(str(error.cause).split())[:500]
    if isinstance(error, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)):
        return f"its worker or node died and the retries ran out ({type(error).__name__}); run again to resume"
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


def _run_shard(
    collect: Callable[..., Any], problems: list[Problem], out_dir: str, config: CollectConfig, progress: Any
) -> Any:
    """One shard, in a Ray worker: an ordinary `--shard I/N` collect, its progress forwarded to the actor."""
    shard = str(config.sharding.shard)
    last = [0.0]

    def forward(event: Event) -> None:
        if event.task != "collect":
            return
        now = time.monotonic()
        if event.kind == "advance" and now - last[0] < POLL_S and event.completed != event.total:
            return
        last[0] = now
        progress.report.remote(shard, event.kind, event.completed, event.stats)

    with listening(forward):
        return collect(problems, out_dir, config)


class _Progress:
    """The tasks' progress, summed: a retried task starts counting again from 0, after what it had made."""

    COUNTS = ("done", "correct", "tool_calls", "tokens")

    def __init__(self) -> None:
        self.earlier = dict.fromkeys(self.COUNTS, 0.0)  # made by attempts that died (their rows were kept)
        self.current: dict[str, dict[str, float]] = {}  # per shard, its running attempt's counts
        self.started = time.monotonic()

    def report(self, shard: str, kind: str, completed: int, stats: dict[str, Any]) -> None:
        if kind == "start":
            for key, value in self.current.pop(shard, {}).items():
                self.earlier[key] += value
            self.current[shard] = dict.fromkeys(self.COUNTS, 0.0)
        elif kind == "advance" and "accuracy" in stats:  # runner._LiveProgress's live numbers
            per_s = stats["trajectories_per_s"]
            self.current[shard] = {
                "done": completed,
                "correct": stats["accuracy"] * completed,
                "tool_calls": stats["tool_calls"],
                "tokens": stats["tokens_per_s"] * completed / per_s if per_s else 0.0,
            }

    def total(self) -> tuple[int, dict[str, Any]]:
        counts = {key: self.earlier[key] + sum(shard[key] for shard in self.current.values()) for key in self.COUNTS}
        if not counts["done"]:
            return 0, {}
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return int(counts["done"]), {
            "accuracy": counts["correct"] / counts["done"],
            "trajectories_per_s": counts["done"] / elapsed,
            "tokens_per_s": counts["tokens"] / elapsed,
            "tool_calls": int(counts["tool_calls"]),
            "shards_started": len(self.current),
        }
