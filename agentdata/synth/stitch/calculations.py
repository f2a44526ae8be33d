"""Finding the calculations in a worked text solution and writing them as exact code."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

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

    expression: str  # Python source of the value
    claimed: str  # what the text says it equals
    name: str | None = None  # the variable the text assigns, if any
    uses_sympy: bool = False
    symbols: tuple[str, ...] = ()  # SymPy symbols the expression needs defined (bound variables of sums)

    def code(self) -> list[str]:
        lines = [f"{symbol} = symbols('{symbol}')" for symbol in self.symbols]
        if self.name:
            return lines + [f"{self.name} = {self.expression}", f"print({self.name})"]
        return lines + [f"print({self.expression})"]


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
    exact = expression.replace(
        lambda e: e.is_Pow and e.exp == -1 and e.base.is_Integer,
        lambda e: sympy.Pow(sympy.Symbol(f"S({e.base})"), -1, evaluate=False),
    )
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
