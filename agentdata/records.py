"""The records that flow between stages: Problem, Trajectory and the code tool call.

Messages are kept in the canonical OpenAI / Hugging Face chat form whatever protocol
produced them:

    {"role": "system" | "user" | "assistant" | "tool", "content": str,
     "reasoning_content": str,  # an assistant's thinking (reasoning parsers, <think> spans)
     "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": json-str}}],
     "tool_call_id": str, "name": str}

`content` is always a string (possibly empty) and keys with no value are left out, so
a record read back from Parquet or JSONL equals the one written.

On disk, nested dicts with free-form keys (`metadata`, `sampling`, `timings`, `tools`)
are JSON strings: Arrow needs one fixed schema per column, and a JSON string keeps any
value exactly. Messages are real nested Arrow structs, so `datasets` and TRL read them
as lists of dicts.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.errors import OutputWriteError, write_refusal

TOOL_NAME = "code_interpreter"

CODE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Run Python code in a stateful interpreter and return what it prints.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
        },
    },
}

# The columns of an SFT set (`curate`, `synth stitch`): what TRL's SFTTrainer and verl read, plus provenance.
SFT_COLUMNS = ("messages", "tools", "problem_id", "source", "teacher", "format", "num_tool_calls", "correct")
# "context": the prompt (the question, or the conversation so far) is longer than the model's context,
# so the engine refused it instead of generating.
FINISH_REASONS = ("answer", "max_turns", "max_tool_calls", "max_tokens", "context", "error")
MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
ROLES = ("system", "user", "assistant", "tool")


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, init=False)
class ToolCall:
    """One tool call as a model made it: the tool's name and its arguments (a JSON object).

    `ToolCall("print(1)")` (or `code=`) is a call of the code tool, whose one argument is
    `code`; any other tool: `ToolCall(name="search", arguments={"query": "..."})`.
    """

    name: str
    arguments: dict[str, Any]
    id: str

    def __init__(
        self,
        code: str | None = None,
        id: str = "call_0",
        name: str = TOOL_NAME,
        arguments: dict[str, Any] | None = None,
    ):
        if arguments is not None and code is not None:
            raise TypeError("ToolCall takes code or arguments, not both")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "arguments", dict(arguments) if arguments is not None else {"code": code or ""})
        object.__setattr__(self, "id", id)

    @property
    def code(self) -> str:
        """The `code` argument (the code tool's one argument); "" when there is none."""
        value = self.arguments.get("code")
        return value if isinstance(value, str) else ""

    def to_message(self) -> dict[str, Any]:
        arguments = json.dumps(self.arguments, ensure_ascii=False)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}

    @classmethod
    def from_message(cls, call: dict[str, Any]) -> ToolCall:
        """An OpenAI-form call; its `arguments` may be a JSON string or already a mapping."""
        function = call["function"]
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        if not isinstance(arguments, dict):
            raise ValueError(f"tool call {call.get('id')!r}: arguments must be a JSON object")
        return cls(name=function["name"], arguments=arguments, id=call.get("id", "call_0"))


