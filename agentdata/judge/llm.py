"""The LLM judge: a rubric, the request that shows a model one trajectory, and a tolerant reading of its verdict.

The judge reads the question and the transcript (judge.transcript) and answers with a rationale
and a score from 0 to 10 on a last line `Score: N`. Models write verdicts many ways, so
`parse_verdict` takes a JSON object (`{"score": 7, "rationale": "..."}`, fenced or not), `Score: 7`,
`**Score:** 7/10`, `Rating: 3 out of 5`, `score = 0.7`, or a last `N/10`; the score is
normalised to [0, 1]. A reply with no readable score is a failure (tried again, then counted
apart), never a low score.
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
_NUMBER = r"([+-]?\d+(?:\.\d+)?)"
_OUT_OF = r"\s*(?:/|out\s+of)\s*"
# "Score: 7", "**Rating**: 3 out of 5": the separator may not eat a minus sign ("Score: -1" is no score)
_LABELLED = re.compile(rf"(?:score|rating|grade)[^\w+\-]{{0,6}}{_NUMBER}(?:{_OUT_OF}{_NUMBER})?", re.IGNORECASE)
_FRACTION = re.compile(rf"{_NUMBER}{_OUT_OF}{_NUMBER}", re.IGNORECASE)
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


def parse_verdict(text: str) -> Verdict | None:
    """The score (normalised to [0, 1]) and rationale in a judge's reply; None when it holds no readable score."""
    if not text or not text.strip():
        return None
    found = _from_json(text) or _from_text(text)
    if found is None:
        return None
    score, rationale = found
    return Verdict(score, rationale.strip()[:MAX_RATIONALE_CHARS])


def _from_json(text: str) -> tuple[float, str] | None:
    for match in reversed(list(_JSON_OBJECT.finditer(text))):
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        value = next((data[key] for key in ("score", "rating", "grade") if key in data), None)
        score = _normalised(value, data.get("max") or data.get("scale"))
        if score is not None:
            rationale = next((str(data[key]) for key in ("rationale", "reason", "explanation") if key in data), None)
            return score, rationale if rationale is not None else text[: match.start()]
    return None


def _from_text(text: str) -> tuple[float, str] | None:
    for pattern in (_LABELLED, _FRACTION):
        matches = list(pattern.finditer(text))
        if matches:
            last = matches[-1]
            score = _normalised(last.group(1), last.group(2))
            if score is not None:
                return score, text[: last.start()]
    return None


def _normalised(value: object, scale: object = None) -> float | None:
    """A score on the 0-10 scale (or out of `scale`), or a fraction written as a decimal in [0, 1]."""
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
