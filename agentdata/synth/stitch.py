"""The "stitched synthetic" baseline: text solutions turned into tool-use trajectories after the fact.

The findings compare SFT on real trajectories (a model that actually called the code tool
and read the output) with SFT on stitched ones. This module makes the stitched side from
worked text solutions, so the comparison can be run on any data:

1. The solution is cut into steps (lines; display math stays whole).
2. In each step, calculations are found: plain arithmetic chains (`3*4 = 12`), GSM8K
   calculator notes (`<<3*4=12>>`) and LaTeX math with a stated result
   (`$\\frac{3}{4}\\cdot 12 = 9$`, `$\\sum_{k=1}^{10} k = 55$`), parsed to SymPy. Names assigned in
   the text (`a = 3 \\cdot 4 = 12`) become Python variables later steps may use.
3. Each step with calculations becomes: the assistant's text of the step, then a code cell
   that recomputes them, run in a real sandbox session (one per solution, so cells share
   state), and its real output as the tool message.
4. The rest of the text closes the trajectory with `\\boxed{answer}`.

The code is pasted in after the reasoning, never chosen by a model: that is exactly the
"stitched" property the findings warn about.
"""

from __future__ import annotations

import ast
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from agentdata.errors import InputFileError, UserError
from agentdata.records import (
    CODE_TOOL,
    Problem,
    ToolCall,
    Trajectory,
    assistant_message,
    atomic_write,
    records_to_table,
    tool_message,
)

STITCHED_TEACHER = "stitched"
GSM8K_NOTE = re.compile(r"<<([^<>=]+)=([^<>]*)>>")
GSM8K_ANSWER = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)
MATH_SPAN = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.DOTALL)
NUMBER = r"\d+(?:\.\d+)?"
PLAIN_CHAIN = re.compile(
    rf"(?:(?P<name>\b[A-Za-z_]\w*)\s*=\s*)?(?P<expr>[(\-]*\s*{NUMBER}(?:\s*[-+*/×÷^()]+\s*\(*\s*{NUMBER}\s*\)*)+)"
    rf"\s*=\s*(?P<claimed>-?\$?{NUMBER})"
)
# Unevaluated SymPy operations that need .doit() to give a value.
_DEFERRED = ("Sum", "Product", "Integral", "Limit", "Derivative")


@dataclass
class Calculation:
    """One calculation found in the text, as Python that prints its value."""

    expression: str          # Python source of the value
    claimed: str             # what the text says it equals
    name: str | None = None  # the variable the text assigns, if any
    uses_sympy: bool = False
    symbols: tuple[str, ...] = ()  # SymPy symbols the expression needs defined (bound variables of sums)

    def code(self) -> list[str]:
        lines = [f"{symbol} = symbols('{symbol}')" for symbol in self.symbols]
        if self.name:
            return lines + [f"{self.name} = {self.expression}", f"print({self.name})"]
        return lines + [f"print({self.expression})"]


# --------------------------------------------------------------------------- finding calculations

def is_gsm8k_style(solution: str) -> bool:
    """GSM8K solutions use `$` for money, not math, and mark calculations as <<expr=value>>."""
    return bool(GSM8K_NOTE.search(solution) or GSM8K_ANSWER.search(solution))


def split_steps(solution: str) -> list[str]:
    """Lines of the solution, each with its newline; a math span across lines stays in one step."""
    protected = [] if is_gsm8k_style(solution) else [match.span() for match in MATH_SPAN.finditer(solution)]
    steps, start = [], 0
    for match in re.finditer(r"\n", solution):
        if any(low < match.start() < high for low, high in protected):
            continue
        steps.append(solution[start : match.end()])
        start = match.end()
    if start < len(solution):
        steps.append(solution[start:])
    return steps


def find_calculations(step: str, known_names: set[str], latex: bool = True) -> list[Calculation]:
    """Calculations in one step, in text order; `known_names` are variables assigned earlier.

    With GSM8K calculator notes, the notes are the calculations (the prose repeats them);
    `latex=False` reads `$` as money rather than math.
    """
    notes = [(match.start(), plain_calculation(match.group(1), match.group(2))) for match in GSM8K_NOTE.finditer(step)]
    if notes:
        return [calculation for _, calculation in notes if calculation]
    found: list[tuple[int, Calculation]] = []
    prose = step
    if latex:
        for match in MATH_SPAN.finditer(step):
            body = next(group for group in match.groups() if group is not None)
            for calculation in latex_calculations(body, known_names):
                found.append((match.start(), calculation))
                known_names = known_names | ({calculation.name} if calculation.name else set())
        prose = MATH_SPAN.sub(lambda m: " " * len(m.group(0)), step)  # keep offsets, drop math already read
    for match in PLAIN_CHAIN.finditer(prose):
        calculation = plain_calculation(match["expr"], match["claimed"], match["name"])
        if calculation:
            found.append((match.start(), calculation))
    return [calculation for _, calculation in sorted(found, key=lambda item: item[0])]


