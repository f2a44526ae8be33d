"""Rollout health: what a trajectory's messages show about how the rollout went, whatever its verdict.

A right answer can come out of a broken rollout: a model that states its answer seven times,
writes its own ```output block instead of running the code, or calls the tool again after it
answered. `measure_health(messages, format, domain)` counts each such symptom once per
trajectory; the agent loop stores the counts on every trajectory (`metadata.health`), collect
counts the trajectories that fail each check, and curate drops them (`steps.health`), each
check under its own drop reason. A check fails when its count passes its limit
(`HealthLimits`; most limits are 0: one occurrence fails).

| check | counts |
|---|---|
| `empty_turn` | assistant turns with no text, no reasoning and no call |
| `answer_repeated` | `\\boxed` answers in the final assistant turn |
| `repetition` | the most times one word 10-gram occurs in one assistant turn (its text or its reasoning) |
| `call_after_answer` | tool calls made after a turn that gave a boxed answer |
| `repeated_code` | tool calls whose code is exactly that of an earlier call |
| `tool_output_flood` | characters of the longest tool output, as the tool gave it (before it was cut for the model) |
| `hallucinated_output` | tool-output blocks the model wrote itself (```output, <tool_response>) |
| `unterminated_code` | calls the model opened and never closed (```python, <tool_call>) |
| `mixed_protocols` | call markup of another protocol than the trajectory's own |

Pure text work on canonical messages (agentdata.records); nothing is imported but the foundation and
`tool_output` (how long a cut tool output was).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agentdata.formats import protocol_of
from agentdata.formats.tool_output import output_length
from agentdata.settings import check_fields

HEALTH_KEY = "health"  # metadata key of the stored measures
# Stored measures of another version are measured again. 2: a tool output's length is the tool's, not the cut one
# the model saw (which never passed the flood limit under the defaults: 256 shown, 4096 allowed).
HEALTH_VERSION = 2
REPEAT_NGRAM = 10  # words per n-gram of the repetition check

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_PYTHON_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)
_CLOSING_FENCE = re.compile(r"(?:\A|\n)```[ \t]*(?:\n|\Z)")
_OUTPUT_MARKUP = re.compile(r"```[ \t]*output\b|</?tool_response>", re.IGNORECASE)
_TOOL_CALL_OPEN, _TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_WORD = re.compile(r"\S+")


@dataclass
class HealthMeasures:
    """The counts one trajectory shows (see the module doc); all 0 for a healthy rollout."""

    empty_turns: int = 0
    answer_repeats: int = 0
    max_ngram_repeats: int = 0
    calls_after_answer: int = 0
    repeated_code: int = 0
    max_tool_output_chars: int = 0
    hallucinated_outputs: int = 0
    unterminated_code: int = 0
    mixed_protocols: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"version": HEALTH_VERSION, **asdict(self)}


MEASURE_NAMES = tuple(item.name for item in fields(HealthMeasures))


@dataclass
class HealthLimits:
    """How much of each symptom a trajectory may show before its check fails (the count must pass the limit)."""

    health: bool = field(
        default=True,
        metadata={
            "help": "Drop trajectories that fail a rollout health check (docs/curate.md); --no-health keeps them."
        },
    )
    max_answer_repeats: int = field(
        default=2,
        metadata={
            "override_only": True,
            "help": "Most \\boxed answers in the final turn (more: `answer_repeated`).",
            "range": "[1, inf)",
        },
    )
    max_ngram_repeats: int = field(
        default=4,
        metadata={
            "override_only": True,
            "help": "Most times one word 10-gram may occur in one assistant turn (more: `repetition`).",
            "range": "[1, inf)",
        },
    )
    max_repeated_code: int = field(
        default=0,
        metadata={
            "override_only": True,
            "help": "Tool calls allowed to rerun an earlier call's code unchanged (more: `repeated_code`).",
            "range": "[0, inf)",
        },
    )
    max_tool_output_chars: int = field(
        default=4096,
        metadata={
            "override_only": True,
            "help": "Longest tool output kept, in characters (longer: `tool_output_flood`).",
            "range": "[1, inf)",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)


# Each check: its drop reason, the measure it reads and the limit (a HealthLimits field, or 0), in the order
# they are tried (a trajectory is dropped for the first that fails).
CHECKS: tuple[tuple[str, str, str | None], ...] = (
    ("empty_turn", "empty_turns", None),
    ("answer_repeated", "answer_repeats", "max_answer_repeats"),
    ("repetition", "max_ngram_repeats", "max_ngram_repeats"),
    ("call_after_answer", "calls_after_answer", None),
    ("repeated_code", "repeated_code", "max_repeated_code"),
    ("tool_output_flood", "max_tool_output_chars", "max_tool_output_chars"),
    ("hallucinated_output", "hallucinated_outputs", None),
    ("unterminated_code", "unterminated_code", None),
    ("mixed_protocols", "mixed_protocols", None),
)
HEALTH_REASONS = tuple(reason for reason, _, _ in CHECKS)


def check_limits(limits: HealthLimits) -> list[tuple[str, str, int]]:
    """(reason, measure, limit) for every check: a trajectory fails a check when measure > limit."""
    return [(reason, measure, getattr(limits, limit) if limit else 0) for reason, measure, limit in CHECKS]


def failed_checks(measures: dict[str, Any], limits: HealthLimits | None = None) -> list[str]:
    """The checks a trajectory's measures fail, in check order."""
    limits = limits or HealthLimits()
    return [reason for reason, name, limit in check_limits(limits) if int(measures.get(name) or 0) > limit]


