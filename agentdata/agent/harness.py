"""`collect --harness 'COMMAND ...'`: an agent harness as the teacher, one run of COMMAND per problem.

Each run gets a fresh session of the recording gateway (agentdata/gateway/) in front of the teacher engine:
its base URL as OPENAI_BASE_URL (and OPENAI_API_KEY set), the question on stdin, in the file
AGENTDATA_QUESTION_FILE names, in AGENTDATA_QUESTION (up to 64 KiB) and in place of `{question}` in COMMAND's
arguments. The gateway fills what the harness's requests leave unset from the run's sampling (temperature,
top_p, the seed; max_new_tokens caps each request) and the trajectory's `sampling` records what was used.
The command runs in a process group of its own, so a run past harness_timeout is killed whole. What the
gateway recorded becomes the trajectory (agent/harness_record.py), graded with the same `grade()` as the
agent loop's; a run that exited non-zero or was killed is an error, never trusted, and so is one whose
model never answered (its output is not the model's work); one that failed before its model answered once
(the harness could not start, a missing library) is tried again up to harness_retries times.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agentdata import processes
from agentdata.agent.config import CollectConfig
from agentdata.agent.harness_command import harness_argv
from agentdata.agent.harness_record import answer_text, conversation, exchange_log, teacher, token_counts, tool_schemas
from agentdata.engines.base import Sampling
from agentdata.gateway import Gateway, Session
from agentdata.records import Problem, Trajectory
from agentdata.verify.grade import GRADED_TEXT_KEY, grade, quick_grade

OUTPUT_KEPT_CHARS = 4000  # the tail of a run's stdout and stderr kept on its trajectory
API_KEY = "agentdata"  # any key: the gateway checks none, but clients refuse to start without one
QUESTION_FIELD = "{question}"
TOO_LONG_EXIT = 126  # as a shell answers a command it cannot run
TOO_LONG = (
    "the question ({size:,} bytes) is too long for a command's argument (Linux takes 128 KiB): read it from stdin "
    "or the file $AGENTDATA_QUESTION_FILE names instead of {{question}}"
)
NEVER_ASKED = (
    "the harness exited 0 without its model answering once through the gateway (does it send its requests to "
    "$OPENAI_BASE_URL?): what it printed is not the model's work, so it is not graded"
)

Solver = Callable[[Problem, int, int], Awaitable[Trajectory]]


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
    """Run `argv` with the question on stdin in a session of its own (agentdata/processes.py); past `timeout_s`
    (or when the run is cancelled) the whole session is killed, so no child of the harness outlives its run."""
    started = time.perf_counter()
    try:
        process = await processes.open_process(
            argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
    except OSError as error:
        return HarnessRun(127, "", f"cannot start {argv[0]!r}: {error.strerror or error}", 0.0)
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(question.encode()), timeout_s)
        exit_code: int | None = process.returncode
    except TimeoutError:
        stdout, stderr, exit_code = b"", f"killed after {timeout_s:g} s".encode(), None
    finally:
        processes.kill(process.pid)  # what the harness started and left behind goes with it
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    text = [part.decode("utf-8", "replace") for part in (stdout, stderr)]
    return HarnessRun(exit_code, text[0], text[1], time.perf_counter() - started)


# Linux refuses one environment string or argument over 128 KiB (MAX_ARG_STRLEN) and starts nothing: a longer
# question is left out of AGENTDATA_QUESTION (stdin and AGENTDATA_QUESTION_FILE still hold it) and cannot
# stand in for {question}. Half of it, so the rest of the environment has room too.
MAX_QUESTION_ENV_BYTES = 64 * 1024


def harness_env(
    base_url: str, problem: Problem, seed: int, sandbox_url: str | None, question_file: str | None = None
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AGENTDATA_SEED=str(seed),  # the trajectory's own seed, for a harness that samples with one
        OPENAI_BASE_URL=base_url,
        OPENAI_API_BASE=base_url,  # older clients' name for it
        OPENAI_API_KEY=API_KEY,
        AGENTDATA_PROBLEM_ID=problem.id,
        AGENTDATA_MODEL="agentdata",
    )
    env.pop("AGENTDATA_QUESTION", None)  # one in agentdata's own environment is never passed on as the question
    if len(problem.question.encode()) <= MAX_QUESTION_ENV_BYTES:
        env["AGENTDATA_QUESTION"] = problem.question
    if question_file:  # every question, whatever its length
        env["AGENTDATA_QUESTION_FILE"] = question_file
    if sandbox_url:  # a harness can run its code in the same sandbox service the run uses
        env["AGENTDATA_SANDBOX_URL"] = sandbox_url
    return env


def question_argv(argv: list[str], question: str) -> list[str] | None:
    """The command with `{question}` filled in; None when an argument would be longer than Linux takes."""
    filled = [arg.replace(QUESTION_FIELD, question) for arg in argv]
    if any(len(arg.encode()) > MAX_QUESTION_ENV_BYTES for arg, given in zip(filled, argv) if arg != given):
        return None
    return filled


@contextlib.contextmanager
def question_file(question: str) -> Iterator[str]:
    """The question in a file of its own for the length of one run (AGENTDATA_QUESTION_FILE)."""
    handle, path = tempfile.mkstemp(prefix="agentdata-question-", suffix=".txt")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(question)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


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
        session = self.gateway.open(problem.id, self.config.loop.rollout_sampling(seed))
        argv = question_argv(self.argv, problem.question)
        if argv is None:
            self.gateway.close(session)
            return session, HarnessRun(TOO_LONG_EXIT, "", TOO_LONG.format(size=len(problem.question.encode())), 0.0)
        try:
            with question_file(problem.question) as path:
                env = harness_env(self.gateway.url(session), problem, seed, self.sandbox_url, path)
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
        if error is None and not session.answered():  # its output is its own, not the model's: nothing to learn
            error = NEVER_ASKED
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
            sampling={**used_sampling(session, self.config.loop.rollout_sampling(seed)), "sample_index": index},
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


def used_sampling(session: Session, run: Sampling) -> dict[str, Any]:
    """How the trajectory was sampled: each field as its requests were answered (one value, or each request's
    when they differ), the run's where no request was answered; `set_by_harness` names the fields a request
    set away from the run's, so a reader knows the run's settings were not what made those turns."""
    record, used = run.as_dict(), [exchange.used for exchange in session.answered() if exchange.used]
    set_by_harness = []
    for name, run_value in run.as_dict().items():
        values = [request[name] for request in used]
        distinct = [value for index, value in enumerate(values) if value not in values[:index]]
        if distinct:
            record[name] = distinct[0] if len(distinct) == 1 else values
        if any(value != run_value for value in distinct):
            set_by_harness.append(name)
    return {**record, "set_by_harness": set_by_harness}


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
