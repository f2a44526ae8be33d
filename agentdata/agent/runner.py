"""The runner: rollouts of one engine over many problems through the agent loop and the real sandbox,
every trajectory recorded in a run dir. Every stage that records rollouts runs them here with settings
of its own (the `collect` command's teacher, `filter`'s profile, `eval`'s benchmarks) through
`collect(problems, out_dir, CollectConfig)`; this part knows none of the stages that call it.

Many trajectories run at once (`concurrency`): while one waits for its code to run, others generate, and a
local engine batches every waiting generation into one call. Each finished trajectory is journaled at once
and batched into crash-safe shards; a run started again on the same dir skips what is done and redoes only
what was lost, what ended in an error, and what was made from a problem that has changed since (agent/resume.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from agentdata.agent.config import CollectConfig
from agentdata.agent.loop import UNGRADED, config_tools, solve
from agentdata.agent.resume import HASH_KEY, ResumePlan, plan_resume, problem_hash, unique_problems
from agentdata.agent.rundir import RunDir
from agentdata.agent.shard_writer import ShardBuffer, Written
from agentdata.agent.tool_use import ToolUse, tool_use_by
from agentdata.engines.base import engine_label
from agentdata.engines.fingerprint import model_fingerprint
from agentdata.engines.spec import ModelSpec, check_engine
from agentdata.errors import OutputWriteError, UserError
from agentdata.events import task
from agentdata.formats.health import HEALTH_REASONS, failed_checks, measure_health, stored_health
from agentdata.records import Problem, Trajectory, strip_none
from agentdata.versions import package_versions, stamped

# If this many trajectories in a row fail from the start, the engine or sandbox is broken: stop early.
FAIL_FAST_AFTER = 8
WAIT_REPORT_S = 5.0  # with nothing finished for this long, the progress says what the run waits on
# An upper bound that keeps a typo (--samples 10^23) from running until killed; docs/input-files.md.
MAX_TRAJECTORIES = 10_000_000
# One trajectory of a problem: (problem, sample index, seed) -> the trajectory.
Solver = Callable[[Problem, int, int], Awaitable[Trajectory]]


@dataclass
class CollectSummary:
    run_dir: Path
    total: int = 0
    new: int = 0
    correct: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    completion_tokens: int = 0
    finish_reasons: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0  # the whole run: the engine's and the sandbox's start included
    generating_s: float = 0.0  # from the first rollout to the last result: what the speeds are over
    engine: str = ""  # the engine that ran the model ("" when nothing was generated)
    new_completion_tokens: int = 0
    stale: int = 0  # redone this run: their problem changed since they were made
    retried: int = 0  # redone this run: they had ended in an error
    # Trajectories failing each rollout health check (formats.health, default limits); one may fail several.
    health: dict[str, int] = field(default_factory=dict)
    tool_use: dict[str, Any] = field(default_factory=dict)  # agent.tool_use: calls per correct answer, ...
    tool_use_by_source: list[dict[str, Any]] = field(default_factory=list)
    tool_use_by_domain: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def trajectories_per_s(self) -> float:
        """New trajectories per second of generating, the progress line's figure (engine start-up is not in it:
        over the whole run the same run read 0.41 where the progress line said 1.89)."""
        return self.new / self.generating_s if self.generating_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_completion_tokens / self.generating_s if self.generating_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            run_dir=str(self.run_dir),
            accuracy=self.accuracy,
            trajectories_per_s=self.trajectories_per_s,
            tokens_per_s=self.tokens_per_s,
            mean_tool_calls=self.tool_calls / self.total if self.total else 0.0,
            tool_error_rate=self.tool_errors / self.tool_calls if self.tool_calls else 0.0,
        )
        return data


def trajectory_seed(base_seed: int, problem_id: str, sample_index: int) -> int:
    digest = hashlib.sha1(f"{base_seed}:{problem_id}:{sample_index}".encode()).hexdigest()
    return int(digest[:8], 16)


def collect(
    problems: list[Problem], out_dir: str | Path, config: CollectConfig, engine: Any = None, sandbox: Any = None
) -> CollectSummary:
    """Collect trajectories into `out_dir` (resuming it); returns the summary of the whole run. Progress is
    reported as `agentdata.events` (task "collect"); nothing is drawn here. With `config.sharding.executor ==
    "ray"` every shard runs as a task on a Ray cluster (agent/ray_executor.py)."""
    config = config.for_run()  # an unset protocol: the model's own, read from its dir now the run starts
    if config.sharding.executor == "ray":
        from agentdata.agent.ray_executor import collect_on_ray

        return collect_on_ray(problems, out_dir, config, collect, engine, sandbox)
    return asyncio.run(collect_async(problems, out_dir, config, engine, sandbox))


MEMO = ".model_fingerprint.json"


def run_record(config: CollectConfig, run: RunDir, problems: int, model: ModelSpec | None = None) -> dict[str, Any]:
    """What the manifest records beside the settings: the code and model that made the run (cards cite it)."""
    # A local model dir's weights digest (engines/fingerprint.py; None for the rest), memoised in a run dir
    # that exists already (a fresh one is checked by `prepare` before anything is written in it).
    memo = run.path / MEMO if run.path.is_dir() else None
    return stamped(
        {
            "problems": problems,
            "versions": package_versions(),
            "model_fingerprint": model_fingerprint(model or config.model, memo=memo),
        }
    )


async def collect_async(
    problems: list[Problem], out_dir: str | Path, config: CollectConfig, engine: Any = None, sandbox: Any = None
) -> CollectSummary:
    problems = unique_problems(problems)[: config.limit]
    if not problems:
        raise UserError("no problems to collect on")
    config_tools(config.loop)  # a tool that cannot be loaded is the user's to fix before anything runs
    model = ModelSpec.parse(config.model)  # read once: checked, fingerprinted and loaded from here
    if engine is None:
        check_engine(model, config.engine_options)  # and a model spec or option that is wrong
    if len(problems) * config.samples > MAX_TRAJECTORIES:
        raise UserError(
            f"{len(problems):,} problems × {config.samples:,} samples is more than one run takes "
            f"(at most {MAX_TRAJECTORIES:,} trajectories); split the problems or lower the samples"
        )
    shard = config.sharding.shard
    run = RunDir(out_dir, shard)
    if shard is None and run.sharded():
        return _read_sharded(run, problems, config)
    problems = shard.select(problems) if shard is not None else problems
    extra = run_record(config, run, len(problems), model)
    if shard is not None:
        extra["shard"] = str(shard)
    run.prepare(config.settings(), extra)
    done = run.done_table()
    plan = plan_resume(problems, config.samples, done, config.retry_errors)
    if shard is not None:  # what a reader needs to say whether this part is finished: the ids it will hold
        planned = {f"{problem.id}-{index}" for problem, index in plan.work}
        expected = done.height + len(planned - set(done["id"].to_list()))
        run.write_manifest({"settings": config.settings(), **extra, "expected": expected})
    run.remove_rows(plan.replaced)  # before the new rows exist: the dir never holds two rows for one id
    started = time.perf_counter()
    written = await _run_work(plan.work, run, config, engine, sandbox, model) if plan.work else Written()
    summary = summarise(run, time.perf_counter() - started, written, plan)
    run.write_stats(summary.as_dict())
    return summary


def _read_sharded(run: RunDir, problems: list[Problem], config: CollectConfig) -> CollectSummary:
    """A sharded run dir given without --shard: every part is read as one run; nothing is generated, so a run
    with trajectories still to make is refused, naming the parts to run (a failed one is kept as it is)."""
    from agentdata.agent.shard_status import read_sharded

    status = read_sharded(run.path)
    run.manifest()  # a damaged part's manifest is named here
    plan = plan_resume(problems, config.samples, run.done_table(), retry_errors=False)
    if plan.work:
        raise UserError(
            f"{run.path} is a sharded run with {len(plan.work):,} trajectories still to make ({status.line()}): "
            f"run the parts with --shard I/{status.count} (or --executor ray), then this again"
        )
    return summarise(run, 0.0, None, plan)


async def _run_work(
    work: list[tuple[Problem, int]],
    run: RunDir,
    config: CollectConfig,
    engine: Any,
    sandbox: Any,
    model: ModelSpec | None = None,
) -> Written:
    owns_engine, owns_sandbox = engine is None, sandbox is None
    if owns_sandbox:  # first: a dead sandbox URL is refused before a model is loaded
        from agentdata.sandbox import open_sandbox

        sandbox = open_sandbox(config.loop.sandbox, max_rps=config.loop.sandbox_max_rps)
    if owns_engine:
        from agentdata.engines import load_engine

        try:
            engine = load_engine(str(model or config.model), **config.engine_options)  # its text: what engines record
        except BaseException:
            if owns_sandbox:
                sandbox.close()  # its worker processes must not outlive a refused engine
            raise
    writer = ShardBuffer(run, config.shard_size, config.settings())
    stopped = True  # by an exception, until the work is done
    try:
        if hasattr(engine, "ready"):
            await engine.ready()  # a server that cannot be reached, or never answers, stops the run here
        async with _solver(engine, sandbox, config) as solver:
            writer.written.engine = engine_label(engine)
            with _LiveProgress(len(work), engine, config.concurrency) as progress:
                watching = asyncio.ensure_future(progress.watch())
                try:
                    await _run_concurrently(
                        work, solver, engine, config, lambda t: (writer.add(t), progress.on_result(t))
                    )
                finally:
                    watching.cancel()
                    writer.written.generating_s = progress.generating_s
        stopped = False
    except RunBroken:
        writer.drop_errors()  # nothing but failures so far: keep them out, so the dir stays fresh for a fix
        run.remove_rows(writer.written.error_ids)
        raise
    finally:
        try:
            writer.close()
        except OutputWriteError:  # a full disk: the journal keeps the rows for a resume
            if not stopped:
                raise  # else the first failure is the one reported
        finally:  # whatever the writes did, the engine's HTTP sessions and the sandbox's processes end
            try:
                if owns_engine:
                    await engine.aclose()
                elif hasattr(engine, "arelease"):  # a lent engine keeps its model; a plug-in may have none
                    await engine.arelease()  # e.g. an HTTP session that belongs to this event loop
                await sandbox.arelease()  # e.g. a remote sandbox's HTTP session belongs to this event loop
            finally:
                if owns_sandbox:
                    sandbox.close()
    return writer.written


@contextlib.asynccontextmanager
async def _solver(engine: Any, sandbox: Any, config: CollectConfig) -> AsyncIterator[Solver]:
    """What makes one trajectory: the agent loop, or with `config.harness` a harness run against the
    recording gateway (agent/harness.py), which serves for as long as the run."""
    if config.harness:
        from agentdata.agent.harness import harness_solver

        async with harness_solver(engine, sandbox, config) as solver:
            yield solver
        return

    async def agent_loop(problem: Problem, index: int, seed: int) -> Trajectory:
        return await solve(problem, engine, sandbox, config.loop, sample_index=index, seed=seed)

    yield agent_loop


async def _run_concurrently(
    work: list[tuple[Problem, int]],
    solver: Solver,
    engine: Any,
    config: CollectConfig,
    on_result: Callable[[Trajectory], Any],
) -> None:
    queue: asyncio.Queue[tuple[Problem, int]] = asyncio.Queue()
    for item in work:
        queue.put_nowait(item)
    failures = _FailFast(min(FAIL_FAST_AFTER, len(work)), getattr(engine, "spec", None) or config.model)

    async def worker() -> None:
        while not queue.empty() and not failures.broken:  # a worker whose work never waits must stop too
            problem, index = queue.get_nowait()
            trajectory = await _solve_safely(problem, index, solver, engine, config)
            on_result(trajectory)
            failures.record(trajectory)

    workers = [asyncio.create_task(worker()) for _ in range(min(config.concurrency, len(work)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()


async def _solve_safely(problem: Problem, index: int, solver: Solver, engine: Any, config: CollectConfig) -> Trajectory:
    """A failure of one trajectory is recorded on it; the run goes on."""
    seed = trajectory_seed(config.seed, problem.id, index)
    try:
        trajectory = await solver(problem, index, seed)
    except Exception as error:  # engine or sandbox trouble on this trajectory only
        trajectory = Trajectory.of_problem(
            problem,
            f"{problem.id}-{index}",
            messages=[{"role": "user", "content": problem.question}],
            finish_reason="error",
            error=f"{type(error).__name__}: {error}",
            teacher=getattr(engine, "spec", config.model),
            format=config.loop.protocol,
            sampling={**config.loop.sampling(), "seed": seed, "sample_index": index},
        )
    trajectory.metadata[HASH_KEY] = problem_hash(problem)  # a later run redoes it if the problem changes
    return trajectory


class RunBroken(UserError):
    """Every trajectory so far failed: the engine or the sandbox is not working."""


class _FailFast:
    """Stops the run when its first trajectories all fail: a broken engine should not burn the whole list."""

    def __init__(self, window: int, model: str = ""):
        self.window, self.model = window, model
        self.seen = 0
        self.errors: list[str] = []
        self.broken = False

    def record(self, trajectory: Trajectory) -> None:
        if self.seen >= self.window:
            return
        self.seen += 1
        if trajectory.finish_reason == "error" and not (trajectory.error or "").startswith(UNGRADED):
            self.errors.append(
                trajectory.error or "unknown error"
            )  # a problem that could not be graded is no such sign
        if self.seen == self.window and len(self.errors) == self.window:
            self.broken = True
            raise RunBroken(
                f"the first {self.window} trajectories all failed (model {self.model}); first error: {self.errors[0]}"
            )


class _LiveProgress:
    """Reports each finished trajectory as a "collect" progress event with live rates, and while none
    finishes for a while, what the run is waiting on (`stats["waiting"]`: the engine's account of a
    slow or silent server and its retries, else how many trajectories are generating)."""

    def __init__(self, total: int, engine: Any = None, concurrency: int = 1):
        self.total, self.engine, self.concurrency = total, engine, concurrency
        self.started = self.last_result = time.perf_counter()
        self.done = self.correct = self.tool_calls = self.tokens = 0
        self.stats: dict[str, Any] = {}
        self.task = task("collect", total)
        self.advance: Callable[..., None] = lambda completed, **stats: None

    def __enter__(self) -> _LiveProgress:
        self.advance = self.task.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.task.__exit__(*exc)

    def on_result(self, trajectory: Trajectory) -> None:
        self.done += 1
        self.correct += trajectory.correct
        self.tool_calls += trajectory.num_tool_calls
        self.tokens += trajectory.completion_tokens
        self.last_result = time.perf_counter()
        elapsed = max(self.generating_s, 1e-9)
        self.stats = dict(
            accuracy=self.correct / self.done,
            trajectories_per_s=self.done / elapsed,
            tokens_per_s=self.tokens / elapsed,
            tool_calls=self.tool_calls,
        )
        self.advance(self.done, **self.stats)

    @property
    def generating_s(self) -> float:
        """From the first rollout to the last result: what the live rates, and the summary's, are over."""
        return self.last_result - self.started

    async def watch(self) -> None:
        """Every WAIT_REPORT_S, when nothing finished for that long: say what the run is waiting on."""
        while True:
            await asyncio.sleep(WAIT_REPORT_S)
            quiet = time.perf_counter() - self.last_result
            if quiet >= WAIT_REPORT_S:
                self.advance(self.done, **self.stats, waiting=self.waiting_text(quiet))

    def waiting_text(self, quiet: float) -> str:
        why = self.engine.waiting_on() if hasattr(self.engine, "waiting_on") else None
        in_flight = min(self.concurrency, self.total - self.done)
        return why or f"{in_flight} trajectories generating, none finished in the last {quiet:.0f} s"


