"""The columnar `hf` writer against the row-by-row conversion it replaces (formats.forms), on rows that
reach every branch: several calls in a turn, outputs joined into one user turn, thinking, explicit
nulls, dates, numbers, text that Arrow's JSON reader cannot take, several batches."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentdata.errors import UserError
from agentdata.formats.forms import consumer_tools, hf_messages
from agentdata.formats.sft_set import hf_form
from agentdata.formats.sft_set.writer import write_sft_form
from agentdata.records import CODE_TOOL, SFT_COLUMNS, ToolCall, Trajectory, assistant_message, records_to_table
from agentdata.records import tool_message as result

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the notes.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "What to look for."}},
            "required": ["code"],
        },
    },
}


def row(id: str, format: str, turns: list[dict], tools: list | None = None, reasoning: str | None = None) -> Trajectory:
    messages = [{"role": "system", "content": f"Solve it ({format})."}, {"role": "user", "content": f"Question {id}?"}]
    if reasoning:
        turns = [{**turns[0], "reasoning_content": reasoning}, *turns[1:]]
    return Trajectory(
        id=id,
        problem_id=f"p-{id}",
        question=f"Question {id}?",
        answer="1",
        messages=messages + turns,
        format=format,
        tools=[CODE_TOOL] if tools is None else tools,
        num_tool_calls=sum(len(t.get("tool_calls") or []) for t in turns),
        correct=True,
        teacher="crafted",
    )


def two_calls(first: dict, second: dict) -> list[dict]:
    calls = [ToolCall(arguments=first, id="call_0"), ToolCall(arguments=second, id="call_1")]
    return [
        assistant_message("Two at once.", calls),
        result("call_0", "out 0"),
        result("call_1", "out 1\n"),
        assistant_message("", [ToolCall("print('again')", id="call_2")]),
        result("call_2", ""),
        assistant_message("So \\boxed{1}."),
    ]


def one_call(arguments: dict) -> list[dict]:
    return [assistant_message("Once.", [ToolCall(arguments=arguments)]), result("call_0", "1"), assistant_message("1")]


def varied_rows() -> list[Trajectory]:
    return [
        row("a", "hermes", two_calls({"code": "x = 1\nprint(x)"}, {"code": "print('é, \"quoted\"')"})),
        row("b", "codeblock", two_calls({"code": "print(1)"}, {"code": "print(2)"}), reasoning="Think first."),
        row("c", "hermes", [assistant_message("No tool needed: \\boxed{1}.")]),
        row("d", "codeblock", [assistant_message("\\boxed{1}")], tools=[]),
        row("e", "hermes", two_calls({"code": "2024-05-01"}, {"code": "2024-05-01 10:00:00"})),  # dates stay text
        row("f", "codeblock", [assistant_message("", [ToolCall(arguments={}, id="c0")]), result("c0", "[no code]")]),
        row(
            "g",
            "hermes",
            [assistant_message("Search.", [ToolCall(name="search", arguments={"code": "q"})])],
            [CODE_TOOL, SEARCH_TOOL],
        ),
    ]


def canonical_file(tmp_path, rows, name="canonical.parquet"):
    path = tmp_path / name
    pq.write_table(records_to_table(rows, Trajectory).select(list(SFT_COLUMNS)), path)
    return path


def reference(rows: list[Trajectory], schema: pa.Schema) -> pa.Table:
    """What the row-by-row writer made of the same rows, in the written schema."""
    converted = []
    for trajectory in rows:
        converted_row = {name: getattr(trajectory, name) for name in SFT_COLUMNS}
        converted_row["messages"] = hf_messages(trajectory.messages, trajectory.format)
        converted_row["tools"] = consumer_tools(trajectory.tools, trajectory.format)
        converted.append(converted_row)
    return pa.Table.from_pylist(converted, schema=schema)


def test_columnar_rows_equal_the_row_by_row_conversion(tmp_path):
    rows = varied_rows()
    written = pq.read_table(write_sft_form(canonical_file(tmp_path, rows), tmp_path / "sft.parquet", "hf"))
    assert written.equals(reference(rows, written.schema))
    turns = written["messages"][1].as_py()
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns[3]["content"] == "```output\nout 0\n```\n```output\nout 1\n\n```"
    assert turns[2]["reasoning_content"] == "Think first." and turns[4]["content"] == "```python\nprint('again')\n```\n"
    dates = written["messages"][4].as_py()[2]["tool_calls"]
    assert [call["function"]["arguments"]["code"] for call in dates] == ["2024-05-01", "2024-05-01 10:00:00"]


def test_fields_no_row_sets_are_left_out(tmp_path):
    written = pq.read_table(write_sft_form(canonical_file(tmp_path, varied_rows()[:1]), tmp_path / "sft.parquet", "hf"))
    message_fields = [field.name for field in written.schema.field("messages").type.value_type]
    assert message_fields == ["role", "content", "tool_calls", "tool_call_id", "name"]  # no reasoning_content


def test_batches_become_row_groups_and_types_widen_across_them(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_form, "BATCH_BYTES", 1)  # the smallest batch: 256 rows
    rows = [row(f"r{i}", "hermes", one_call({"code": "print(1)", "n": i if i < 300 else 0.5})) for i in range(600)]
    written = pq.ParquetFile(write_sft_form(canonical_file(tmp_path, rows), tmp_path / "sft.parquet", "hf"))
    assert written.metadata.num_row_groups == 3
    table = written.read()
    assert table.equals(reference(rows, table.schema))
    assert table["messages"][299].as_py()[2]["tool_calls"][0]["function"]["arguments"] == {"code": "print(1)", "n": 299}


def test_text_the_arrow_reader_refuses_is_read_as_json_loads_reads_it(tmp_path):
    rows = [row("a", "hermes", two_calls({"code": "1"}, {"code": "2"})), row("b", "hermes", two_calls({}, {}))]
    calls = [rows[1].messages[2]["tool_calls"][0], rows[1].messages[2]["tool_calls"][1]]
    calls[0]["function"]["arguments"] = '{\n  "code": "pretty-printed"\n}'  # a newline between tokens
    calls[1]["function"]["arguments"] = '{"code": "dup", "code": "last wins"}'  # json.loads keeps the last
    written = pq.read_table(write_sft_form(canonical_file(tmp_path, rows), tmp_path / "sft.parquet", "hf"))
    stored = [call["function"]["arguments"] for call in written["messages"][1].as_py()[2]["tool_calls"]]
    assert stored == [{"code": "pretty-printed"}, {"code": "last wins"}]


@pytest.mark.parametrize(
    "second, message",
    [
        ({"code": "x"}, "differently named arguments"),  # keys another row lacks: nulls templates would render
        ({"code": "x", "n": 12345678901234567890}, "differently named arguments"),  # more digits than a double
        ({"code": 7, "n": 1}, "differ in type"),  # a string in one call, a number in another
    ],
)
def test_arguments_one_struct_cannot_hold_exactly_are_refused(tmp_path, second, message):
    first = {"code": "1", "n": 1.5}
    rows = [row("a", "hermes", two_calls(first, first)), row("b", "hermes", two_calls(second, second))]
    with pytest.raises(UserError, match=message):
        write_sft_form(canonical_file(tmp_path, rows), tmp_path / "sft.parquet", "hf")
    assert not (tmp_path / "sft.parquet").exists()


def test_the_file_carries_the_metadata_given(tmp_path):
    path = write_sft_form(canonical_file(tmp_path, varied_rows()), tmp_path / "sft.parquet", "hf", metadata={"k": "v"})
    assert pq.read_schema(path).metadata[b"k"] == b"v"


def test_a_codeblock_call_whose_code_is_no_string_renders_empty_as_toolcall_reads_it(tmp_path):
    rows = [row("a", "codeblock", two_calls({"code": 5}, {"code": "print(2)"}))]
    turns = pq.read_table(write_sft_form(canonical_file(tmp_path, rows), tmp_path / "sft.parquet", "hf"))["messages"]
    assert turns[0].as_py()[2]["content"] == "Two at once.\n```python\n\n```\n```python\nprint(2)\n```\n"
    assert json.loads(json.dumps(turns[0].as_py())) == hf_messages(rows[0].messages, "codeblock")