def assistant_message(
    content: str, tool_calls: Iterable[ToolCall] = (), reasoning_content: str | None = None
) -> dict[str, Any]:
    """An assistant message; `reasoning_content` is the model's thinking, where chat templates read it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning_content:
        message["reasoning_content"] = reasoning_content
    calls = [call.to_message() for call in tool_calls]
    if calls:
        message["tool_calls"] = calls
    return message


def tool_message(tool_call_id: str, content: str, name: str = TOOL_NAME) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "name": name, "content": content}


def message_tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    return [ToolCall.from_message(call) for call in message.get("tool_calls") or []]


def validate_messages(messages: list[dict[str, Any]]) -> None:
    """Raise ValueError when a message is not in canonical form."""
    for index, message in enumerate(messages):
        unknown = set(message) - set(MESSAGE_KEYS)
        if unknown:
            raise ValueError(f"message {index} has unknown keys {sorted(unknown)}")
        if message.get("role") not in ROLES:
            raise ValueError(f"message {index} has role {message.get('role')!r}, expected one of {ROLES}")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"message {index} content must be a string")


# --------------------------------------------------------------------------- records


def normalise_question(question: str) -> str:
    return re.sub(r"\s+", " ", question).strip().lower()


def stable_id(text: str) -> str:
    return hashlib.sha1(normalise_question(text).encode("utf-8")).hexdigest()[:16]


@dataclass
class Problem:
    question: str
    answer: str
    id: str = ""
    source: str = "unknown"
    domain: str = "math"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = stable_id(self.question)


@dataclass
class Trajectory:
    """One rollout of a model on a problem, in canonical message form."""

    id: str
    problem_id: str
    question: str
    answer: str
    messages: list[dict[str, Any]]
    source: str = "unknown"
    domain: str = "math"
    tools: list[dict[str, Any]] = field(default_factory=lambda: [CODE_TOOL])
    final_answer: str | None = None
    correct: bool = False
    num_tool_calls: int = 0
    num_tool_errors: int = 0
    num_turns: int = 0
    finish_reason: str = "answer"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    teacher: str = ""
    format: str = "hermes"
    sampling: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_problem(cls, problem: Problem, id: str, **fields: Any) -> Trajectory:
        """A trajectory of `problem`: its id, question, gold answer, source and domain copied over."""
        return cls(
            id=id,
            problem_id=problem.id,
            question=problem.question,
            answer=problem.answer,
            source=problem.source,
            domain=problem.domain,
            **fields,
        )

    def __post_init__(self) -> None:
        if self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason {self.finish_reason!r} is not one of {FINISH_REASONS}")


# --------------------------------------------------------------------------- arrow schemas

_TOOL_CALL_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("reasoning_content", pa.string()),
        ("tool_calls", pa.list_(_TOOL_CALL_TYPE)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
MESSAGES_TYPE = pa.list_(MESSAGE_TYPE)

_JSON_FIELDS = {"metadata", "sampling", "timings", "tools"}
_ARROW_TYPES: dict[type, pa.DataType] = {str: pa.string(), int: pa.int64(), bool: pa.bool_()}

Record = TypeVar("Record", Problem, Trajectory)


def _arrow_type(record_type: type, name: str) -> pa.DataType:
    if name in _JSON_FIELDS:
        return pa.string()
    if name == "messages":
        return MESSAGES_TYPE
    annotation = {f.name: f.type for f in dataclasses.fields(record_type)}[name]
    base = annotation.split("|")[0].strip()
    return _ARROW_TYPES[{"str": str, "int": int, "bool": bool}[base]]


def arrow_schema(record_type: type) -> pa.Schema:
    return pa.schema([(f.name, _arrow_type(record_type, f.name)) for f in dataclasses.fields(record_type)])


def strip_none(value: Any) -> Any:
    """Arrow gives every struct field; canonical messages leave out keys with no value."""
    if isinstance(value, dict):
        return {key: strip_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [strip_none(item) for item in value]
    return value


def to_row(record: Problem | Trajectory) -> dict[str, Any]:
    """The record as one row, its JSON fields as text. Shallow: a row is serialised at once (a journal line,
    an Arrow table) and never changed, and a record holds plain values, so the deep copy that
    dataclasses.asdict makes of every message was the largest part of collect's CPU per trajectory."""
    row = {name: getattr(record, name) for name in _field_names(type(record))}
    for name in _JSON_FIELDS & row.keys():
        row[name] = json.dumps(row[name], ensure_ascii=False, sort_keys=True)
    return row


@functools.cache
def _field_names(record_type: type) -> tuple[str, ...]:
    return tuple(item.name for item in dataclasses.fields(record_type))


def from_row(record_type: type[Record], row: dict[str, Any]) -> Record:
    names = {f.name for f in dataclasses.fields(record_type)}
    values = {key: value for key, value in row.items() if key in names}
    for name in _JSON_FIELDS & values.keys():
        if isinstance(values[name], str):
            values[name] = json.loads(values[name])
    if "messages" in values:
        values["messages"] = strip_none(list(values["messages"]))
    return record_type(**values)


# --------------------------------------------------------------------------- file I/O


UNCHANGED = "nothing was half-written: the file is as it was before"