def plain_calculation(expression: str, claimed: str, name: str | None = None) -> Calculation | None:
    """Arithmetic written as text (`3 × 4`, `2^10`), if it is a real operation on numbers."""
    python = expression.replace("×", "*").replace("÷", "/").replace("^", "**").strip()
    python = re.sub(r"(?<=\d),(?=\d{3}\b)", "", python)  # 1,000 -> 1000
    try:
        tree = ast.parse(python, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    if not isinstance(tree.body, ast.BinOp) or not all(isinstance(node, allowed) for node in ast.walk(tree)):
        return None
    if name is not None and not _usable_name(name):
        name = None
    return Calculation(expression=python, claimed=claimed.strip().lstrip("$"), name=name)


def latex_calculations(math: str, known_names: set[str]) -> list[Calculation]:
    """Calculations in one LaTeX math span: each line `lhs = expr = ... = value` with a stated value."""
    results = []
    for line in re.split(r"\\\\|\n", math):
        line = line.replace("&", " ")
        parts = [part.strip() for part in split_top_level_equals(line)]
        if len(parts) < 2 or not all(parts):
            continue
        calculation = _latex_chain(parts, known_names)
        if calculation:
            results.append(calculation)
            if calculation.name:
                known_names = known_names | {calculation.name}
    return results


def split_top_level_equals(latex: str) -> list[str]:
    """Split `a = b \\approx c` at equals signs outside braces (`\\sum_{k=1}` keeps its `=`)."""
    latex = latex.replace("\\approx", "=")
    parts, depth, start = [], 0, 0
    for index, char in enumerate(latex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "=" and depth == 0 and latex[index - 1 : index] not in ("<", ">", "!", "\\"):
            parts.append(latex[start:index])
            start = index + 1
    return parts + [latex[start:]]


def _latex_chain(parts: list[str], known_names: set[str]) -> Calculation | None:
    name = None
    first = _parse_latex(parts[0])
    if len(parts) >= 3 and first is not None and first.is_Symbol and _usable_name(str(first)):
        name, parts = str(first), parts[1:]
    for part in parts[:-1]:
        expression = _parse_latex(part)
        if expression is None or expression.is_Atom or expression.is_Relational:
            continue
        if not {str(symbol) for symbol in expression.free_symbols} <= known_names:
            continue  # algebra on unknowns, not a calculation
        return _sympy_calculation(expression, parts[-1], name)
    return None


def _parse_latex(text: str) -> Any:
    from latex2sympy2_extended import latex2sympy  # comes with math-verify; slow to import

    try:
        return latex2sympy(text)
    except Exception:  # any LaTeX it cannot read is simply not a calculation
        return None


def _sympy_calculation(expression: Any, claimed: str, name: str | None) -> Calculation | None:
    import sympy

    bound = sorted(str(s) for s in expression.atoms(sympy.Symbol) - expression.free_symbols)
    if not all(_usable_name(symbol) for symbol in bound):
        return None
    # 1/2 in Python is a float: divide by S(2) instead, so a/2 stays exact (a stand-in symbol prints as S(2)).
    exact = expression.replace(lambda e: e.is_Pow and e.exp == -1 and e.base.is_Integer,
                               lambda e: sympy.Pow(sympy.Symbol(f"S({e.base})"), -1, evaluate=False))
    source = _ExactPrinter().doprint(exact)
    if any(expression.has(getattr(sympy, operation)) for operation in _DEFERRED):
        source = f"({source}).doit()"
    return Calculation(expression=source, claimed=claimed, name=name, uses_sympy=True, symbols=tuple(bound))


def _usable_name(name: str) -> bool:
    import keyword

    return name.isidentifier() and not keyword.iskeyword(name) and name not in {"print", "symbols"}


def _printer_class() -> type:
    from sympy.printing.str import StrPrinter

    class ExactPrinter(StrPrinter):
        """SymPy's str form, but fractions stay exact when run as Python (3/4 would be 0.75)."""

        def _print_Rational(self, expr: Any) -> str:
            return f"Rational({expr.p}, {expr.q})"

        def _print_Half(self, expr: Any) -> str:
            return "Rational(1, 2)"

    return ExactPrinter


def _ExactPrinter() -> Any:  # noqa: N802 (reads as the class it builds)
    return _printer_class()()


# --------------------------------------------------------------------------- building trajectories

@dataclass
class StitchConfig:
    protocol: str = field(default="hermes", metadata={"help": "Tool-call protocol whose system prompt is used."})
    max_cells: int = field(default=8, metadata={"help": "Code cells per solution; later steps stay plain text."})
    tool_timeout: float = field(default=10.0, metadata={"help": "Seconds one code cell may run."})
    tool_output_chars: int = field(default=256, metadata={"help": "Tool output kept (head+tail), as collect does."})
    sandbox: str = field(default="local", metadata={"help": "'local' or the URL of `agentdata sandbox serve`."})
    keep_without_calculations: bool = field(
        default=False, metadata={"help": "Keep solutions with no calculation found (as trajectories with no call)."})

    def __post_init__(self) -> None:
        if self.max_cells < 1:
            raise ValueError(f"max_cells must be at least 1, got {self.max_cells}")


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


def stitch_solution(problem: Problem, solution: str, sandbox: Any, config: StitchConfig,
                    sample_index: int = 0) -> Trajectory | None:
    """One stitched trajectory, or None when the solution has no calculation (unless kept)."""
    from agentdata.formats import get_protocol

    steps = plan_steps(solution, config.max_cells)
    if not any(step.calculations for step in steps) and not config.keep_without_calculations:
        return None
    system = get_protocol(config.protocol).system_prompt([CODE_TOOL])
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": problem.question}]
    session_id = f"stitch-{problem.id}-{uuid.uuid4().hex[:8]}"
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


def _run_steps(steps: list[Step], sandbox: Any, session_id: str, config: StitchConfig,
               messages: list[dict[str, Any]], counts: _Counts) -> None:
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


def _to_trajectory(problem: Problem, messages: list[dict[str, Any]], counts: _Counts, config: StitchConfig,
                   sample_index: int) -> Trajectory:
    from agentdata.verify import extract_answer, is_correct

    final = messages[-1]
    if extract_answer(final["content"]) is None or "boxed" not in final["content"]:
        final["content"] = (final["content"] + f"\n\nThe final answer is $\\boxed{{{problem.answer}}}$.").strip()
    return Trajectory(
        id=f"{problem.id}-stitched-{sample_index}", problem_id=problem.id, question=problem.question,
        answer=problem.answer, source=problem.source, domain=problem.domain, messages=messages,
        final_answer=extract_answer(final["content"]), correct=is_correct(final["content"], problem.answer),
        num_tool_calls=counts.calls, num_tool_errors=counts.errors,
        num_turns=sum(m["role"] == "assistant" for m in messages), finish_reason="answer",
        teacher=STITCHED_TEACHER, format=config.protocol,
        metadata={"stitched": True, "calculations": counts.calculations,
                  "calculations_matching_text": counts.matching},
    )


# --------------------------------------------------------------------------- files

SOLUTION_FIELDS = ("solution", "worked_solution", "rationale", "reasoning", "response")


@dataclass
class SolutionRow:
    problem: Problem
    solution: str


def load_solutions(path: str | os.PathLike, question_field: str | None = None, solution_field: str | None = None,
                   answer_field: str | None = None) -> tuple[list[SolutionRow], int]:
    """Rows with a question, a worked solution and an answer; returns them and how many had no answer.

    The answer comes from `answer_field`, else a recognised answer column other than the
    solution's, else the solution itself (its last \\boxed{} or GSM8K's `#### x`). An answer
    column that holds a whole solution (GSM8K's `answer`) gives its final answer the same way.
    """
    from agentdata.problems import ANSWER_FIELDS, columns_of, get_field, load_problems, pick_column, read_rows

    path = Path(path)
    rows = list(read_rows(path))
    if not rows:
        raise InputFileError(path, "no rows: the file is empty")
    present = columns_of(rows)
    solution_key = pick_column(path, present, solution_field, SOLUTION_FIELDS, "solution", "--solution-field")
    if answer_field:
        pick_column(path, present, answer_field, ANSWER_FIELDS, "answer", "--answer-field")
    answer_key = answer_field or next((name for name in ANSWER_FIELDS if name != solution_key and name in present), None)
    for number, row in enumerate(rows, start=1):
        solution = get_field(row, solution_key)
        if not isinstance(solution, str) or not solution.strip():
            raise InputFileError(path, f"empty or missing solution in column {solution_key!r}", row=number)
    # The loader reads questions, ids and sources; answers may be missing here, so they are read below.
    problems = load_problems(path, question_field, answer_field=solution_key)
    loaded, no_answer = [], 0
    for row, problem in zip(rows, problems):
        solution = get_field(row, solution_key)
        raw_answer = get_field(row, answer_key) if answer_key else None
        answer = _final_answer("" if raw_answer is None else str(raw_answer), solution)
        if answer is None:
            no_answer += 1
            continue
        problem.answer = answer
        loaded.append(SolutionRow(problem, solution))
    return loaded, no_answer


def _final_answer(raw: str, solution: str) -> str | None:
    raw = raw.strip()
    if raw and (raw == solution.strip() or "\\boxed" in raw or GSM8K_ANSWER.search(raw)):
        return solution_answer(raw)
    return raw or solution_answer(solution)


def write_sft(trajectories: list[Trajectory], out: str | os.PathLike) -> Path:
    """The SFT set in curate's schema: `messages`, `tools` (JSON string) and the same provenance columns.

    Written through polars as curate writes it, so even the Arrow types (large strings) match and
    the two sets load together.
    """
    import polars as pl

    from agentdata.curate.sft import SFT_COLUMNS

    frame = pl.from_arrow(records_to_table(trajectories, Trajectory).select(list(SFT_COLUMNS)))
    return atomic_write(out, lambda tmp: frame.write_parquet(tmp))


@dataclass
class StitchSummary:
    rows: int
    written: int
    dropped: dict[str, int]
    tool_calls: int
    tool_errors: int
    calculations: int
    calculations_matching_text: int
    correct: int
    output: Path
    trajectories_dir: Path | None = None

    def table(self) -> Table:
        table = Table(title=f"synth stitch · {self.output}")
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_row("solutions read", str(self.rows))
        table.add_row("stitched trajectories written", str(self.written))
        for reason, count in self.dropped.items():
            table.add_row(f"dropped_{reason}", str(count))
        table.add_row("code cells (tool calls)", f"{self.tool_calls} ({self.tool_calls / max(self.written, 1):.2f} per solution)")
        table.add_row("cells that failed", str(self.tool_errors))
        table.add_row("calculations whose real output matched the text",
                      f"{self.calculations_matching_text} / {self.calculations}")
        table.add_row("final answer equals the gold", f"{self.correct} / {self.written}")
        if self.trajectories_dir:
            table.add_row("trajectories (for `agentdata curate`)", str(self.trajectories_dir))
        return table


def stitch_file(path: str | os.PathLike, out: str | os.PathLike, config: StitchConfig | None = None, *,
                question_field: str | None = None, solution_field: str | None = None,
                answer_field: str | None = None, trajectories_dir: str | os.PathLike | None = None,
                sandbox: Any = None, show_progress: bool = True) -> StitchSummary:
    """Stitch every solution in `path` into an SFT set at `out` (and a trajectory run dir if asked)."""
    config = config or StitchConfig()
    if trajectories_dir is not None and any(Path(trajectories_dir).glob("trajectories/*.parquet")):
        raise UserError(f"{trajectories_dir} already holds trajectories; give --trajectories a new folder")
    rows, no_answer = load_solutions(path, question_field, solution_field, answer_field)
    owns_sandbox = sandbox is None
    if owns_sandbox:
        from agentdata.sandbox import open_sandbox

        sandbox = open_sandbox(config.sandbox)
    try:
        trajectories, no_calculation = _stitch_rows(rows, sandbox, config, show_progress)
    finally:
        if owns_sandbox:
            sandbox.close()
    if not trajectories:
        raise UserError(f"{path}: no solution had a calculation to cut into code ({no_calculation} without one, "
                        f"{no_answer} without an answer)")
    write_sft(trajectories, out)
    if trajectories_dir is not None:
        from agentdata.synth.rundir import RunDir

        run = RunDir(trajectories_dir)
        run.prepare({"teacher": STITCHED_TEACHER, "protocol": config.protocol, "source_file": str(path)}, {})
        run.write_shard(trajectories)
    return StitchSummary(
        rows=len(rows) + no_answer, written=len(trajectories),
        dropped={"no_answer": no_answer, "no_calculation": no_calculation},
        tool_calls=sum(t.num_tool_calls for t in trajectories), tool_errors=sum(t.num_tool_errors for t in trajectories),
        calculations=sum(t.metadata["calculations"] for t in trajectories),
        calculations_matching_text=sum(t.metadata["calculations_matching_text"] for t in trajectories),
        correct=sum(t.correct for t in trajectories), output=Path(out),
        trajectories_dir=Path(trajectories_dir) if trajectories_dir is not None else None,
    )


def _stitch_rows(rows: list[SolutionRow], sandbox: Any, config: StitchConfig,
                 show_progress: bool) -> tuple[list[Trajectory], int]:
    trajectories, no_calculation = [], 0
    with Progress(TextColumn("[bold]stitch"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), disable=not show_progress) as progress:
        task = progress.add_task("stitch", total=len(rows))
        for row in rows:
            trajectory = stitch_solution(row.problem, row.solution, sandbox, config)
            if trajectory is None:
                no_calculation += 1
            else:
                trajectories.append(trajectory)
            progress.advance(task)
    return trajectories, no_calculation