def summarise(
    run: RunDir, elapsed_s: float, written: Written | None = None, plan: ResumePlan | None = None
) -> CollectSummary:
    """Summary of every trajectory in the run dir, read column-wise from the shards; `written`: this run's."""
    plan, written = plan or ResumePlan(), written or Written()
    summary = CollectSummary(
        run_dir=run.path,
        new=written.count,
        elapsed_s=elapsed_s,
        new_completion_tokens=written.completion_tokens,
        generating_s=written.generating_s,
        engine=written.engine,
        stale=len(plan.stale),
        retried=len(plan.retried),
    )
    reasons: Counter[str] = Counter()
    health: Counter[str] = Counter()
    everything, by_source, by_domain = ToolUse(), [], []
    columns = ["correct", "num_tool_calls", "num_tool_errors", "completion_tokens", "finish_reason"]
    for shard in run.shards():
        rows = pq.read_table(shard, columns=[*columns, "source", "domain", "metadata"]).to_pylist()
        for row in rows:
            counts = (row["correct"], row["num_tool_calls"], row["num_tool_errors"])
            everything.add(*counts)
            by_source.append((row["source"], *counts))
            by_domain.append((row["domain"], *counts))
            summary.completion_tokens += row["completion_tokens"]
            reasons[row["finish_reason"]] += 1
        health.update(_health_failures(shard, [row["metadata"] for row in rows]))
    summary.total, summary.correct = everything.trajectories, everything.correct
    summary.tool_calls, summary.tool_errors = everything.tool_calls, everything.tool_errors
    summary.finish_reasons = dict(reasons)
    summary.health = {reason: health[reason] for reason in HEALTH_REASONS if health[reason]}
    summary.tool_use = everything.as_dict()
    summary.tool_use_by_source = tool_use_by(by_source, "source")
    summary.tool_use_by_domain = tool_use_by(by_domain, "domain")
    return summary


def _health_failures(shard: Path, metadata: list[str | None]) -> Counter[str]:
    """The health checks each trajectory of a shard fails: from its stored measures, else measured now
    (a trajectory collected before they were stored: the shard's messages are read only then)."""
    failures: Counter[str] = Counter()
    stored = [stored_health(json.loads(text or "{}")) for text in metadata]
    if any(measures is None for measures in stored):
        rows = pq.read_table(shard, columns=["messages", "format", "domain"]).to_pylist()
        stored = [
            measures or measure_health(strip_none(row["messages"] or []), row["format"], row["domain"]).as_dict()
            for measures, row in zip(stored, rows)
        ]
    for measures in stored:
        failures.update(failed_checks(measures))
    return failures
