"""Arms at once, each in a worker process of its own (`agentdata experiment --jobs N`).

A 135M student on a CPU keeps one core busy per process: one torch thread does more per CPU second
than two that wait for each other (bench/RESULTS_findings.md), so two arms on two cores finish in
about half the time of one after the other. Each arm runs in a fresh process (spawned: no lock or
thread of the parent comes with it), so whatever a stage leaves in memory goes when its arm ends, and
`jobs` bounds the memory of the whole experiment.

- Stages two arms share run once: the first takes the stage's lock, the second waits and reuses it
  (work.py). A stage failure is its arm's, as without workers.
- Progress events come back to the parent over a queue and are emitted there, scoped by arm, so the
  CLI shows one bar per arm and task.
- Ctrl-C or a kill of the parent stops every worker (it is the parent's to stop: the workers ignore
  SIGINT, turn SIGTERM into KeyboardInterrupt so their stages close their sandboxes, and stop themselves
  if the parent goes away without a word, e.g. on SIGKILL). The same command resumes where they stopped.
- A worker that dies without an outcome (the kernel's OOM killer) fails its arm with its exit status;
  the other arms go on.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentdata.events import Event, emit, listening

GB = 1024**3
# What one arm's process can reach on the embedded default: 7.0 GB at the peak of a GRPO step (sampled;
# between steps and in the evaluation after it 2.4-3.6 GB, since training gives freed memory back:
# training/memory.py, bench/RESULTS_findings.md session 9); `--jobs` defaults to as many as fit beside it.
ARM_MEMORY_BYTES = 8 * GB
STOP_GRACE_S = 30.0  # a stopped worker's time to close its sandbox and engine before it is killed


@dataclass(frozen=True)
class ArmJob:
    """What a worker needs to run one arm (all of it picklable: the plan is the arm's built configs)."""

    index: int
    plan: Any  # plan.ArmPlan
    set_kinds: list[str]
    files: Any  # plan.ProblemFiles
    work_root: Path
    run_id: str
    arms_dir: Path
    threads: int  # torch threads for the worker (OMP_NUM_THREADS), unless the caller set them
    warning_filters: list  # the parent's (the CLI keeps the libraries' notices out): a spawned worker starts bare
    opens_with: str | None = None  # the first stage it may share with other arms (runner.opening), None: none

    @property
    def scope(self) -> str:
        return self.plan.arm if not self.plan.repetition else f"{self.plan.arm} (seed {self.plan.repetition})"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (bytes), None where there is none."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def default_jobs(arms: int, engines: set[str]) -> int:
    """As many arms at once as there are cores and memory for; one when an arm runs vLLM (it takes the
    accelerator's memory for itself) or a single core is all there is."""
    if "vllm" in engines:
        return 1
    memory = available_memory()
    fits = max(1, memory // ARM_MEMORY_BYTES) if memory else arms
    return max(1, min(arms, usable_cores(), fits))


def run_arms_in_workers(jobs: list[ArmJob], workers: int) -> list[Any]:
    """Every job's ArmOutcome, in job order, with at most `workers` arms running at once."""
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    waiting, running, outcomes = list(jobs), {}, {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                job = next_job(waiting, [job for job, _ in running.values()])
                waiting.remove(job)
                process = context.Process(target=_work, args=(job, messages, os.getpid()), name=f"arm-{job.scope}")
                process.start()
                running[job.index] = (job, process)
            _deliver(messages, outcomes, timeout=0.5)
            for index, (job, process) in list(running.items()):
                if index in outcomes or not process.is_alive():
                    process.join()
                    _deliver(messages, outcomes, timeout=0)  # whatever it sent before it ended
                    if index not in outcomes:
                        outcomes[index] = _died(job, process.exitcode)
                    del running[index]
    finally:
        _stop([process for _, process in running.values()])
        messages.close()
    return [outcomes[job.index] for job in jobs]


def next_job(waiting: list[ArmJob], running: list[ArmJob]) -> ArmJob:
    """The first waiting arm that does not open with a stage a running arm is opening with (it would wait
    idle for it), else the first: in `pool`, `all` runs beside `band`'s profile rather than `random`."""
    busy = {job.opens_with for job in running} - {None}
    return next((job for job in waiting if job.opens_with not in busy), waiting[0])


def _deliver(messages: Any, outcomes: dict[int, Any], timeout: float) -> None:
    """Emit the workers' events here and keep their outcomes; wait up to `timeout` for the first message."""
    block = timeout > 0
    while True:
        try:
            kind, index, payload = messages.get(block, timeout) if block else messages.get_nowait()
        except queue.Empty:
            return
        block = False
        if kind == "event":
            emit(payload)
        else:
            outcomes[index] = payload


def _died(job: ArmJob, exitcode: int | None) -> Any:
    from agentdata.experiment.arm import ArmOutcome, note_failure, record_outcome

    how = f"killed by signal {-exitcode}" if exitcode and exitcode < 0 else f"exit status {exitcode}"
    hint = " (SIGKILL: perhaps the kernel's OOM killer; try fewer --jobs)" if exitcode == -signal.SIGKILL else ""
    outcome = _recorded(job) or ArmOutcome(job.plan.arm, job.plan.repetition)
    outcome.status, outcome.failed_stage, outcome.running_stage = "failed", outcome.running_stage or "start", None
    outcome.reason = f"the arm's worker process died ({how}){hint}"
    note_failure(outcome)
    record_outcome(outcome, job.arms_dir)
    return outcome


def _recorded(job: ArmJob) -> Any:
    """What the arm's record says it had done before its worker died (its finished stages)."""
    import json

    from agentdata.experiment.arm import ArmOutcome, arm_record

    path = arm_record(job.arms_dir, job.plan)
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return ArmOutcome(**data) if data.get("status") == "running" else None


def _stop(processes: list[Any]) -> None:
    """Ask each worker to stop (SIGTERM: its stages close what they opened), then kill what is left."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _work(job: ArmJob, messages: Any, parent: int) -> None:
    """A worker's life: one arm, its events and its outcome sent to the parent."""
    from agentdata.experiment.arm import run_arm
    from agentdata.experiment.work import Workshop

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped: unwind, closing sandboxes and engines
    _stop_with(parent, messages)
    _limit_threads(job.threads)
    warnings.filters[:] = job.warning_filters

    def forward(event: Event) -> None:
        messages.put(("event", job.index, replace(event, scope=job.scope)))

    try:
        with listening(forward):
            outcome = run_arm(job.plan, job.set_kinds, job.files, Workshop(job.work_root, job.run_id), job.arms_dir)
    except KeyboardInterrupt:  # stopped by the parent: its stages have closed what they opened
        sys.exit(130)  # quietly (multiprocessing prints a traceback for anything but SystemExit)
    messages.put(("outcome", job.index, outcome))


def _limit_threads(threads: int) -> None:
    if "OMP_NUM_THREADS" in os.environ:
        return  # the caller chose
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)


STOP_GRACE_S = 15.0  # after its parent is gone, how long a worker may take to unwind before it ends at once


def _stop_with(parent: int, messages: Any) -> None:
    """Stop this worker once its parent is gone, e.g. killed with SIGKILL: SIGTERM to itself, so its stages close
    what they opened, then, still alive STOP_GRACE_S later (a long call in C, or the exit blocked flushing
    `messages` into a pipe nobody reads), an immediate exit. Its own children are supervised (processes.py)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        messages.cancel_join_thread()  # nobody reads them now: exiting must not wait to flush them
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(STOP_GRACE_S)
        os._exit(143)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