def atomic_write(path: str | os.PathLike, write: Any, kept: str = UNCHANGED) -> Path:
    """Call write(tmp_path) then rename into place, so readers never see half a file.

    A write the system refuses (disk full, quota, read-only, ...) is an `OutputWriteError` naming `path`
    and what is `kept`, whichever library wrapped the OS error.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        if write_refusal(error) is None:
            raise
        raise OutputWriteError(path, write_refusal(error), kept) from None
    os.close(handle)
    try:
        write(tmp_name)
        os.replace(tmp_name, path)
    except BaseException as error:
        Path(tmp_name).unlink(missing_ok=True)
        number = write_refusal(error) if isinstance(error, Exception) else None
        if number is None:
            raise
        raise OutputWriteError(path, number, kept) from error
    return path


def write_parquet_tables(
    path: str | os.PathLike, schema: pa.Schema, tables: Iterable[pa.Table], metadata: dict[str, str] | None = None
) -> Path:
    """The one writer of the Parquet files agentdata hands to others (SFT sets, RL pools): each table one
    row group, streamed, atomically, with `metadata` as the file's key-value metadata."""
    if metadata:
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})

    def write(tmp: str) -> None:
        with pq.ParquetWriter(tmp, schema) as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(table, row_group_size=table.num_rows)

    return atomic_write(path, write)


def write_json(path: str | os.PathLike, data: dict[str, Any]) -> Path:
    """A JSON report or manifest, written atomically."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text + "\n", encoding="utf-8"))


def records_to_table(records: Iterable[Problem | Trajectory], record_type: type) -> pa.Table:
    return rows_to_table([to_row(record) for record in records], record_type)


def rows_to_table(rows: list[dict[str, Any]], record_type: type) -> pa.Table:
    """Rows made by `to_row` as one Arrow table of the record type's schema."""
    return pa.Table.from_pylist(rows, schema=arrow_schema(record_type))


def write_parquet(records: Iterable[Record], path: str | os.PathLike, record_type: type[Record]) -> Path:
    table = records_to_table(records, record_type)
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def read_parquet(path: str | os.PathLike, record_type: type[Record]) -> list[Record]:
    return [from_row(record_type, row) for row in pq.read_table(path).to_pylist()]


def write_jsonl(records: Iterable[Record], path: str | os.PathLike) -> Path:
    lines = [json.dumps(dataclasses.asdict(record), ensure_ascii=False) for record in records]

    def write(tmp: str) -> None:
        Path(tmp).write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    return atomic_write(path, write)


def read_jsonl(path: str | os.PathLike, record_type: type[Record]) -> list[Record]:
    with open(path, encoding="utf-8") as handle:
        return [from_row(record_type, json.loads(line)) for line in handle if line.strip()]


def write_json_list(records: Iterable[Record], path: str | os.PathLike) -> Path:
    """A `.json` file holds one JSON list of objects (what every JSON reader expects), not JSON lines."""
    text = json.dumps([dataclasses.asdict(record) for record in records], ensure_ascii=False, indent=1)
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text + "\n", encoding="utf-8"))


def write_records(records: Iterable[Record], path: str | os.PathLike, record_type: type[Record]) -> Path:
    """Write Parquet, JSONL or a JSON list, chosen by the file's suffix."""
    if str(path).endswith(".jsonl"):
        return write_jsonl(records, path)
    if str(path).endswith(".json"):
        return write_json_list(records, path)
    return write_parquet(records, path, record_type)


def read_records(path: str | os.PathLike, record_type: type[Record]) -> list[Record]:
    if str(path).endswith(".jsonl"):
        return read_jsonl(path, record_type)
    if str(path).endswith(".json"):
        return [from_row(record_type, row) for row in json.loads(Path(path).read_text(encoding="utf-8"))]
    return read_parquet(path, record_type)


def load_as_dataset(paths: str | os.PathLike | list[str | os.PathLike]):
    """Load Parquet shards (a file, a list, or a run dir) as a `datasets.Dataset`."""
    import datasets

    if not isinstance(paths, list):
        paths = [paths]
    files: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(str(p) for p in sorted(path.rglob("*.parquet")))
        else:
            files.append(str(path))
    return datasets.load_dataset("parquet", data_files=files, split="train")
