import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentdata.errors import InputFileError
from agentdata.problems import load_problems


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


LAYOUTS = [
    ({"question": "Q?", "answer": "1"}, "Q?", "1"),
    ({"problem": "Q?", "answer": "1"}, "Q?", "1"),
    ({"Problem": "Q?", "Answer": 1}, "Q?", "1"),  # AIME style, numeric answer
    ({"prompt": "Q?", "solution": "1"}, "Q?", "1"),
    ({"question": "Q?", "ground_truth": "1"}, "Q?", "1"),
    (
        {
            "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"}],
            "reward_model": {"ground_truth": "1", "style": "rule"},
            "data_source": "aime",
            "ability": "math",
        },
        "Q?",
        "1",
    ),
]


@pytest.mark.parametrize("row,question,answer", LAYOUTS)
def test_recognised_layouts_jsonl(tmp_path, row, question, answer):
    problems = load_problems(write_jsonl(tmp_path / "p.jsonl", [row, row]))
    assert [(p.question, p.answer) for p in problems] == [(question, answer)] * 2


def test_verl_layout_fields(tmp_path):
    problems = load_problems(write_jsonl(tmp_path / "p.jsonl", [LAYOUTS[-1][0] | {"extra_info": {"index": 3}}]))
    assert problems[0].source == "aime" and problems[0].domain == "math" and problems[0].metadata == {"index": 3}


def test_id_and_source_columns(tmp_path):
    problems = load_problems(
        write_jsonl(tmp_path / "p.jsonl", [{"id": 7, "question": "Q", "answer": "A", "source": "gsm"}])
    )
    assert problems[0].id == "7" and problems[0].source == "gsm"


def test_source_defaults_to_file_stem(tmp_path):
    assert (
        load_problems(write_jsonl(tmp_path / "aime24.jsonl", [{"question": "Q", "answer": "A"}]))[0].source == "aime24"
    )


def test_json_list_and_data_wrapper(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([{"question": "Q1", "answer": "1"}]))
    (tmp_path / "b.json").write_text(json.dumps({"data": [{"question": "Q2", "answer": "2"}]}))
    assert load_problems(tmp_path / "a.json")[0].question == "Q1"
    assert load_problems(tmp_path / "b.json")[0].question == "Q2"


def test_parquet_with_nested_reward_model(tmp_path):
    table = pa.Table.from_pylist(
        [{"prompt": [{"role": "user", "content": "Q?"}], "reward_model": {"ground_truth": "42"}, "data_source": "x"}]
    )
    pq.write_table(table, tmp_path / "p.parquet")
    problem = load_problems(tmp_path / "p.parquet")[0]
    assert (problem.question, problem.answer, problem.source) == ("Q?", "42", "x")


def test_csv(tmp_path):
    with open(tmp_path / "p.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["Problem", "Answer"])
        writer.writeheader()
        writer.writerow({"Problem": "Q?", "Answer": "3"})
    assert load_problems(tmp_path / "p.csv")[0].answer == "3"


def test_saved_dataset_dir(tmp_path):
    import datasets

    datasets.Dataset.from_list([{"problem": "Q?", "answer": "5"}]).save_to_disk(str(tmp_path / "ds"))
    assert load_problems(tmp_path / "ds")[0].answer == "5"


def test_field_overrides(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "Q?", "label": "B", "question": "other"}])
    problem = load_problems(path, question_field="text", answer_field="label")[0]
    assert (problem.question, problem.answer) == ("Q?", "B")


BAD_INPUTS = [
    ("empty.jsonl", "", None, "no rows"),
    ("broken.jsonl", '{"question": "Q", "answer": "1"}\n{"question": \n', 2, "not valid JSON"),
    ("nolist.jsonl", "[1, 2]\n", 1, "expected a JSON object"),
    ("noq.jsonl", '{"text": "Q", "answer": "1"}\n', None, "no question column"),
    ("noa.jsonl", '{"question": "Q", "label": "1"}\n', None, "no answer column"),
    (
        "emptyq.jsonl",
        '{"question": "Q", "answer": "1"}\n{"question": "  ", "answer": "1"}\n',
        2,
        "empty or missing question",
    ),
    (
        "emptya.jsonl",
        '{"question": "Q", "answer": "1"}\n{"question": "Q2", "answer": null}\n',
        2,
        "empty or missing answer",
    ),
    ("bad.json", "{not json", None, "not valid JSON"),
    ("bad.parquet", "not parquet", None, "not a readable Parquet file"),
    ("p.txt", "hello", None, "unknown file type"),
]


@pytest.mark.parametrize("name,content,row,message", BAD_INPUTS)
def test_bad_input_gives_one_clear_line(tmp_path, name, content, row, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputFileError) as caught:
        load_problems(path)
    text = str(caught.value)
    assert message in text and str(path) in text and "\n" not in text
    assert caught.value.row == row
    if row is not None:
        assert f"row {row}" in text


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="no such file"):
        load_problems(tmp_path / "nope.jsonl")


def test_unknown_override_column_names_columns(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"question": "Q", "answer": "1"}])
    with pytest.raises(InputFileError, match=r"no column 'text' \(given by --question-field\)"):
        load_problems(path, question_field="text")


def test_answer_optional_when_not_required(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"question": "Q"}])
    assert load_problems(path, require_answer=False)[0].answer == ""