# --------------------------------------------------------------------------- measuring


def measure_health(messages: list[dict[str, Any]], format: str | None = None, domain: str = "math") -> HealthMeasures:
    """Count every symptom in a trajectory's canonical messages (`format` is the protocol that made them; one
    that is unset or does not import here is checked as plain text, as codeblock is)."""
    protocol = protocol_of(format)
    tagged = protocol is not None and protocol.tagged
    assistants = [(index, m) for index, m in enumerate(messages) if m.get("role") == "assistant"]
    texts = [m.get("content") or "" for _, m in assistants]
    code_answer_turn = len(assistants) - 1 if domain == "code" else None  # its ```python program is the answer
    return HealthMeasures(
        empty_turns=sum(_is_empty(m) for _, m in assistants),
        answer_repeats=len(_BOX.findall(texts[-1])) if texts else 0,
        max_ngram_repeats=max(
            (_most_repeated_ngram(m.get(key) or "") for _, m in assistants for key in ("content", "reasoning_content")),
            default=0,
        ),
        calls_after_answer=_calls_after_answer(m for _, m in assistants),
        repeated_code=_repeated_code(m for _, m in assistants),
        max_tool_output_chars=max(
            (output_length(m.get("content") or "") for m in messages if m.get("role") == "tool"), default=0
        ),
        hallucinated_outputs=sum(len(_OUTPUT_MARKUP.findall(text)) for text in texts),
        unterminated_code=sum(_unclosed_calls(text, tagged) for text in texts),
        mixed_protocols=sum(_foreign_calls(text, tagged, turn == code_answer_turn) for turn, text in enumerate(texts)),
    )


def stored_health(metadata: dict[str, Any]) -> dict[str, int] | None:
    """The measures a trajectory carries, or None when it has none of this version (measure them again)."""
    stored = metadata.get(HEALTH_KEY) if isinstance(metadata, dict) else None
    if not isinstance(stored, dict) or stored.get("version") != HEALTH_VERSION:
        return None
    return {name: int(stored.get(name) or 0) for name in MEASURE_NAMES}


def _is_empty(message: dict[str, Any]) -> bool:
    return (
        not (message.get("content") or "").strip()
        and not message.get("tool_calls")
        and not (message.get("reasoning_content") or "").strip()
    )


def _most_repeated_ngram(text: str) -> int:
    words = _WORD.findall(text.lower())
    if len(words) < REPEAT_NGRAM:
        return 0
    grams = Counter(tuple(words[start : start + REPEAT_NGRAM]) for start in range(len(words) - REPEAT_NGRAM + 1))
    return max(grams.values())


def _calls_after_answer(assistants: Any) -> int:
    """Calls in a turn that (in its text, which comes before its calls) or an earlier turn gave a boxed answer."""
    answered, count = False, 0
    for message in assistants:
        answered = answered or bool(_BOX.search(message.get("content") or ""))
        if answered:
            count += len(message.get("tool_calls") or [])
    return count


def _repeated_code(assistants: Any) -> int:
    seen: set[str] = set()
    repeats = 0
    for message in assistants:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            key = f"{function.get('name')}\0{_call_code(function.get('arguments'))}"
            repeats += key in seen
            seen.add(key)
    return repeats


def _call_code(arguments: Any) -> str:
    """The code a call runs (its other arguments, for other tools), whitespace at the ends ignored."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments.strip()
    if isinstance(arguments, dict) and isinstance(arguments.get("code"), str):
        return arguments["code"].strip()
    return json.dumps(arguments, sort_keys=True)


def _unclosed_calls(text: str, tagged: bool) -> int:
    """Calls of the trajectory's own protocol that the text opens and never closes (they stay in the text)."""
    if tagged:
        return int(text.count(_TOOL_CALL_OPEN) > text.count(_TOOL_CALL_CLOSE))
    unclosed = 0
    for opening in _PYTHON_FENCE.finditer(text):
        if _CLOSING_FENCE.search(text, opening.end()) is None:
            unclosed += 1
            break  # everything after an unclosed fence is inside it
    return unclosed


def _foreign_calls(text: str, tagged: bool, is_code_answer: bool) -> int:
    """Call markup of the other kind of protocol: <tool_call> in a plain-text trajectory, a ```python block
    in a tagged one (except the final program of a code problem, which is the answer, not a call)."""
    if tagged:
        return 0 if is_code_answer else len(_PYTHON_FENCE.findall(text))
    return text.count(_TOOL_CALL_OPEN)
