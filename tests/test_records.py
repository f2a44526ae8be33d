import json

import pytest

from agentdata.records import (
    CODE_TOOL,
    Problem,
    ToolCall,
    Trajectory,
    assistant_message,
    load_as_dataset,
    message_tool_calls,
    read_records,
    stable_id,
    tool_message,
    validate_messages,
    write_records,
)


def make_trajectory(index: int = 0) -> Trajectory:
    call = ToolCall(code='import sympy\nprint(sympy.factorint(360))  # "quotes" ünïcode `ticks`', id="call_0")
    messages = [
        {"role": "system", "content": "Use the tool."},
        {"role": "user", "content": "Factor 360."},
        assistant_message("Let me compute.", [call]),
        tool_message("call_0", "{2: 3, 3: 2, 5: 1}"),
        assistant_message("", []),
        assistant_message("So $360 = 2^3 3^2 5$, \\boxed{2^3 \\cdot 3^2 \\cdot 5}."),
    ]
    return Trajectory(
        id=f"p{index}-0",
        problem_id=f"p{index}",
        question="Factor 360.",
        answer="2^3 3^2 5",
        messages=messages,
        final_answer="2^3 \\cdot 3^2 \\cdot 5",
        correct=True,
        num_tool_calls=1,
        num_tool_errors=0,
        num_turns=2,
        prompt_tokens=40,
        completion_tokens=55,
        teacher="smollm2",
        format="hermes",
        sampling={"temperature": 0.7, "seed": 3},
        timings={"total_s": 1.25, "tool_s": 0.001},
        metadata={"nested": {"list": [1, 2.5, None, "x"]}},
    )


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_trajectory_round_trip_is_exact(tmp_path, suffix):
    trajectories = [make_trajectory(i) for i in range(3)]
    path = write_records(trajectories, tmp_path / f"t{suffix}", Trajectory)
    assert read_records(path, Trajectory) == trajectories


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_problem_round_trip_is_exact(tmp_path, suffix):
    problems = [
        Problem("What is 1/2 + 1/3?", "\\frac{5}{6}", source="s", metadata={"level": 2}),
        Problem("Empty metadata", "0", id="given-id"),
    ]
    path = write_records(problems, tmp_path / f"p{suffix}", Problem)
    assert read_records(path, Problem) == problems


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    write_records([make_trajectory()], tmp_path / "out.parquet", Trajectory)
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_failed_write_keeps_old_file_and_no_temp(tmp_path):
    path = write_records([make_trajectory()], tmp_path / "out.parquet", Trajectory)
    broken = make_trajectory()
    broken.num_tool_calls = "not a number"
    with pytest.raises((TypeError, ValueError)):
        write_records([broken], path, Trajectory)
    assert read_records(path, Trajectory) == [make_trajectory()]
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_problem_id_is_stable_hash_of_normalised_question():
    assert Problem("What  is 2+2?\n", "4").id == Problem("what is 2+2?", "4").id == stable_id("WHAT IS 2+2?")
    assert Problem("What is 2+3?", "5").id != Problem("What is 2+2?", "4").id


def test_tool_call_message_form_is_openai():
    message = assistant_message("text", [ToolCall("print(1)", id="call_7")])
    call = message["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "code_interpreter"
    assert json.loads(call["function"]["arguments"]) == {"code": "print(1)"}
    assert message_tool_calls(message) == [ToolCall("print(1)", id="call_7")]


def test_tool_call_accepts_arguments_as_dict():
    call = ToolCall.from_message({"id": "c", "function": {"name": "code_interpreter", "arguments": {"code": "x"}}})
    assert call == ToolCall("x", id="c")


def test_tool_call_of_any_tool_keeps_name_and_arguments():
    call = ToolCall(name="search", arguments={"query": "primes", "k": 3}, id="call_2")
    message = assistant_message("", [call])
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"query": "primes", "k": 3}
    assert message_tool_calls(message) == [call]
    assert call.code == ""  # not the code tool: no code argument
    assert ToolCall("print(1)").arguments == {"code": "print(1)"} and ToolCall("print(1)").name == "code_interpreter"
    with pytest.raises(TypeError):
        ToolCall("print(1)", arguments={"code": "x"})


def test_tool_call_arguments_that_are_not_an_object_are_refused():
    with pytest.raises(ValueError, match="JSON object"):
        ToolCall.from_message({"id": "c", "function": {"name": "code_interpreter", "arguments": "[1]"}})


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_reasoning_content_round_trips(tmp_path, suffix):
    trajectory = make_trajectory()
    trajectory.messages[2] = assistant_message(
        "Let me compute.", [ToolCall("print(1)")], reasoning_content="360 = 8 * 45, check it."
    )
    validate_messages(trajectory.messages)
    path = write_records([trajectory], tmp_path / f"t{suffix}", Trajectory)
    assert read_records(path, Trajectory) == [trajectory]


def test_validate_messages_rejects_non_canonical():
    validate_messages(make_trajectory().messages)
    with pytest.raises(ValueError, match="unknown keys"):
        validate_messages([{"role": "user", "content": "x", "reasoning": "y"}])
    with pytest.raises(ValueError, match="role"):
        validate_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="string"):
        validate_messages([{"role": "assistant", "content": None}])


def test_unknown_finish_reason_is_rejected():
    with pytest.raises(ValueError, match="finish_reason"):
        Trajectory(id="a", problem_id="b", question="q", answer="a", messages=[], finish_reason="done")


def test_shards_load_through_datasets(tmp_path):
    write_records([make_trajectory(0)], tmp_path / "run" / "part-00000.parquet", Trajectory)
    write_records([make_trajectory(1)], tmp_path / "run" / "part-00001.parquet", Trajectory)
    dataset = load_as_dataset(tmp_path / "run")
    assert len(dataset) == 2
    messages = dataset[0]["messages"]
    assert messages[2]["tool_calls"][0]["function"]["name"] == "code_interpreter"
    assert json.loads(dataset[0]["tools"]) == [CODE_TOOL]


def test_a_row_is_what_a_deep_copy_of_the_record_gives_and_leaves_the_record_as_it_was():
    import dataclasses
    import json as json_module

    from agentdata.records import Trajectory, to_row

    messages = [{"role": "user", "content": "6*7?"}, {"role": "assistant", "content": "42", "tool_calls": [{"a": 1}]}]
    trajectory = Trajectory("p-0", "p", "6*7?", "42", messages, metadata={"turns": [{"tokens": 3}]}, timings={"s": 1.5})
    before = dataclasses.asdict(trajectory)
    row = to_row(trajectory)
    expected = {
        key: json_module.dumps(value, ensure_ascii=False, sort_keys=True)
        if key in ("metadata", "sampling", "timings", "tools")
        else value
        for key, value in before.items()
    }
    assert row == expected and dataclasses.asdict(trajectory) == before
