"""Secrets in what is about to leave the lab: found with detect-secrets' detectors, redacted or counted.

Trajectories really hold secrets: a tool output prints the environment, a teacher echoes a key from its
prompt, a user turn pastes a connection string. The detectors are detect-secrets' own (Yelp's library:
AWS, GitHub, GitLab, OpenAI, Slack, Stripe, Twilio, SendGrid, npm, PyPI, JWTs, private keys, passwords in
URLs, ...), applied as the library defines them; none is written here. Left out, and why:

- the high-entropy detectors (base64, hex): every hash, UUID and encoded blob a tool prints is one;
- `KeywordDetector`: `password = "..."` is what a problem about validating passwords asks the model to write;
- `IPPublicDetector`: an address is no secret.

One pattern is added to theirs: a token-like value in a URL's query (`?api_key=...`, `&token=...`,
`?sig=...`), which no detector of theirs reads and an engine spec or a recorded command line carries.
`redact_tree` applies the scanner to every string of a JSON-like value (keys too): every writer of what
leaves the lab (sets, pools, cards, reports, provenance, the viewer's static site, session traces) runs
what it writes through it, so a secret in any field, the command line or an engine spec included, is cut.

Scanning is in two steps so that a million rows cost one pass of Rust regexes: polars finds the rows
whose text matches any detector's pattern with its look-arounds removed (a superset: a look-around only
narrows a match), then the library's own patterns run in Python on those rows alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.records import write_json

SECRET_MODES = ("redact", "drop", "keep")
LEFT_OUT = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"})
URL_QUERY_KIND = "Secret in URL query"
# The value of a query parameter named like a credential; the value alone is cut, the URL stays readable.
URL_QUERY_SECRET = re.compile(
    r"[?&](?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|secret|client[_-]?secret|password|passwd"
    r"|pwd|sig|signature|credential|auth)=([^&#\s\"'<>]+)",
    re.IGNORECASE,
)
JWT_REST = re.compile(r"[A-Za-z0-9_.+/=-]*")
PEM_END = re.compile(r"-----END[ A-Z]*PRIVATE KEY-----|(?=\")|\Z")  # a key block ends at its END line (else its string)


@dataclass(frozen=True)
class Finding:
    kind: str  # the detector's secret type, e.g. "AWS Access Key"
    start: int
    end: int


@dataclass
class SecretCounts:
    """What a scan found: rows with a secret, and secrets per kind."""

    rows: int = 0
    found: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "found": dict(sorted(self.found.items()))}


class SecretScanner:
    """detect-secrets' detectors (but those in LEFT_OUT) over text: `findings`, `redact`, `candidates`."""

    @cached_property
    def patterns(self) -> list[tuple[str, re.Pattern]]:
        try:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
            from detect_secrets.plugins.base import RegexBasedDetector
        except ImportError:  # pragma: no cover - a declared dependency
            raise RuntimeError("secret scanning needs detect-secrets: pip install 'detect-secrets==1.5.*'") from None
        detectors = [kind() for kind in get_mapping_from_secret_type_to_class().values()]
        return [
            (detector.secret_type, pattern)
            for detector in detectors
            if isinstance(detector, RegexBasedDetector) and type(detector).__name__ not in LEFT_OUT
            for pattern in detector.denylist
        ] + [(URL_QUERY_KIND, URL_QUERY_SECRET)]

    @cached_property
    def candidate_pattern(self) -> str:
        """One pattern polars (Rust's regex) runs: every detector's, look-arounds removed."""
        return "|".join(f"(?{_flags(pattern)}:{without_lookarounds(pattern.pattern)})" for _, pattern in self.patterns)

    def candidates(self, text: pl.Expr) -> pl.Expr:
        """True where `text` may hold a secret (never False where it does)."""
        return text.str.contains(self.candidate_pattern).fill_null(False)

    def may_hold(self, texts: list[str]) -> list[bool]:
        """`candidates` over a list of texts: True where one may hold a secret."""
        return (
            pl.DataFrame({"text": texts}, schema={"text": pl.String})
            .select(self.candidates(pl.col("text")))["text"]
            .to_list()
        )

    def findings(self, text: str) -> list[Finding]:
        """The secrets in `text`, each as the span redaction replaces (overlaps merged)."""
        spans = []
        for kind, pattern in self.patterns:
            for match in pattern.finditer(text):
                spans.append(Finding(kind, *_secret_span(kind, match, text)))
        merged: list[Finding] = []
        for finding in sorted(spans, key=lambda found: (found.start, -found.end)):
            if merged and finding.start < merged[-1].end:
                last = merged[-1]
                merged[-1] = Finding(last.kind, last.start, max(last.end, finding.end))
            else:
                merged.append(finding)
        return merged

    def redact(self, text: str, counts: Counter | None = None) -> str:
        """`text` with each secret replaced by `[REDACTED <kind>]`; `counts` (by kind) is added to."""
        pieces, end = [], 0
        for finding in self.findings(text):
            pieces += [text[end : finding.start], f"[REDACTED {finding.kind}]"]
            end = finding.end
            if counts is not None:
                counts[finding.kind] += 1
        return "".join(pieces) + text[end:] if pieces else text


