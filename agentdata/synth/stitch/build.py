"""One stitched trajectory: a solution's steps, their code cells run in a real sandbox session, the real outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.formats.forms import SFT_TARGETS
from agentdata.pacing import check_sandbox_max_rps, sandbox_max_rps_field
from agentdata.records import CODE_TOOL, Problem, ToolCall, Trajectory, assistant_message, tool_message
from agentdata.sandbox.base import new_session_id
from agentdata.settings import check_fields
from agentdata.synth.stitch.calculations import (
    GSM8K_ANSWER,
    GSM8K_NOTE,
    STITCHED_TEACHER,
    Calculation,
    find_calculations,
    is_gsm8k_style,
    split_steps,
)


@dataclass
class StitchConfig:
    protocol: str = field(
        default=DEFAULT_PROTOCOL,
        metadata={"help": "Tool-call protocol whose system prompt is used: codeblock or hermes."},
    )
    max_cells: int = field(
        default=8, metadata={"help": "Code cells per solution; later steps stay plain text.", "range": "[1, 1000]"}
    )
    tool_timeout: float = field(
        default=10.0, metadata={"help": "Seconds one code cell may run.", "range": "(0, 86400]"}
    )
    tool_output_chars: int = field(
        default=256, metadata={"help": "Tool output kept (head+tail), as collect does.", "range": "[1, inf)"}
    )
    sandbox: str = field(
        default="local",
        metadata={"help": "'local', or URLs (comma separated) of `agentdata sandbox serve` or SandboxFusion."},
    )
    sandbox_max_rps: float | None = sandbox_max_rps_field()
    keep_without_calculations: bool = field(
        default=False, metadata={"help": "Keep solutions with no calculation found (as trajectories with no call)."}
    )
    target: str = field(
        default="canonical",
        metadata={
            "help": "The form to write, as curate's --for: canonical (what `train` reads), trl or verl (Parquet "
            "their SFT loaders read; hf names the same file), openai (OpenAI fine-tuning JSONL).",
            "flag": "--for",
            "choices": SFT_TARGETS,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_sandbox_max_rps(self.sandbox, self.sandbox_max_rps)


def prose_of(step: str) -> str:
    """The step as the assistant says it: GSM8K calculator notes removed, `#### x` made a boxed answer."""
    text = GSM8K_NOTE.sub("", step)
    return GSM8K_ANSWER.sub(lambda m: f"The final answer is $\\boxed{{{m.group(1)}}}$.", text)


def solution_answer(solution: str) -> str | None:
    """The answer a solution states: its last \\boxed{}, or GSM8K's `#### x`."""
    from agentdata.verify import last_boxed

    boxed = last_boxed(solution)
    if boxed:
        return boxed
    marked = GSM8K_ANSWER.findall(solution)
    return marked[-1].strip() if marked else None


def stitch_solution(
    problem: Problem, solution: str, sandbox: Any, config: StitchConfig, sample_index: int = 0
) -> Trajectory | None:
    """One stitched trajectory, or None when the solution has no calculation (unless kept)."""
    from agentdata.formats import get_protocol

    steps = plan_steps(solution, config.max_cells)
    if not any(step.calculations for step in steps) and not config.keep_without_calculations:
        return None
    system = get_protocol(config.protocol).system_prompt([CODE_TOOL])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": problem.question},
    ]
    session_id = new_session_id(f"stitch-{problem.id}")
    counts = _Counts()
    try:
        _run_steps(steps, sandbox, session_id, config, messages, counts)
    finally:
        _close(sandbox, session_id)
    return _to_trajectory(problem, messages, counts, config, sample_index)


@dataclass
class Step:
    """A step's prose as the assistant says it, and the calculations run right after it."""

    prose: str
    calculations: list[Calculation] = field(default_factory=list)
    imports_sympy: bool = False

    def source(self) -> str:
        lines = ["from sympy import *"] if self.imports_sympy else []
        return "\n".join(lines + [line for calculation in self.calculations for line in calculation.code()])


def plan_steps(solution: str, max_cells: int) -> list[Step]:
    """The solution as steps; at most `max_cells` of them get a code cell."""
    latex = not is_gsm8k_style(solution)
    known: set[str] = set()
    steps: list[Step] = []
    for text in split_steps(solution):
        cells_so_far = sum(bool(step.calculations) for step in steps)
        calculations = find_calculations(text, known, latex) if cells_so_far < max_cells else []
        known |= {c.name for c in calculations if c.name}
        steps.append(Step(prose_of(text), calculations))
    with_code = [step for step in steps if step.calculations]
    # Imported once, in the first cell: a later import would overwrite names the text assigned (N, E, S ...).
    if any(c.uses_sympy for step in with_code for c in step.calculations):
        with_code[0].imports_sympy = True
    return steps


@dataclass
class _Counts:
    calls: int = 0
    errors: int = 0
    calculations: int = 0
    matching: int = 0


def _run_steps(
    steps: list[Step],
    sandbox: Any,
    session_id: str,
    config: StitchConfig,
    messages: list[dict[str, Any]],
    counts: _Counts,
) -> None:
    from agentdata.formats import tool_output_text

    pending = ""
    for step in steps:
        pending += step.prose
        if not step.calculations:
            continue
        call = ToolCall(code=step.source(), id=f"call_{counts.calls}")
        result = sandbox.run(call.code, session_id=session_id, timeout=config.tool_timeout)
        counts.calls += 1
        counts.errors += result.status != "ok"
        counts.calculations += len(step.calculations)
        counts.matching += _matching(result.stdout, step.calculations)
        messages.append(assistant_message(pending.strip(), [call]))
        shown = tool_output_text(result.stdout, result.stderr, result.status, config.tool_output_chars)
        messages.append(tool_message(call.id, shown))
        pending = ""
    messages.append(assistant_message(pending.strip()))


def _matching(stdout: str, calculations: list[Calculation]) -> int:
    """How many printed values agree with what the text claimed (a check on the cutting, kept as metadata)."""
    from agentdata.verify import answers_match

    printed = stdout.strip().splitlines()
    return sum(answers_match(value, c.claimed, timeout_s=2.0) for value, c in zip(printed, calculations))


def _close(sandbox: Any, session_id: str) -> None:
    try:
        sandbox.close_session(session_id)
    except Exception:  # a session that never started: nothing to free
        pass


def _to_trajectory(
    problem: Problem, messages: list[dict[str, Any]], counts: _Counts, config: StitchConfig, sample_index: int
) -> Trajectory:
    from agentdata.verify import extract_answer, is_correct

    final = messages[-1]
    if extract_answer(final["content"]) is None or "boxed" not in final["content"]:
        final["content"] = (final["content"] + f"\n\nThe final answer is $\\boxed{{{problem.answer}}}$.").strip()
    return Trajectory.of_problem(
        problem,
        f"{problem.id}-stitched-{sample_index}",
        messages=messages,
        final_answer=extract_answer(final["content"]),
        correct=is_correct(final["content"], problem.answer),
        num_tool_calls=counts.calls,
        num_tool_errors=counts.errors,
        num_turns=sum(m["role"] == "assistant" for m in messages),
        finish_reason="answer",
        teacher=STITCHED_TEACHER,
        format=config.protocol,
        metadata={"stitched": True, "calculations": counts.calculations, "calculations_matching_text": counts.matching},
    )
