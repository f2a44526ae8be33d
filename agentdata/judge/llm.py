"""The LLM judge: a rubric, the request that shows a model one trajectory, and a tolerant reading of its verdict.

The judge reads the question and the transcript (judge.transcript) and answers with a rationale
and a score from 0 to 10 on a last line `Score: N`. Models write verdicts many ways, so
`parse_verdict` takes a JSON object (`{"score": 7, "rationale": "..."}`, fenced or not), `Score: 7`,
`**Score:** 7/10`, `Rating: 3 out of 5`, `score = 0.7`, or a last `N/10`; the score is
normalised to [0, 1]. A reply with no readable score is a failure (tried again, then counted
apart), never a low score: nor is one whose labelled score is out of range or withheld
(`Score: 15`, `Score: N/A`, `{"score": false}`: no bare `N/10` elsewhere in it stands in), one
whose JSON verdict is cut short (`{"score": 1` may have been 10), or a number that is only the
start of one (`Score: 1e3`, `Score: 1,000`) or a range (`score 0-10`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from agentdata.errors import InputFileError
from agentdata.inputs import read_text

PROMPT_VERSION = 1  # a change to the prompt below is a new judge: its verdicts are not reused
SCALE = 10
BUILT_IN_RUBRIC = """\
Grade the solution on four criteria:
1. Sound reasoning: every step follows from the question, the earlier steps and the tool outputs; \
no unjustified leap.
2. Needed calls: every tool call serves the solution; no redundant, repeated or aimless call.
3. Truthful use of tool output: every value taken from a tool output is what the tool really printed; \
no invented or misread output.
4. Supported answer: the final answer follows from the work shown."""
OUTPUT_FORMAT = (
    "First explain your grade in a few sentences. Then end with one line of the form `Score: N`, where N is "
    f"an integer from 0 (fails every criterion) to {SCALE} (meets every criterion fully)."
)
SYSTEM = (
    "You are a strict grader of solutions written by an assistant that could run Python code. Each tool "
    "output shown is what the code really printed."
)

_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
# A whole number: never the start of a longer one (1e3, 1,000, 7.5.1) nor one end of a range (0-10, 1 to 10)
_NUMBER = r"(?<![\d.,])([+-]?\d+(?:\.\d+)?)(?![.,]?\d|[eE][+-]?\d|\s*(?:-|\u2013|to)\s*\d)"
_OUT_OF = r"\s*(?:/|out\s+of)\s*"
# "Score: 7", "**Rating**: 3 out of 5": the separator may not eat a minus sign ("Score: -1" is no score)
_LABELLED = re.compile(rf"(?:score|rating|grade)[^\w+\-]{{0,6}}{_NUMBER}(?:{_OUT_OF}{_NUMBER})?", re.IGNORECASE)
_FRACTION = re.compile(rf"{_NUMBER}{_OUT_OF}{_NUMBER}", re.IGNORECASE)
# "Score: N/A", "Rating: none": a label the judge gave no number
_WITHHELD = re.compile(r"(?:score|rating|grade)\W{0,6}(?:n/?a|none|null|unknown)(?!\w)", re.IGNORECASE)
_SCORE_KEY = re.compile(r'"(?:score|rating|grade)"', re.IGNORECASE)
MAX_RATIONALE_CHARS = 4000


@dataclass
class Verdict:
    score: float  # in [0, 1]
    rationale: str


MAX_RUBRIC_BYTES = 2**20  # a rubric is a page or two of text


def load_rubric(path: str | None) -> str:
    """The user's rubric file, or the built-in one."""
    if not path:
        return BUILT_IN_RUBRIC
    file = Path(path).expanduser()
    if not file.exists() and not file.is_symlink():
        raise InputFileError(file, "no such rubric file")
    text = read_text(file, MAX_RUBRIC_BYTES)  # UTF-8; a FIFO, a device or a huge file is refused, never waited on
    if not text.strip():
        raise InputFileError(file, "the rubric is empty")
    return text.strip()


def judge_messages(question: str, transcript: str, rubric: str) -> list[dict[str, str]]:
    """The chat request: the grader's role, the rubric and the output format, then the trajectory."""
    user = f"{rubric}\n\n{OUTPUT_FORMAT}\n\n## Question\n{question.strip()}\n\n## Solution\n{transcript}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


class _NoScore(Exception):
    """The reply names a score the judge did not really give: the verdict is unreadable, whatever else it holds."""


def parse_verdict(text: str) -> Verdict | None:
    """The score (normalised to [0, 1]) and rationale in a judge's reply; None when it holds no readable score."""
    if not text or not text.strip():
        return None
    try:
        if _cut_json(text):
            return None
        found = _from_json(text) or _from_labelled(text) or _from_fraction(text)
    except _NoScore:
        return None
    if found is None:
        return None
    score, rationale = found
    return Verdict(score, rationale.strip()[:MAX_RATIONALE_CHARS])


def _cut_json(text: str) -> bool:
    """A JSON object opened and never closed, holding a score key: the reply was cut inside its verdict."""
    unclosed: list[int] = []
    for index, char in enumerate(text):
        if char == "{":
            unclosed.append(index)
        elif char == "}" and unclosed:
            unclosed.pop()
    return bool(unclosed) and _SCORE_KEY.search(text, unclosed[0]) is not None


def _from_json(text: str) -> tuple[float, str] | None:
    """The last JSON object with a score key; one whose score is unreadable is no verdict (_NoScore)."""
    for match in reversed(list(_JSON_OBJECT.finditer(text))):
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        key = next((key for key in ("score", "rating", "grade") if key in data), None)
        if key is None:
            continue
        score = _normalised(data[key], data.get("max") or data.get("scale"))
        if score is None:
            raise _NoScore
        rationale = next((str(data[key]) for key in ("rationale", "reason", "explanation") if key in data), None)
        return score, rationale if rationale is not None else text[: match.start()]
    return None


def _from_labelled(text: str) -> tuple[float, str] | None:
    """The last `Score: N`; one out of range, or a later `Score: N/A`, is no verdict (_NoScore)."""
    matches = list(_LABELLED.finditer(text))
    withheld = list(_WITHHELD.finditer(text))
    if withheld and (not matches or withheld[-1].start() > matches[-1].start()):
        raise _NoScore
    if not matches:
        return None
    last = matches[-1]
    score = _normalised(last.group(1), last.group(2))
    if score is None:
        raise _NoScore
    return score, text[: last.start()]


def _from_fraction(text: str) -> tuple[float, str] | None:
    """A last bare `N/10` or `N out of 10`, when nothing is labelled a score."""
    matches = list(_FRACTION.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    score = _normalised(last.group(1), last.group(2))
    return (score, text[: last.start()]) if score is not None else None


def _normalised(value: object, scale: object = None) -> float | None:
    """A score on the 0-10 scale (or out of `scale`), or a fraction written as a decimal in [0, 1]."""
    if isinstance(value, bool) or isinstance(scale, bool):
        return None  # JSON's true/false is no number (float(False) would read 0)
    try:
        number = float(value)  # type: ignore[arg-type]
        denominator = float(scale) if scale not in (None, "") else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if denominator is not None:
        return number / denominator if denominator > 0 and 0 <= number <= denominator else None
    written_as_decimal = (isinstance(value, str) and "." in value) or (isinstance(value, float) and value % 1)
    if written_as_decimal and 0 <= number <= 1:
        return number  # 0.7: already a fraction
    return number / SCALE if 0 <= number <= SCALE else None
