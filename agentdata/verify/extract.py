"""Find the final answer in a model's response.

The answer is the content of the last `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed X`
without braces). Only when a response has no box at all do we fall back to the last
"Answer: X" / "The (final) answer is X" phrase, because small models often forget the box
and a human grader would still read that line as the answer.
"""

from __future__ import annotations

import re

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_ANSWER_PHRASE = re.compile(
    r"(?:\*\*)?(?:final\s+answer|answer)(?:\*\*)?\s*(?:is|:)\s*(?:\*\*)?\s*(?P<answer>[^\n]+)", re.IGNORECASE
)


def extract_answer(text: str | None) -> str | None:
    """The last boxed answer, else the last "Answer: X" phrase, else None."""
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed or None
    return _last_answer_phrase(text)


def last_boxed(text: str) -> str | None:
    """Content of the last well-formed `\\boxed`/`\\fbox` ('' when empty), or None when there is none."""
    for match in reversed(list(_BOX_COMMAND.finditer(text))):
        content = _box_content(text, match.end())
        if content is not None:
            return content.strip()
    return None


def _box_content(text: str, start: int) -> str | None:
    position = start
    while position < len(text) and text[position] in " \t":
        position += 1
    if position < len(text) and text[position] == "{":
        return _braced(text, position)
    if position == start:  # `\boxedx` is some other command, not a box
        return None
    # `\boxed 5`: the answer runs to the next space or end of the math span
    match = re.match(r"[^\s$]+", text[position:])
    return match.group(0) if match else None


def _braced(text: str, open_index: int) -> str | None:
    """The text inside the brace group opening at open_index; escaped `\\{` `\\}` do not count."""
    depth = 0
    index = open_index
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_index + 1 : index]
        index += 1
    return None


def _last_answer_phrase(text: str) -> str | None:
    matches = list(_ANSWER_PHRASE.finditer(text))
    if not matches:
        return None
    answer = matches[-1].group("answer").strip()
    answer = re.sub(r"\*\*", "", answer).strip()
    if answer.startswith("$") and answer.count("$") >= 2:  # "$\frac{1}{2}$." -> inside the math span
        answer = answer[1 : answer.index("$", 1)]
    answer = answer.rstrip(" .")
    return answer or None
