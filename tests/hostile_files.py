"""Hypothesis strategies that make broken input files: every supported form, damaged every way a
user's file gets damaged (random bytes, cut short, another encoding, a byte-order mark, wrong
types per column, huge rows). Used by tests/test_hostile_inputs.py."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

FORMS = (".jsonl", ".json", ".csv", ".parquet")
GOOD_ROW = {"question": "What is 6 * 7?", "answer": "42", "solution": "6 * 7 = 42", "id": "p1", "source": "demo"}
# One valid row of each layout problems.py recognises by its columns: math, code (TACO, LiveCodeBench,
# verl-style tests), multiple choice (GPQA, MMLU-Pro); damage then hits the columns of that layout.
LAYOUT_ROWS = (
    GOOD_ROW,
    {"question": "Print n squared.", "input_output": json.dumps({"inputs": ["2\n"], "outputs": ["4\n"]})},
    {
        "question_content": "Print n squared.",
        "starter_code": "",
        "metadata": "{}",
        "private_test_cases": "[]",
        "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
    },
    {
        "prompt": "Print n squared.",
        "ability": "code",
        "reward_model": {"ground_truth": json.dumps({"inputs": ["2\n"], "outputs": ["4\n"]})},
    },
    {
        "Question": "Which particle carries light?",
        "Correct Answer": "photon",
        "Incorrect Answer 1": "gluon",
        "Incorrect Answer 2": "W boson",
        "Incorrect Answer 3": "graviton",
    },
    {"question": "g in m/s^2?", "options": ["1", "3.7", "9.8", "12"], "answer": "C"},
)

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


@dataclass
class BrokenFile:
    suffix: str
    data: bytes
    how: str

    def write(self, folder: Path) -> Path:
        path = folder / f"input{self.suffix}"
        path.write_bytes(self.data)
        return path


def encode_rows(rows: list[dict], suffix: str) -> bytes:
    """Rows written in a form the way people write them (the valid file that damage starts from)."""
    if suffix == ".jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    if suffix == ".json":
        return json.dumps(rows, ensure_ascii=False).encode("utf-8")
    if suffix == ".csv":
        handle = io.StringIO()
        names = sorted({key for row in rows for key in row})
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerows({key: _csv_cell(value) for key, value in row.items()} for row in rows)
        return handle.getvalue().encode("utf-8")
    return parquet_bytes(rows)


def parquet_bytes(rows: list[dict]) -> bytes:
    sink = pa.BufferOutputStream()
    try:
        pq.write_table(_arrow_table(rows), sink)
    except pa.ArrowException:  # e.g. an empty struct, which Parquet cannot hold: keep each value as JSON text
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist([{k: json.dumps(v) for k, v in row.items()} for row in rows]), sink)
    return sink.getvalue().to_pybytes()


def _csv_cell(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _arrow_table(rows: list[dict]) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types in a column: keep each as its JSON text
        return pa.Table.from_pylist([{key: json.dumps(value) for key, value in row.items()} for row in rows])


@st.composite
def valid_rows(draw) -> list[dict]:
    layout = draw(st.sampled_from(LAYOUT_ROWS))
    text_column = next(name for name in ("question", "question_content", "prompt", "Question") if name in layout)
    count = draw(st.integers(1, 4))
    return [{**layout, text_column: f"{layout[text_column]} ({index})"} for index in range(count)]


@st.composite
def wrong_types(draw) -> tuple[list[dict], str]:
    rows = draw(valid_rows())
    column = draw(st.sampled_from(sorted(rows[0])))
    value = draw(json_values)
    for row in rows:
        row[column] = value
    return rows, f"{column}={value!r:.40}"


@st.composite
def broken_files(draw) -> BrokenFile:
    suffix = draw(st.sampled_from(FORMS))
    damage = draw(
        st.sampled_from(
            (
                "random bytes",
                "truncated",
                "latin-1",
                "utf-16",
                "bom",
                "wrong types",
                "huge row",
                "missing column",
                "empty",
            )
        )
    )
    rows = draw(valid_rows())
    if damage == "random bytes":
        return BrokenFile(suffix, draw(st.binary(max_size=200)), damage)
    if damage == "wrong types":
        rows, how = draw(wrong_types())
        return BrokenFile(suffix, encode_rows(rows, suffix), f"wrong types {how}")
    if damage == "huge row":
        column = next(name for name in ("question", "question_content", "prompt", "Question") if name in rows[0])
        rows[0][column] = "x " * draw(st.integers(70_000, 150_000))
        return BrokenFile(suffix, encode_rows(rows, suffix), damage)
    if damage == "missing column":
        column = draw(st.sampled_from(sorted(rows[0])))
        return BrokenFile(
            suffix, encode_rows([{k: v for k, v in r.items() if k != column} for r in rows], suffix), f"no {column}"
        )
    if damage == "empty":
        return BrokenFile(suffix, b"", damage)
    valid = encode_rows([{**row, "note": "é ü"} for row in rows], suffix)
    if damage == "truncated":
        return BrokenFile(suffix, valid[: draw(st.integers(0, max(len(valid) - 1, 0)))], damage)
    if suffix == ".parquet":  # text encodings do not apply: damage its bytes instead
        cut = draw(st.integers(0, len(valid) - 1))
        return BrokenFile(suffix, valid[:cut] + draw(st.binary(min_size=1, max_size=8)) + valid[cut + 8 :], "bytes")
    decoded = valid.decode("utf-8")
    if damage == "latin-1":
        return BrokenFile(suffix, decoded.encode("latin-1"), damage)
    if damage == "utf-16":
        return BrokenFile(suffix, decoded.encode("utf-16"), damage)
    return BrokenFile(suffix, b"\xef\xbb\xbf" + valid, damage)


TRAJECTORY_COLUMNS = (
    "id",
    "problem_id",
    "question",
    "messages",
    "tools",
    "correct",
    "num_tool_calls",
    "finish_reason",
    "metadata",
    "prompt_tokens",
)


@st.composite
def broken_trajectory_files(draw) -> BrokenFile:
    """Trajectory files (a Parquet shard or JSONL) cut short, overwritten, or with a column of another type."""
    from agentdata.records import Trajectory, records_to_table, to_row
    from tests.test_records import make_trajectory

    suffix = draw(st.sampled_from((".parquet", ".jsonl")))
    trajectories = [make_trajectory(index) for index in range(draw(st.integers(1, 3)))]
    if suffix == ".parquet":
        sink = pa.BufferOutputStream()
        pq.write_table(records_to_table(trajectories, Trajectory), sink)
        valid = sink.getvalue().to_pybytes()
    else:
        valid = "".join(json.dumps(to_row(t), ensure_ascii=False) + "\n" for t in trajectories).encode("utf-8")
    damage = draw(st.sampled_from(("random bytes", "truncated", "wrong types", "missing column", "bytes")))
    if damage == "random bytes":
        return BrokenFile(suffix, draw(st.binary(max_size=200)), damage)
    if damage == "truncated":
        return BrokenFile(suffix, valid[: draw(st.integers(0, len(valid) - 1))], damage)
    if damage == "bytes":
        cut = draw(st.integers(0, len(valid) - 1))
        return BrokenFile(suffix, valid[:cut] + draw(st.binary(min_size=1, max_size=8)) + valid[cut + 8 :], damage)
    rows = [to_row(t) for t in trajectories]
    column = draw(st.sampled_from(TRAJECTORY_COLUMNS))
    if damage == "missing column":
        rows = [{k: v for k, v in row.items() if k != column} for row in rows]
        how = f"no {column}"
    else:
        value = draw(json_values)
        rows = [{**row, column: value} for row in rows]
        how = f"wrong types {column}={value!r:.40}"
    if suffix == ".jsonl":
        return BrokenFile(suffix, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode(), how)
    return BrokenFile(suffix, parquet_bytes(rows), how)