@cache
def shared_scanner() -> SecretScanner:
    """One scanner per process: its patterns are compiled once for every writer."""
    return SecretScanner()


def redact_tree(value: Any, counts: Counter | None = None, scanner: SecretScanner | None = None) -> Any:
    """`value` (JSON-like: dicts, lists, strings, numbers) with every secret in every string, keys included,
    redacted; `counts` (by kind) is added to. A value whose text cannot hold one (one polars pass) is returned
    as it is."""
    scanner = scanner or shared_scanner()
    if not scanner.may_hold(["\n".join(_strings(value))])[0]:
        return value
    return _redacted(value, scanner, counts)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _redacted(value: Any, scanner: SecretScanner, counts: Counter | None) -> Any:
    if isinstance(value, str):
        return scanner.redact(value, counts)
    if isinstance(value, dict):
        return {_redacted(key, scanner, counts): _redacted(item, scanner, counts) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, scanner, counts) for item in value]
    return value


def write_shared_json(path: str | Path, data: dict[str, Any]) -> Path:
    """A report that leaves with a set (curate's, filter's, validate's): written with its secrets redacted."""
    return write_json(path, redact_tree(json.loads(json.dumps(data, default=str))))


def _secret_span(kind: str, match: re.Match, text: str) -> tuple[int, int]:
    """What to cut out for one match. A private key's pattern finds its BEGIN line: the whole block goes. A
    group that is the match's own start (GitHub's `ghp` of `ghp_...`) names the token's kind: the whole match
    goes. Another group is the secret inside its context (the password of `://user:PASSWORD@host`): it goes."""
    if kind == "Private Key":
        start = text.rfind("-----", 0, match.start())
        start = start if start >= 0 and "\n" not in text[start : match.start()] else match.start()
        return start, PEM_END.search(text, match.end()).end()
    if kind == "JSON Web Token":  # the library's pattern ends lazily, before the signature: the token goes whole
        return match.start(), JWT_REST.match(text, match.end()).end()
    if match.re.groups and match.group(1) and match.start(1) > match.start():
        return match.span(1)
    return match.span()


def _flags(pattern: re.Pattern) -> str:
    return ("i" if pattern.flags & re.IGNORECASE else "") + ("x" if pattern.flags & re.VERBOSE else "")


def without_lookarounds(pattern: str) -> str:
    """`pattern` with every look-ahead and look-behind group removed (Rust's regex has none)."""
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), index):
            index = _group_end(pattern, index)
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _group_end(pattern: str, start: int) -> int:
    """The index after the group opening at `start` (escapes and character classes skipped)."""
    depth, index, in_class = 0, start, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return index


def message_text() -> pl.Expr:
    """All the text of a `messages` list a scan reads: contents, reasoning and tool-call arguments."""
    message = pl.element()
    arguments = message.struct.field("tool_calls").list.eval(
        pl.element().struct.field("function").struct.field("arguments")
    )
    per_message = pl.concat_str(
        [message.struct.field("content"), message.struct.field("reasoning_content"), arguments.list.join("\n")],
        separator="\n",
        ignore_nulls=True,
    )
    return pl.col("messages").list.eval(per_message).list.join("\n")


def redact_messages(messages: list[dict[str, Any]], scanner: SecretScanner, counts: Counter) -> list[dict[str, Any]]:
    """Canonical messages with every secret in their text redacted (contents, reasoning, call arguments)."""
    redacted = []
    for message in messages:
        message = dict(message)
        for key in ("content", "reasoning_content"):
            if isinstance(message.get(key), str):
                message[key] = scanner.redact(message[key], counts)
        if message.get("tool_calls"):
            message["tool_calls"] = [_redacted_call(call, scanner, counts) for call in message["tool_calls"]]
        redacted.append(message)
    return redacted


def messages_text(messages: list[dict[str, Any]]) -> str:
    """The text `message_text` reads, of messages in Python: contents, reasoning and tool-call arguments."""
    parts = []
    for message in messages:
        parts += [message.get("content"), message.get("reasoning_content")]
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments")
            parts.append(arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False))
    return "\n".join(part for part in parts if isinstance(part, str))


def _redacted_call(call: dict[str, Any], scanner: SecretScanner, counts: Counter) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        function["arguments"] = scanner.redact(arguments, counts)
    elif isinstance(arguments, dict):  # decoded (an SFT set's rows): each text value
        function["arguments"] = {
            key: scanner.redact(value, counts) if isinstance(value, str) else value for key, value in arguments.items()
        }
    return {**call, "function": function}
