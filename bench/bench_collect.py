"""Collect benchmarks, each against its baseline in the same run.

1. Pipeline efficiency: `collect` against an OpenAI-compatible server that answers in a
   fixed latency, with a real tool call (local sandbox) in every trajectory. The ideal is
   `concurrency / latency` generation requests per second; we report the share reached.
2. Agent-loop overhead on the embedded default (SmolLM2 on the CPU): `collect`'s wall
   time against the same engine's plain batched `generate` replaying exactly the batches
   collect ran (greedy, so the same tokens), in the same run.
3. The journal's cost: pipeline efficiency with each finished trajectory journaled at once
   (what collect does) against the same run with the journal switched off (only the batched
   shards, as before the journal), alternating rounds in the same process.
4. Servers that do not say why they stopped: the same efficiency run against a server
   with `stop_reason` (vLLM's behaviour: the baseline) and against servers without it
   (OpenAI's API; `transformers serve`'s stop string left in the text and 422 on unknown
   fields), alternated in one run, hermes and codeblock.
5. One driver's ceiling (`ceiling`): against a server answering at once, trajectories/s, the driver's
   CPU per trajectory and its RSS, with cProfile's top entries on request.
6. The isolation floor (`floor`): the sandbox alone, what `ceiling` asks of it per trajectory (a fresh
   session, one call, its close) with no driver and no server, all isolation on against all of it off in
   the same run: the most trajectories/s any driver could reach with this sandbox on this machine.

    python bench/bench_collect.py efficiency --concurrency 64 --latency 0.2 --trajectories 512
    python bench/bench_collect.py journal --concurrency 64 --latency 1.0 --trajectories 512 --rounds 2
    python bench/bench_collect.py overhead --problems 16
    python bench/bench_collect.py stop-reason --concurrency 64 --latency 1.0 --trajectories 512
    python bench/bench_collect.py ceiling --concurrency 512 --trajectories 3000 [--profile 25]
    python bench/bench_collect.py floor --concurrency 512 --sessions 2000 --rounds 2
    python bench/bench_collect.py smoke        # all six, tiny (CI)

Each comparison checks that its arms did the same work (the same trajectories, each with its tool
call, graded alike; the replay generated the same tokens as collect) and stops with one line when
they did not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arms import same_work, tiny_model  # noqa: E402

from agentdata.agent import journal as journal_module  # noqa: E402
from agentdata.agent.config import CollectConfig, LoopConfig  # noqa: E402
from agentdata.agent.rundir import RunDir  # noqa: E402
from agentdata.agent.runner import collect  # noqa: E402
from agentdata.engines import load_engine  # noqa: E402
from agentdata.engines.base import GenerationRequest  # noqa: E402
from agentdata.records import Problem  # noqa: E402
from agentdata.sandbox import open_sandbox  # noqa: E402
from agentdata.synth.builtin import builtin_problems  # noqa: E402
from agentdata.verify import is_correct  # noqa: E402


def efficiency(
    concurrency: int,
    latency: float,
    trajectories: int,
    sandbox: str = "local",
    protocol: str = "hermes",
    server_flags: tuple[str, ...] = (),
) -> dict:
    """The server runs in its own process, as a real one would: in-process it would share our GIL."""
    problems = [Problem(f"What is 6 times 7? (copy {i})", "42") for i in range(trajectories)]
    script = "codeblock" if protocol == "codeblock" else "tool"
    with (
        _server_process(latency, ("--script", script, *server_flags)) as url,
        tempfile.TemporaryDirectory() as out,
        open_sandbox(sandbox) as box,
    ):
        box.run("print(1)")  # the sandbox starts (imports numpy, sympy) before the clock does: steady state
        config = CollectConfig(
            model=f"openai:{url}",
            concurrency=concurrency,
            loop=LoopConfig(temperature=0.0, sandbox=sandbox, protocol=protocol),
            engine_options={"model": "fake-model", "concurrency": concurrency},
        )
        started = time.perf_counter()
        summary = collect(problems, out, config, sandbox=box)
        elapsed = time.perf_counter() - started
        collected = RunDir(out).trajectories()
    requests = sum(t.num_turns for t in collected)
    ideal = concurrency / latency
    achieved = requests / elapsed
    return {
        "benchmark": "collect pipeline efficiency",
        "concurrency": concurrency,
        "latency_s": latency,
        "sandbox": sandbox,
        "protocol": protocol,
        "server_flags": " ".join(server_flags),
        "trajectories": summary.total,
        "with_tool_calls": sum(t.num_tool_calls > 0 for t in collected),
        "accuracy": summary.accuracy,
        "requests": requests,
        "requests_per_trajectory": round(requests / max(summary.total, 1), 2),
        "elapsed_s": round(elapsed, 2),
        "requests_per_s": round(achieved, 1),
        "ideal_requests_per_s": round(ideal, 1),
        "efficiency": round(achieved / ideal, 3),
        "load_average": os.getloadavg()[0],
    }


STRICT_SERVER = "no stop_reason, stop left in text, strict (transformers serve)"
# Server behaviours (bench/fake_openai_server.py flags): the baseline first.
SERVER_KINDS = {
    "stop_reason (vLLM)": (),
    "no stop_reason (OpenAI API)": ("--no-stop-reason",),
    STRICT_SERVER: ("--no-stop-reason", "--keep-stop-string", "--strict"),
}


def stop_reason(
    concurrency: int,
    latency: float,
    trajectories: int,
    rounds: int,
    protocols: tuple[str, ...] = ("hermes", "codeblock"),
    kinds: tuple[str, ...] = tuple(SERVER_KINDS),
) -> list[dict]:
    """Each server kind and protocol, alternated for `rounds` so all see the same machine load."""
    results = []
    for _ in range(rounds):
        for protocol in protocols:
            baseline = None
            for kind in kinds:
                flags = SERVER_KINDS[kind]
                result = efficiency(concurrency, latency, trajectories, protocol=protocol, server_flags=flags)
                baseline = baseline or result
                same_collect_work(f"{protocol}, {kind} against the stop_reason server", result, baseline)
                results.append({"server": kind, **result})
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return results


@contextlib.contextmanager
def _server_process(latency: float, flags: tuple[str, ...] = (), with_pid: bool = False):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("fake_openai_server.py")),
            "--port",
            str(port),
            "--latency",
            str(latency),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                httpx.get(f"{url}/models", timeout=1.0)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield (url, server.pid) if with_pid else url
    finally:
        server.terminate()
        server.wait(timeout=10)


def same_collect_work(what: str, ours: dict, theirs: dict) -> None:
    """Both runs collected the same trajectories, each with its tool call, and graded them alike."""
    for key in ("trajectories", "with_tool_calls", "accuracy"):
        same_work("bench_collect", f"{what}: {key}", ours[key], theirs[key])


def journal_cost(concurrency: int, latency: float, trajectories: int, rounds: int) -> dict:
    """Efficiency with and without the per-trajectory journal, alternating so both see the same load."""
    real_append = journal_module.Journal.append
    with_journal, without_journal = [], []
    try:
        for _ in range(rounds):
            # before: rows wait in memory for a shard
            journal_module.Journal.append = lambda self, trajectory, row=None: None
            without = efficiency(concurrency, latency, trajectories)
            journal_module.Journal.append = real_append
            with_ = efficiency(concurrency, latency, trajectories)
            same_collect_work("journal on and off", with_, without)
            without_journal.append(without["efficiency"])
            with_journal.append(with_["efficiency"])
    finally:
        journal_module.Journal.append = real_append
    return {
        "benchmark": "journal cost (collect pipeline efficiency)",
        "concurrency": concurrency,
        "latency_s": latency,
        "trajectories": trajectories,
        "without_journal": without_journal,
        "with_journal": with_journal,
        "ratio_of_means": round(sum(with_journal) / sum(without_journal), 3),
        "load_average": os.getloadavg()[0],
    }


def overhead(n_problems: int, max_new_tokens: int, rounds: int = 2, spec: str = "smollm2") -> dict:
    """The loop's own cost: collect's wall time against replaying exactly its generate batches.

    Every batch the engine ran during collect is recorded, then run again directly (greedy,
    so the same tokens come out). What collect spent beyond that replay is the agent loop:
    parsing, the sandbox, bookkeeping, writing shards.
    """
    problems = builtin_problems()[:n_problems]
    config = CollectConfig(
        model=spec,
        concurrency=n_problems,
        loop=LoopConfig(temperature=0.0, max_new_tokens=max_new_tokens, max_tool_calls=2, protocol="codeblock"),
    )
    engine = load_engine(spec)
    engine.set_streaming(False)  # whole batches, so that each one can be recorded and replayed
    batches: list[list[GenerationRequest]] = []
    run_batch = engine._batcher._run_batch
    engine._batcher._run_batch = lambda requests: batches.append(list(requests)) or run_batch(requests)
    sandbox = open_sandbox("local")
    collect_times, replay_times = [], []
    try:
        # One-off start-up costs are not the loop's per-trajectory cost: pay them before the clock.
        run_batch([GenerationRequest(messages=[{"role": "user", "content": "hi"}], max_new_tokens=4)])
        is_correct("so \\boxed{x^2 + 1}", "1 + x^2")  # starts the math-verify worker processes
        with tempfile.TemporaryDirectory() as out:  # imports the Parquet writer's modules
            warm_up = replace(config, loop=replace(config.loop, max_new_tokens=4))
            collect(problems[:1], out, warm_up, engine=engine, sandbox=sandbox)
        for _ in range(rounds):  # alternate the two so both see the same machine load; keep the best of each
            batches.clear()
            with tempfile.TemporaryDirectory() as out:
                started = time.perf_counter()
                summary = collect(problems, out, config, engine=engine, sandbox=sandbox)
                collect_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            replayed = [generation for batch in list(batches) for generation in run_batch(batch)]
            replay_times.append(time.perf_counter() - started)
    finally:
        sandbox.close()
        asyncio.run(engine.aclose())
    collect_s, replay_s = min(collect_times), min(replay_times)
    replay_tokens = sum(g.completion_tokens for g in replayed)
    same_work("bench_collect overhead", "tokens generated (greedy)", replay_tokens, summary.completion_tokens)
    return {
        "benchmark": "agent loop overhead (smollm2, CPU, greedy)",
        "trajectories": summary.total,
        "turns": sum(len(batch) for batch in batches),
        "generate_batches": len(batches),
        "tool_calls": summary.tool_calls,
        "collect_tokens": summary.completion_tokens,
        "collect_s": round(collect_s, 2),
        "collect_tokens_per_s": round(summary.completion_tokens / collect_s, 1),
        "collect_trajectories_per_min": round(summary.total / collect_s * 60, 1),
        "replay_tokens": replay_tokens,
        "replay_s": round(replay_s, 2),
        "replay_tokens_per_s": round(replay_tokens / replay_s, 1),
        "overhead": round(collect_s / replay_s - 1, 3),
        "collect_times_s": [round(t, 2) for t in collect_times],
        "replay_times_s": [round(t, 2) for t in replay_times],
        "load_average": os.getloadavg()[0],
    }


def _first_error(errors: list[str]) -> str:
    return errors[0][:300] if errors else "none"


def ceiling(concurrency: int, trajectories: int, profile_top: int = 0) -> dict:
    """One driver's ceiling: `collect` against a server answering at once (its own process), a real tool call
    in the local sandbox per trajectory (two requests, one sandbox call). Trajectories/s; the CPU per trajectory
    of the driver, the server and the sandbox (its template and killer process with every executor and killer
    they reaped); the driver's RSS after every tenth of the run and at 10k trajectories; with `profile_top`,
    cProfile's top entries by own time (the profile slows the run)."""
    import cProfile
    import io
    import pstats

    from agentdata.events import listening

    problems = [Problem(f"What is 6 times 7? (copy {i})", "42") for i in range(trajectories)]
    rss_at: dict[int, int] = {}
    marks = {trajectories * k // 10 for k in range(1, 11)} | {10_000}

    def on_event(event) -> None:
        if event.kind == "advance" and event.task == "collect" and event.completed in marks:
            rss_at[event.completed] = _rss_mb(os.getpid())

    with (
        _server_process(0.0, ("--script", "tool"), with_pid=True) as (url, server_pid),
        tempfile.TemporaryDirectory() as out,
        open_sandbox("local") as box,
        listening(on_event),
    ):
        box.run("print(1)")  # started before the clock
        config = CollectConfig(
            model=f"openai:{url}",
            concurrency=concurrency,
            loop=LoopConfig(temperature=0.0, protocol="hermes"),
            engine_options={"model": "fake-model", "concurrency": concurrency},
        )
        # The template with the executors it reaped, and its killer process with the killers it reaped.
        sandbox_pids = [box._pool.template.info["pid"], box._pool.template.info.get("killer_pid")]
        profile = cProfile.Profile() if profile_top else None
        server_cpu, sandbox_cpu = _cpu_s(server_pid), _cpu_s(*sandbox_pids)
        started, cpu = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        summary = collect(problems, out, config, sandbox=box)
        if profile:
            profile.disable()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        server_cpu, sandbox_cpu = _cpu_s(server_pid) - server_cpu, _cpu_s(*sandbox_pids) - sandbox_cpu
        same = summary.correct == trajectories and summary.tool_calls == trajectories
        # Only to name a failure: reading every trajectory back was the peak RSS of a 10^5 run (1.3 GB).
        out_errors = [] if same else [t.error for t in RunDir(out).trajectories() if t.error][:1]
    if not same:
        raise SystemExit(
            f"ceiling: {summary.correct} of {trajectories} correct, {summary.tool_calls} tool calls "
            f"(finish reasons {summary.finish_reasons}; first error: {_first_error(out_errors)}): not the same work"
        )
    result = {
        "benchmark": "one driver's ceiling",
        "concurrency": concurrency,
        "trajectories": trajectories,
        "trajectories_per_s": round(trajectories / elapsed, 1),
        "driver_cpu_ms_per_trajectory": round(1000 * cpu / trajectories, 2),
        "server_cpu_ms_per_trajectory": round(1000 * server_cpu / trajectories, 2),
        "sandbox_cpu_ms_per_trajectory": round(1000 * sandbox_cpu / trajectories, 2),
        "rss_mb_after": dict(sorted(rss_at.items())),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "load_average": os.getloadavg()[0],
    }
    if profile:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(profile_top)
        result["profile"] = [line for line in text.getvalue().splitlines() if line.strip()][-profile_top:]
    return result


ISOLATION_OFF = {"isolate_network": False, "isolate_filesystem": False, "drop_privileges": False}


def floor(concurrency: int, sessions: int, rounds: int = 2) -> dict:
    """The sandbox alone, per trajectory what `ceiling` asks of it: a fresh session, the same call, its close.
    Alternating rounds of all isolation on (the default) and all of it off, each its own Sandbox: sessions/s,
    the sandbox's CPU per session (template, killer and what they reaped) and the host side's (this process,
    the sandbox's loop thread)."""
    arms = {"isolated": {}, "no isolation": ISOLATION_OFF}
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, options in arms.items():
            runs[name].append(_floor_round(concurrency, sessions, options))
    result = {"benchmark": "the isolation floor", "concurrency": concurrency, "sessions": sessions}
    for name, measured in runs.items():
        result[name] = {key: [run[key] for run in measured] for key in measured[0]}
    result["load_average"] = os.getloadavg()[0]
    return result


def _floor_round(concurrency: int, sessions: int, options: dict) -> dict:
    code = "print(6 * 7)"  # what the fake server's tool script asks the sandbox to run

    async def one(box, index: int, gate: asyncio.Semaphore) -> bool:
        async with gate:
            session = f"floor-{index}"
            result = await box.arun(code, session_id=session)
            await box.aclose_session(session)
            return result.status == "ok" and result.stdout.strip() == "42"

    async def run_all(box) -> list[bool]:
        gate = asyncio.Semaphore(concurrency)
        return await asyncio.gather(*(one(box, i, gate) for i in range(sessions)))

    with open_sandbox("local", **options) as box:  # the rest as `ceiling` has it: the defaults
        box.run("print(1)")  # started before the clock
        sandbox_pids = [box._pool.template.info["pid"], box._pool.template.info.get("killer_pid")]
        sandbox_cpu, host_cpu = _cpu_s(*sandbox_pids), time.process_time()
        started = time.perf_counter()
        answers = asyncio.run(run_all(box))
        elapsed = time.perf_counter() - started
        sandbox_cpu, host_cpu = _cpu_s(*sandbox_pids) - sandbox_cpu, time.process_time() - host_cpu
        isolation = box.isolation
    if not all(answers):
        raise SystemExit(f"floor: {sessions - sum(answers)} of {sessions} sessions did not print 42: not the same work")
    return {
        "sessions_per_s": round(sessions / elapsed, 1),
        "sandbox_cpu_ms_per_session": round(1000 * sandbox_cpu / sessions, 2),
        "host_cpu_ms_per_session": round(1000 * host_cpu / sessions, 2),
        "own_uid": isolation["own_uid"],
        "private_view": isolation["private_view"],
    }


def _cpu_s(*pids: int | None) -> float:
    """User + system CPU of processes and of the children they have reaped (/proc/PID/stat), in seconds."""
    ticks = 0
    for pid in filter(None, pids):
        with open(f"/proc/{pid}/stat") as handle:
            ticks += sum(int(value) for value in handle.read().rsplit(")", 1)[1].split()[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="which", required=True)
    eff = sub.add_parser("efficiency")
    eff.add_argument("--concurrency", type=int, default=64)
    eff.add_argument("--latency", type=float, default=0.2)
    eff.add_argument("--trajectories", type=int, default=512)
    eff.add_argument("--sandbox", default="local", help="'local' or a sandbox service URL")
    jrn = sub.add_parser("journal")
    jrn.add_argument("--concurrency", type=int, default=64)
    jrn.add_argument("--latency", type=float, default=1.0)
    jrn.add_argument("--trajectories", type=int, default=512)
    jrn.add_argument("--rounds", type=int, default=2)
    stop = sub.add_parser("stop-reason")
    stop.add_argument("--concurrency", type=int, default=64)
    stop.add_argument("--latency", type=float, default=1.0)
    stop.add_argument("--trajectories", type=int, default=512)
    stop.add_argument("--rounds", type=int, default=2)
    ovh = sub.add_parser("overhead")
    ovh.add_argument("--problems", type=int, default=16)
    ovh.add_argument("--max-new-tokens", type=int, default=256)
    ovh.add_argument("--rounds", type=int, default=2)
    top = sub.add_parser("ceiling")
    top.add_argument("--concurrency", type=int, default=512)
    top.add_argument("--trajectories", type=int, default=3000)
    top.add_argument("--profile", type=int, default=0, help="print cProfile's top N entries by own time")
    flr = sub.add_parser("floor")
    flr.add_argument("--concurrency", type=int, default=512)
    flr.add_argument("--sessions", type=int, default=2000)
    flr.add_argument("--rounds", type=int, default=2)
    sub.add_parser("smoke", help="every benchmark above at a tiny size (CI: they run and check their arms)")
    args = parser.parse_args()
    if args.which == "efficiency":
        result = efficiency(args.concurrency, args.latency, args.trajectories, args.sandbox)
    elif args.which == "journal":
        result = journal_cost(args.concurrency, args.latency, args.trajectories, args.rounds)
    elif args.which == "stop-reason":
        result = stop_reason(args.concurrency, args.latency, args.trajectories, args.rounds)
    elif args.which == "overhead":
        result = overhead(args.problems, args.max_new_tokens, args.rounds)
    elif args.which == "ceiling":
        result = ceiling(args.concurrency, args.trajectories, args.profile)
    elif args.which == "floor":
        result = floor(args.concurrency, args.sessions, args.rounds)
    else:
        result = {
            "efficiency": efficiency(4, 0.05, 8),
            "journal": journal_cost(4, 0.05, 8, rounds=1),
            "stop-reason": stop_reason(4, 0.05, 4, 1, ("codeblock",), (next(iter(SERVER_KINDS)), STRICT_SERVER)),
            "overhead": overhead(1, 8, rounds=1, spec=f"hf:{tiny_model(Path(tempfile.mkdtemp()) / 'tiny')}"),
            "ceiling": ceiling(8, 16, profile_top=5),
            "floor": floor(8, 16, rounds=1),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
