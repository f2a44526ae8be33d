"""An `openai:URL1,URL2,...` fleet against latency servers: the balance, the fail-over, the per-replica cap.

Every arm runs `collect` (hermes, a real tool call per trajectory in the local sandbox, so two requests a
trajectory) through the real openai engine against FakeOpenAIServer replicas in this process, and reads
what each replica was sent from the engine (`engine.fleet.replicas`) and the servers' own request logs.

1. balance: 4 replicas, one 4x slower than the others, a fixed number of trajectories in flight. Our
   router (a new trajectory to the replica with the fewest requests in flight, its later turns to the
   same one) against round robin on the same fleet, alternating (round robin, ours, round robin). Also:
   the share of trajectories whose two turns went to one replica (prefix-cache reuse).
2. failover: 3 replicas; a third of the way in, one starts answering HTTP 503 to everything. Reported:
   trajectories that ended in an error (should be none), what the broken replica got after it broke.
3. cap: 2 replicas with max_rps=R each (R below what they would get uncapped); the requests per second
   each got, against R.
4. sandbox cap: `--sandbox URL1,URL2` with `sandbox_max_rps` R (collect opens it from its settings, as the
   CLI does), against two `agentdata sandbox serve` apps (a session per trajectory: its cell and its
   close) and two SandboxFusion stand-ins (tests/sandboxfusion_standin.py, stateless /run_code): uncapped,
   capped, and capped with a URL that is not listening between the two (fail-over). Timed at each server:
   the requests each got, their rate, the smallest gap and how much sooner than k/R after the first any
   k-th request came.

    python bench/bench_fleet.py --trajectories 256 --concurrency 16 --latency 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentdata.agent.runner import CollectConfig, collect_async  # noqa: E402
from agentdata.engines.fleet import Fleet, Replica  # noqa: E402
from agentdata.engines.openai_compat import OpenAIEngine  # noqa: E402
from agentdata.records import Problem  # noqa: E402
from agentdata.sandbox import open_sandbox  # noqa: E402
from agentdata.sandbox.service import build_app  # noqa: E402
from agentdata.settings import build  # noqa: E402
from bench.fake_openai_server import FakeOpenAIServer  # noqa: E402
from tests.sandboxfusion_standin import Arrivals, ServedApp, build_standin, free_port  # noqa: E402


def _problems(count: int) -> list[Problem]:
    return [Problem(f"What is 6 times 7? (take {i})", "42", id=f"p{i}") for i in range(count)]


def _run(servers, trajectories, concurrency, box, router=None, **options):
    engine = OpenAIEngine([s.url for s in servers], model="fake-model", concurrency=concurrency, **options)
    if router is not None:
        engine.fleet = router([replica.url for replica in engine.fleet.replicas])
        engine.servers = engine.fleet.replicas
    config = build(CollectConfig, {"model": engine.spec, "protocol": "hermes", "concurrency": concurrency})

    async def run(out: Path):
        try:
            return await collect_async(_problems(trajectories), out / "run", config, engine=engine, sandbox=box)
        finally:
            await engine.aclose()

    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        summary = asyncio.run(run(Path(out)))
        elapsed = time.perf_counter() - started
    return summary, elapsed, engine


def _homes(servers) -> float:
    """The share of trajectories whose every request went to one replica."""
    homes = defaultdict(set)
    for index, server in enumerate(servers):
        for body in server.requests:
            question = next(m["content"] for m in body["messages"] if m["role"] == "user")
            homes[question].add(index)
    return sum(len(home) == 1 for home in homes.values()) / max(len(homes), 1)


class _RoundRobin(Fleet):
    """The baseline router: each new trajectory to the next replica in turn, whatever is in flight."""

    def _least_busy(self, now: float) -> Replica:
        return self.replicas[next(self._turn) % len(self.replicas)]


def balance(trajectories: int, concurrency: int, latency: float, box, rounds: int = 2) -> dict:
    """Our router against round robin on the same fleet (3 replicas at `latency`, one at 4x), alternating
    (round robin first and last); the ratio of the means with a 95% interval (Welch, normal approximation)."""
    results = {}
    with FakeOpenAIServer(latency=latency) as a, FakeOpenAIServer(latency=latency) as b:
        with FakeOpenAIServer(latency=latency) as c, FakeOpenAIServer(latency=4 * latency) as slow:
            servers = [a, b, c, slow]
            arms = [("round_robin", _RoundRobin), ("ours", Fleet)] * rounds + [("round_robin", _RoundRobin)]
            for name, router in arms:
                for server in servers:
                    server.requests.clear()
                summary, elapsed, engine = _run(servers, trajectories, concurrency, box, router=router)
                assert summary.correct == trajectories, f"{name}: every trajectory must be made and correct"
                sent = [replica.sent for replica in engine.fleet.replicas]
                results.setdefault(name, []).append(
                    {
                        "traj_per_s": trajectories / elapsed,
                        "requests_per_replica": sent,
                        "turns_on_one_replica": _homes(servers),
                    }
                )
    ours = [run["traj_per_s"] for run in results["ours"]]
    base = [run["traj_per_s"] for run in results["round_robin"]]
    difference = statistics.mean(ours) - statistics.mean(base)
    spread = (statistics.variance(ours) / len(ours) + statistics.variance(base) / len(base)) ** 0.5
    return {
        "arm": "balance",
        "latencies_s": [latency] * 3 + [4 * latency],
        "concurrency": concurrency,
        **results,
        "ratio_ours_vs_round_robin": statistics.mean(ours) / statistics.mean(base),
        "difference_traj_per_s_ci95": [difference - 1.96 * spread, difference + 1.96 * spread],
    }


def failover(trajectories: int, concurrency: int, latency: float, box) -> dict:
    with FakeOpenAIServer(latency=latency) as a, FakeOpenAIServer(latency=latency) as b:
        with FakeOpenAIServer(latency=latency) as broken:
            at_break = {}

            def break_it():
                while sum(len(s.requests) for s in (a, b, broken)) < 2 * trajectories // 3:
                    time.sleep(0.01)
                at_break["broken"] = len(broken.requests)
                broken.fail_always = 503

            threading.Thread(target=break_it, daemon=True).start()
            summary, elapsed, engine = _run([a, b, broken], trajectories, concurrency, box, cooldown_s=5.0)
            after = len(broken.requests) - at_break.get("broken", 0)
    return {
        "arm": "failover",
        "trajectories": trajectories,
        "errors": summary.finish_reasons.get("error", 0),
        "correct": summary.correct,
        "requests_per_replica": [replica.sent for replica in engine.fleet.replicas],
        "broken_requests_before": at_break.get("broken"),
        "broken_requests_after_it_broke": after,
        "conversations_failed_over": engine.fleet.failovers,
        "traj_per_s": trajectories / elapsed,
    }


def cap(trajectories: int, concurrency: int, rps: float, box) -> dict:
    with FakeOpenAIServer(latency=0.0) as a, FakeOpenAIServer(latency=0.0) as b:
        summary, elapsed, engine = _run([a, b], trajectories, concurrency, box, max_rps=rps)
    per_replica = [replica.sent / elapsed for replica in engine.fleet.replicas]
    return {"arm": "cap", "max_rps": rps, "measured_rps_per_replica": per_replica, "correct": summary.correct}


def _spacing(arrivals: Arrivals, rps: float | None) -> dict:
    times = arrivals.times
    measured = {"requests": len(times)}
    if len(times) >= 2:
        measured["rps"] = (len(times) - 1) / (times[-1] - times[0])
        measured["min_gap_s"] = min(arrivals.gaps())
    if rps is not None and times:
        measured["most_early_s"] = max(index / rps - (moment - times[0]) for index, moment in enumerate(times))
    return measured


def sandbox_cap(trajectories: int, concurrency: int, rps: float, box) -> list[dict]:
    """collect against a sandbox fleet of each kind: uncapped, capped, and capped with a dead URL among them."""
    results = []
    for kind, app in (("agentdata", lambda: build_app(box)), ("sandboxfusion", build_standin)):
        for cap_rps, with_dead in ((None, False), (rps, False), (rps, True)):
            arrivals = [Arrivals(app()) for _ in range(2)]
            servers = [ServedApp(one) for one in arrivals]
            urls = [server.url for server in servers]
            if with_dead:  # not listening: passed over after its first failures
                urls.insert(1, f"http://127.0.0.1:{free_port()}")
            try:
                summary, elapsed = _collect_on_sandbox(trajectories, concurrency, ",".join(urls), cap_rps)
            finally:
                for server in servers:
                    server.stop()
            results.append(
                {
                    "arm": "sandbox_cap",
                    "service": kind,
                    "sandbox_max_rps": cap_rps,
                    "dead_url": with_dead,
                    "trajectories": trajectories,
                    "correct": summary.correct,
                    "errors": summary.finish_reasons.get("error", 0),
                    "traj_per_s": trajectories / elapsed,
                    "per_live_endpoint": [_spacing(one, cap_rps) for one in arrivals],
                }
            )
    return results


def _collect_on_sandbox(trajectories: int, concurrency: int, sandbox: str, max_rps: float | None):
    """collect, opening `sandbox` from its own settings as the CLI does, against a zero-latency model."""
    with FakeOpenAIServer(latency=0.0) as model:
        engine = OpenAIEngine([model.url], model="fake-model", concurrency=concurrency)
        values = {"model": engine.spec, "protocol": "hermes", "concurrency": concurrency}
        config = build(CollectConfig, {**values, "sandbox": sandbox, "sandbox_max_rps": max_rps})

        async def run(out: Path):
            try:
                return await collect_async(_problems(trajectories), out / "run", config, engine=engine)
            finally:
                await engine.aclose()

        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            summary = asyncio.run(run(Path(out)))
            return summary, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.5, help="the fast replicas' (the slow one: 4x)")
    parser.add_argument("--rounds", type=int, default=2, help="balance: rounds of (round robin, ours)")
    parser.add_argument("--rps", type=float, default=5.0, help="the cap of arm 3 (below what the fleet reaches)")
    parser.add_argument("--sandbox-rps", type=float, default=2.0, help="the cap of arm 4 (per sandbox URL)")
    parser.add_argument("--sandbox-trajectories", type=int, default=32, help="arm 4's, in each of its six runs")
    parser.add_argument("--only", choices=["balance", "failover", "cap", "sandbox_cap"], help="run one arm")
    args = parser.parse_args()
    print(json.dumps({"load": os.getloadavg()}))
    with open_sandbox("local") as box:
        box.run("print(1)")  # started before the clock
        arms = {
            "balance": lambda: [balance(args.trajectories, args.concurrency, args.latency, box, args.rounds)],
            "failover": lambda: [failover(args.trajectories, args.concurrency, args.latency, box)],
            "cap": lambda: [cap(32, args.concurrency, args.rps, box)],
            "sandbox_cap": lambda: sandbox_cap(args.sandbox_trajectories, args.concurrency, args.sandbox_rps, box),
        }
        for name, arm in arms.items():
            if args.only in (None, name):
                for result in arm():
                    print(json.dumps(result))
    print(json.dumps({"load": os.getloadavg()}))


if __name__ == "__main__":
    main()
