"""The exports `curate` writes (`--for hf|trl|verl|openai`), read back by datasets and by agentdata's own SFT stage."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata.curate import CurateConfig, curate
from agentdata.errors import UserError
from agentdata.formats.codeblock import CodeblockProtocol
from agentdata.formats.forms import canonical_messages, hf_messages, openai_messages
from agentdata.records import CODE_TOOL, ToolCall, Trajectory, assistant_message, tool_message
from agentdata.steps.config import DedupConfig
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

CODE = 'print("6 * 7 =", 6 * 7)\nx = 1'  # a quote and a newline: encoded and decoded differ


def conversation(format: str = "hermes") -> list[dict]:
    return [
        {"role": "system", "content": f"You solve problems in the {format} format."},
        {"role": "user", "content": "What is 6 * 7?"},
        assistant_message("Let me compute it.", [ToolCall(CODE, id="call_0")]),
        tool_message("call_0", "6 * 7 = 42"),
        assistant_message("So the answer is \\boxed{42}."),
    ]


def crafted(id: str, format: str = "hermes", **settings) -> Trajectory:
    base = trajectory(id, **settings)
    base.messages, base.format = conversation(format), format
    return base


def curated(tmp_path, rows, target="hf", name="sft.parquet"):
    run = write_run(tmp_path / f"run-{target}", rows)
    return curate(
        [run],
        tmp_path / name,
        CurateConfig(target=target, dedup=DedupConfig(near_dup_threshold=None), max_per_problem=None),
    )


def test_hf_form_holds_arguments_and_tools_as_structures(tmp_path):
    result = curated(tmp_path, [crafted("a")])
    row = pq.read_table(result.output).to_pylist()[0]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"code": CODE}
    assert row["tools"] == [CODE_TOOL]


def test_hf_form_loads_in_datasets_as_mappings(tmp_path):
    from agentdata.records import load_as_dataset

    row = load_as_dataset(curated(tmp_path, [crafted("a"), crafted("b", "codeblock")]).output)[0]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"code": CODE}
    assert row["tools"] == [CODE_TOOL]


def test_codeblock_turns_are_plain_text_with_fences():
    turns = CodeblockProtocol().plain_turns(conversation("codeblock"))
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "user", "assistant"]
    assert not any("tool_calls" in turn for turn in turns)
    assert turns[2]["content"] == f"Let me compute it.\n```python\n{CODE}\n```\n"
    assert turns[3]["content"] == "```output\n6 * 7 = 42\n```"


def test_codeblock_outputs_of_one_turn_share_one_user_turn():
    messages = [
        {"role": "user", "content": "q"},
        assistant_message("", [ToolCall("print(1)", id="call_0"), ToolCall("print(2)", id="call_1")]),
        tool_message("call_0", "1"),
        tool_message("call_1", "2"),
        assistant_message("\\boxed{3}"),
    ]
    turns = CodeblockProtocol().plain_turns(messages)
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[2]["content"] == "```output\n1\n```\n```output\n2\n```"
    assert canonical_messages(turns, "codeblock") == messages


@pytest.mark.parametrize("format", ["hermes", "codeblock"])
def test_every_form_reads_back_to_canonical(format):
    messages = conversation(format)
    assert canonical_messages(hf_messages(messages, format), format) == messages
    back = canonical_messages(openai_messages(messages, format), format)
    if format == "hermes":  # the OpenAI form drops the tool message's `name` (not in that format)
        back[3]["name"] = "code_interpreter"
    assert back == messages


def test_openai_form_is_fine_tuning_jsonl(tmp_path):
    result = curated(tmp_path, [crafted("a")], target="openai", name="sft.jsonl")
    lines = [json.loads(line) for line in result.output.read_text().splitlines()]
    assert len(lines) == 1 and set(lines[0]) == {"messages", "tools"}
    call_turn, tool_turn = lines[0]["messages"][2], lines[0]["messages"][3]
    assert json.loads(call_turn["tool_calls"][0]["function"]["arguments"]) == {"code": CODE}
    assert tool_turn == {"role": "tool", "tool_call_id": "call_0", "content": "6 * 7 = 42"}
    assert lines[0]["tools"] == [CODE_TOOL]


def test_trl_and_verl_targets_write_the_hf_form(tmp_path):
    hf = curated(tmp_path, [crafted("a")]).output
    for target in ("trl", "verl"):
        other = curated(tmp_path, [crafted("a")], target=target, name=f"{target}.parquet").output
        assert pq.read_table(other).equals(pq.read_table(hf))


def test_the_target_and_the_suffix_must_agree(tmp_path):
    with pytest.raises(UserError, match="--for openai writes JSONL"):
        curated(tmp_path, [crafted("a")], target="openai", name="sft.parquet")
    with pytest.raises(ValueError, match="target .axolotl.: must be one of canonical, hf, trl, verl, openai"):
        CurateConfig(target="axolotl")


def canonical_file(tmp_path, rows) -> Path:
    from agentdata.records import SFT_COLUMNS, records_to_table

    path = tmp_path / "canonical.parquet"
    pq.write_table(records_to_table(rows, Trajectory).select(list(SFT_COLUMNS)), path)
    return path


def test_tools_with_differently_named_arguments_are_refused_in_parquet(tmp_path):
    """(curate itself keeps only code-tool calls today; the writer guards any set, e.g. `synth stitch`'s.)"""
    from agentdata.formats.sft_set.writer import write_sft_form

    other = crafted("b")
    other.messages[2] = assistant_message("Search.", [ToolCall(name="search", arguments={"query": "x"}, id="call_0")])
    source = canonical_file(tmp_path, [crafted("a"), other])
    with pytest.raises(UserError, match="differently named arguments"):
        write_sft_form(source, tmp_path / "sft.parquet", "hf")
    written = write_sft_form(source, tmp_path / "sft.jsonl", "openai")  # the JSONL form holds them exactly
    calls = [json.loads(line)["messages"][2]["tool_calls"][0]["function"] for line in written.read_text().splitlines()]
    assert [json.loads(call["arguments"]) for call in calls] == [{"code": CODE}, {"query": "x"}]


def test_an_empty_sft_set_is_refused(tmp_path, capsys):
    run = write_run(tmp_path / "run", [trajectory("a", correct=False)])
    code = run_cli(["curate", str(run), "--out", str(tmp_path / "sft.parquet")])
    error = capsys.readouterr().err
    assert code == 2 and "SFT set is empty" in error and not (tmp_path / "sft.parquet").exists()
    assert json.loads((tmp_path / "sft.report.json").read_text())["output"] is None


def test_cli_curate_for_openai_defaults_to_jsonl(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = write_run(tmp_path / "run", [crafted("a")])
    assert run_cli(["curate", str(run), "--for", "openai"]) == 0
    assert (tmp_path / "sft.jsonl").is_file()


@pytest.mark.parametrize("target, name", [("hf", "sft.parquet"), ("openai", "sft.jsonl")])
@pytest.mark.parametrize("format", ["hermes", "codeblock"])
def test_agentdata_sft_reads_every_form_as_the_canonical_set(tmp_path, tokenizer, format, target, name):
    """The SFT stage trains on the same tokens and masks whatever form the set was written in."""
    from agentdata.sft.sft_set import tokenize_sft_set

    rows = [crafted("a", format)]
    canonical = canonical_file(tmp_path, rows)
    written = curated(tmp_path, rows, target=target, name=name).output
    expected = tokenize_sft_set(canonical, tokenizer, format)
    assert tokenize_sft_set(written, tokenizer, format) == expected


def test_arguments_that_are_not_json_are_one_line_errors(tmp_path):
    from agentdata.formats.sft_set.writer import write_sft_form

    broken = crafted("a")
    broken.messages[2]["tool_calls"][0]["function"]["arguments"] = "{not json"
    with pytest.raises(UserError, match="arguments are not JSON"):
        write_sft_form(canonical_file(tmp_path, [broken]), tmp_path / "sft.parquet", "hf")
