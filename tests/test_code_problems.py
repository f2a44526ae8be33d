"""Code problems read from the layouts people have: LiveCodeBench, TACO/APPS, DeepCoder/verl."""

import base64
import json
import os
import pickle
import zlib

import pytest

from agentdata.code_tests import BadTestsError, code_tests_of, decode_compressed, function_arguments, parse_tests
from agentdata.errors import InputFileError
from agentdata.problems import load_problems


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def compressed(value):
    """LiveCodeBench's private-test encoding: base64(zlib(pickle(json string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


def lcb_row(**overrides):
    row = {
        "question_title": "square",
        "question_content": "Print n squared.",
        "platform": "atcoder",
        "question_id": "abc001_a",
        "contest_date": "2024-01-01",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
        "private_test_cases": compressed(json.dumps([{"input": "3\n", "output": "9\n", "testtype": "stdin"}])),
        "metadata": "{}",
    }
    return row | overrides


def test_livecodebench_stdin_with_compressed_private_tests(tmp_path):
    problem = load_problems(write_jsonl(tmp_path / "lcb.jsonl", [lcb_row()]))[0]
    tests = code_tests_of(problem.answer)
    assert problem.domain == "code" and problem.id == "abc001_a"
    assert [(t["input"], t["output"], t["public"]) for t in tests.tests] == [
        ("2\n", "4\n", True),
        ("3\n", "9\n", False),
    ]
    assert "Print n squared." in problem.question and "```python" in problem.question
    assert "9\n" not in problem.question  # private tests never reach the prompt


def test_livecodebench_functional_with_starter_code(tmp_path):
    row = lcb_row(
        starter_code="class Solution:\n    def add(self, a: int, b: int) -> int:\n        ",
        public_test_cases=json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
        private_test_cases="[]",
        metadata=json.dumps({"func_name": "add"}),
    )
    problem = load_problems(write_jsonl(tmp_path / "lcb.jsonl", [row]))[0]
    tests = code_tests_of(problem.answer)
    assert tests.func_name == "add" and tests.functional and "class Solution" in problem.question


def test_hostile_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    row = lcb_row(private_test_cases=compressed(Hostile()))
    with pytest.raises(InputFileError) as raised:
        load_problems(write_jsonl(tmp_path / "lcb.jsonl", [row]))
    assert "row 1" in str(raised.value) and "private_test_cases" in str(raised.value)
    assert "refused" in str(raised.value) and not marker.exists()


def test_pickle_of_a_non_string_is_refused():
    with pytest.raises(BadTestsError, match="expected a string"):
        decode_compressed(compressed([{"input": "1", "output": "1"}]))


def test_taco_stdin_and_call_based(tmp_path):
    rows = [
        {
            "question": "Echo.",
            "input_output": json.dumps({"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", ["2", "3"]]}),
        },
        {
            "question": "Add.",
            "input_output": json.dumps({"fn_name": "add", "inputs": [[1, 2], [[1], 2]], "outputs": [[3], [[1, 2]]]}),
        },
    ]
    stdin, call = load_problems(write_jsonl(tmp_path / "taco.jsonl", rows))
    assert [t["input"] for t in code_tests_of(stdin.answer).tests] == ["1\n", "2\n3"]
    call_tests = code_tests_of(call.answer)
    assert call_tests.func_name == "add" and [t["testtype"] for t in call_tests.tests] == ["functional"] * 2
    # TACO wraps each output in a list; the arguments become LiveCodeBench's one-JSON-value-per-line
    assert [json.loads(t["output"]) for t in call_tests.tests] == [3, [1, 2]]
    assert [function_arguments(t["input"]) for t in call_tests.tests] == [[1, 2], [[1], 2]]
    assert call.domain == "code" and stdin.source == "taco"


def test_deepcoder_tests_column(tmp_path):
    row = {"problem": "Double it.", "tests": json.dumps([{"input": "2", "output": "4", "type": "stdin_stdout"}])}
    problem = load_problems(write_jsonl(tmp_path / "deepcoder.jsonl", [row]))[0]
    assert problem.domain == "code" and code_tests_of(problem.answer).tests[0]["output"] == "4"


def test_verl_mixed_file_code_rows_by_ability_and_by_shape(tmp_path):
    tests = json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})
    rows = [
        {
            "prompt": [{"role": "user", "content": "Code it."}],
            "ability": "code",
            "reward_model": {"ground_truth": tests},
            "data_source": "prime",
        },
        {"prompt": [{"role": "user", "content": "Also code."}], "reward_model": {"ground_truth": tests}},
        {"prompt": [{"role": "user", "content": "2+2?"}], "ability": "math", "reward_model": {"ground_truth": "4"}},
    ]
    problems = load_problems(write_jsonl(tmp_path / "verl.jsonl", rows))
    assert [p.domain for p in problems] == ["code", "code", "math"]
    assert problems[0].source == "prime" and problems[2].answer == "4"


def test_code_problem_read_back_from_its_own_answer(tmp_path):
    original = load_problems(write_jsonl(tmp_path / "lcb.jsonl", [lcb_row()]))[0]
    rows = [{"prompt": [{"role": "user", "content": original.question}], "answer": original.answer, "domain": "code"}]
    again = load_problems(write_jsonl(tmp_path / "pool.jsonl", rows))[0]
    assert again.answer == original.answer and again.question == original.question


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("input_output", "{not json", "neither JSON nor"),
        ("input_output", json.dumps({"inputs": ["1"], "outputs": []}), "same length"),
        ("input_output", json.dumps({"fn_name": "f", "inputs": [["x"]], "outputs": [[1]]}), None),
    ],
)
def test_bad_test_field_is_one_line_naming_file_row_field(tmp_path, field, value, message):
    rows = [
        {"question": "ok", "input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})},
        {"question": "bad", field: value},
    ]
    path = write_jsonl(tmp_path / "taco.jsonl", rows)
    if message is None:
        assert len(load_problems(path)) == 2
        return
    with pytest.raises(InputFileError) as raised:
        load_problems(path)
    text = str(raised.value)
    assert "taco.jsonl, row 2" in text and repr(field) in text and message in text and "\n" not in text


def test_functional_tests_need_a_function_name():
    with pytest.raises(BadTestsError, match="func_name"):
        parse_tests(json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]))


def test_functional_argument_parsing():
    assert function_arguments('[1, 2]\n"a b"\n{"k": null}\n') == [[1, 2], "a b", {"k": None}]
    with pytest.raises(BadTestsError, match="JSON values"):
        parse_tests(json.dumps([{"input": "[1,", "output": "1", "testtype": "functional"}]), "f")


def test_id_hashes_the_tests_too(tmp_path):
    first = {"question": "Same text.", "input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})}
    second = {"question": "Same text.", "input_output": json.dumps({"inputs": ["1"], "outputs": ["2"]})}
    a, b, c = load_problems(write_jsonl(tmp_path / "t.jsonl", [first, second, first]))
    assert a.id != b.id and a.id == c.id


def test_builtin_code_problems_via_synth(tmp_path):
    from agentdata.synth.generators import generate_problems

    problems = generate_problems(32, seed=0, kinds=["code"])
    assert all(p.domain == "code" for p in problems) and len({p.id for p in problems}) == 32
    kinds = {code_tests_of(p.answer).functional for p in problems}
    assert kinds == {True, False}  # stdin and functional tasks
    for problem in problems:
        private = [t for t in code_tests_of(problem.answer).tests if not t["public"]]
        assert private and all(t["input"] not in problem.question for t in private if len(t["input"]) > 3)
    with pytest.raises(Exception, match="only 32 unique"):
        generate_problems(33, seed=0, kinds=["code"])
