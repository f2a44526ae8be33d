"""`collect` in a subprocess with a scripted engine and sandbox: the signal and kill -9 tests drive it.

    python tests/collect_driver.py OUT N_PROBLEMS

Environment:
    DRIVER_PHASE   generation | tool | shard: block there once (problem p4's generation or tool
                   call, or the second shard write) after writing the file DRIVER_MARK
    DRIVER_LOG     append "<unix time> <problem id>" when a final answer is generated
    DRIVER_DELAY   seconds per generation (default 0)
    DRIVER_CONCURRENCY, DRIVER_SHARD_SIZE
Exits 130 on SIGINT or SIGTERM, as the CLI does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq  # noqa: E402

from agentdata.agent.config import CollectConfig  # noqa: E402
from agentdata.agent.runner import collect  # noqa: E402
from agentdata.records import Problem  # noqa: E402
from tests.fakes import InProcessSandbox, ScriptedEngine  # noqa: E402

PHASE = os.environ.get("DRIVER_PHASE", "")
BLOCKED_PROBLEM = "p4"
BLOCK_S = 60.0


def mark() -> None:
    Path(os.environ["DRIVER_MARK"]).write_text(PHASE)


def driver_problems(count: int) -> list[Problem]:
    return [Problem(f"What is 6 times 7? ({i})", "42", id=f"p{i}") for i in range(count)]


class DriverEngine(ScriptedEngine):
    async def generate(self, request):
        question = request.messages[1]["content"]
        first_turn = len(request.messages) == 2  # system + question
        if PHASE == "generation" and f"({BLOCKED_PROBLEM[1:]})" in question and first_turn:
            mark()
            await asyncio.sleep(BLOCK_S)
        generation = await super().generate(request)
        if "boxed" in generation.text and os.environ.get("DRIVER_LOG"):
            with open(os.environ["DRIVER_LOG"], "a") as log:
                log.write(f"{time.time()} p{question.split('(')[-1].rstrip(')')}\n")
        return generation


class DriverSandbox(InProcessSandbox):
    async def arun(self, code, session_id=None, timeout=10.0):
        if PHASE == "tool" and session_id.startswith(f"{BLOCKED_PROBLEM}-"):
            mark()
            await asyncio.sleep(BLOCK_S)
        return self.run(code, session_id, timeout)


def slow_second_shard_write() -> None:
    """The second Parquet write (a shard) takes 2 s, inside the temporary file: a signal lands mid-write."""
    original, calls = pq.write_table, []

    def write_table(table, where, *args, **kwargs):
        calls.append(where)
        if len(calls) == 2:
            mark()
            time.sleep(2.0)
        return original(table, where, *args, **kwargs)

    pq.write_table = write_table


def main() -> None:
    out, count = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as agentdata.cli.app.main does
    # Ctrl-C as in a run started from a terminal: a test suite started in the background (`cmd &` in a
    # script, as CI may be) has SIGINT ignored, and this process would inherit that and never stop.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if PHASE == "shard":
        slow_second_shard_write()
    config = CollectConfig(
        model="scripted",
        concurrency=int(os.environ.get("DRIVER_CONCURRENCY", "1")),
        shard_size=int(os.environ.get("DRIVER_SHARD_SIZE", "3")),
    )
    engine = DriverEngine(delay_s=float(os.environ.get("DRIVER_DELAY", "0")))
    try:
        collect(driver_problems(count), out, config, engine=engine, sandbox=DriverSandbox())
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
