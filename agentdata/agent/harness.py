"""`collect --harness 'COMMAND ...'`: an agent harness as the teacher, one run of COMMAND per problem.

Each run gets a fresh session of the recording gateway (agentdata/gateway/) in front of the teacher engine:
its base URL as OPENAI_BASE_URL (and OPENAI_API_KEY set), the question on stdin, in AGENTDATA_QUESTION and
in place of `{question}` in COMMAND's arguments. The command runs in a process group of its own, so a run
past harness_timeout is killed whole. What the gateway recorded becomes the trajectory
(agent/harness_record.py), graded with the same `grade()` as the agent loop's; a run that exited non-zero
or was killed is an error, never trusted, and one that failed before its model answered once (the harness
could not start, a missing library) is tried again up to harness_retries times.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentdata.agent.config import CollectConfig
from agentdata.agent.harness_record import answer_text, conversation, exchange_log, teacher, token_counts, tool_schemas
from agentdata.errors import UserError
from agentdata.gateway import Gateway, Session
from agentdata.records import Problem, Trajectory
from agentdata.verify.grade import GRADED_TEXT_KEY, grade, quick_grade

OUTPUT_KEPT_CHARS = 4000  # the tail of a run's stdout and stderr kept on its trajectory
API_KEY = "agentdata"  # any key: the gateway checks none, but clients refuse to start without one
QUESTION_FIELD = "{question}"

Solver = Callable[[Problem, int, int], Awaitable[Trajectory]]


def harness_argv(command: str) -> list[str]:
    """COMMAND split as a shell would split it (no shell runs it: `{question}` is one argument, never code)."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise UserError(f"--harness {command!r}: {error}") from None
    if not argv:
        raise UserError("--harness: give the command to run, e.g. --harness 'python my_agent.py'")
    return argv


@dataclass
class HarnessRun:
    """One run of the command: how it ended and what it printed."""

    exit_code: int | None  # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


async def run_harness(argv: list[str], question: str, env: dict[str, str], timeout_s: float) -> HarnessRun:
    """Run `argv` with the question on stdin in its own process group; past `timeout_s` (or when the run is
    cancelled) the whole group is killed, so no child of the harness outlives its run."""
    started = time.perf_counter()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        return HarnessRun(127, "", f"cannot start {argv[0]!r}: {error.strerror or error}", 0.0)
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(question.encode()), timeout_s)
        exit_code: int | None = process.returncode
    except TimeoutError:
        stdout, stderr, exit_code = b"", f"killed after {timeout_s:g} s".encode(), None
    finally:
        _kill_group(process.pid)  # what the harness started and left behind goes with it
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    text = [part.decode("utf-8", "replace") for part in (stdout, stderr)]
    return HarnessRun(exit_code, text[0], text[1], time.perf_counter() - started)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def harness_env(base_url: str, problem: Problem, seed: int, sandbox_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AGENTDATA_SEED=str(seed),  # the trajectory's own seed, for a harness that samples with one
        OPENAI_BASE_URL=base_url,
        OPENAI_API_BASE=base_url,  # older clients' name for it
        OPENAI_API_KEY=API_KEY,
        AGENTDATA_QUESTION=problem.question,
        AGENTDATA_PROBLEM_ID=problem.id,
        AGENTDATA_MODEL="agentdata",
    )
    if sandbox_url:  # a harness can run its code in the same sandbox service the run uses
        env["AGENTDATA_SANDBOX_URL"] = sandbox_url
    return env


class HarnessSolver:
    """Solves one problem by running the harness against a gateway session; what `collect` calls per
    trajectory in place of the agent loop's `solve`."""

    def __init__(self, command: str, gateway: Gateway, sandbox: Any, config: CollectConfig):
        self.argv = harness_argv(command)
        self.command, self.gateway, self.sandbox, self.config = command, gateway, sandbox, config
        urls = [url for url in str(config.loop.sandbox).split(",") if url.startswith(("http://", "https://"))]
        self.sandbox_url = urls[0] if urls else None

    async def __call__(self, problem: Problem, index: int, seed: int) -> Trajectory:
        attempts = []
        for _ in range(self.config.harness_retries + 1):
            session, run = await self._attempt(problem, seed)
            attempts.append(run)
            if run.ok or session.answered():  # a run the model took part in is never run again here
                break
        return await self._trajectory(problem, index, seed, session, run, len(attempts))

    async def _attempt(self, problem: Problem, seed: int) -> tuple[Session, HarnessRun]:
        session = self.gateway.open(problem.id)
        argv = [arg.replace(QUESTION_FIELD, problem.question) for arg in self.argv]
        env = harness_env(self.gateway.url(session), problem, seed, self.sandbox_url)
        try:
            run = await run_harness(argv, problem.question, env, self.config.harness_timeout)
        finally:
            self.gateway.close(session)  # a request still in flight from a killed run records nothing more
        return session, run

    async def _trajectory(
        self, problem: Problem, index: int, seed: int, session: Session, run: HarnessRun, attempts: int
    ) -> Trajectory:
        messages = conversation(session) or [{"role": "user", "content": problem.question}]
        prompt_tokens, completion_tokens = token_counts(session)
        error = None if run.ok else _failure(run, session)
        verdict, text = None, None
        if error is None:
            text = answer_text(run.stdout, messages, problem.domain)
            verdict = quick_grade(problem, text) or await asyncio.to_thread(grade, problem, text, self.sandbox)
        calls = sum(len(message.get("tool_calls") or []) for message in messages)
        return Trajectory.of_problem(
            problem,
            f"{problem.id}-{index}",
            messages=messages,
            tools=tool_schemas(session),
            final_answer=verdict.final_answer if verdict else None,
            correct=bool(verdict and verdict.correct),
            num_tool_calls=calls,
            num_turns=len(session.answered()),
            finish_reason="answer" if error is None else "error",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            teacher=teacher(session, self.gateway.engine.spec),  # the model that really answered
            format="native",  # canonical messages, calls as the model made them: the chat template renders them
            sampling={"seed": seed, "sample_index": index},
            timings={"total_s": round(run.seconds, 4)},
            error=error,
            metadata={
                "harness": {
                    "command": self.command,
                    "exit_code": run.exit_code,
                    "attempts": attempts,
                    "stdout_tail": run.stdout[-OUTPUT_KEPT_CHARS:],
                    "stderr_tail": run.stderr[-OUTPUT_KEPT_CHARS:],
                },
                "gateway": exchange_log(session, messages),
                **({GRADED_TEXT_KEY: text} if text is not None else {}),  # regrade grades what was graded
            },
        )


def _failure(run: HarnessRun, session: Session) -> str:
    last_line = next((line for line in reversed(run.stderr.splitlines()) if line.strip()), "")
    ended = f"killed by signal {-run.exit_code}" if run.exit_code is not None and run.exit_code < 0 else None
    ended = ended or f"exited with {run.exit_code}"
    if run.exit_code is None:
        how = f"harness killed at its time limit after {len(session.answered())} model answer(s)"
    elif not session.answered():
        how = f"harness {ended} before its model answered (infrastructure)"
    else:
        how = f"harness {ended} after {len(session.answered())} model answer(s)"
    return f"{how}: {last_line[-300:]}" if last_line else how


@contextlib.asynccontextmanager
async def harness_solver(engine: Any, sandbox: Any, config: CollectConfig) -> AsyncIterator[Solver]:
    """A gateway in front of `engine` for the length of the run, and the solver that uses it."""
    solver = HarnessSolver(config.harness, Gateway(engine), sandbox, config)  # a bad command: refused first
    async with solver.gateway:
        yield solver
