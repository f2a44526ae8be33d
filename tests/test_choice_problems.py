"""Multiple-choice science problems: GPQA's raw columns and MMLU-Pro / SuperGPQA's options lists."""

import json

import pytest

from agentdata.choice_problems import shuffled_choices
from agentdata.errors import InputFileError
from agentdata.problems import load_problems
from agentdata.verify import is_correct


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def gpqa_row(question="Which particle mediates the electromagnetic force?"):
    return {
        "Question": question,
        "Correct Answer": "photon",
        "Incorrect Answer 1": "gluon",
        "Incorrect Answer 2": "W boson",
        "Incorrect Answer 3": "graviton",
        "High-level domain": "Physics",
    }


def test_gpqa_columns_become_lettered_choices_with_the_letter_as_answer(tmp_path):
    problem = load_problems(write_jsonl(tmp_path / "gpqa.jsonl", [gpqa_row()]))[0]
    lines = {line[0]: line[3:] for line in problem.question.splitlines() if line[1:3] == ") "}
    assert sorted(lines.values()) == sorted(["photon", "gluon", "W boson", "graviton"])
    assert lines[problem.answer] == "photon"
    assert problem.domain == "science" and problem.metadata["multiple_choice"]
    assert is_correct(f"so the answer is \\boxed{{{problem.answer}}}", problem.answer)


def test_gpqa_shuffle_is_deterministic_per_problem_and_seed():
    first = shuffled_choices("Q1", "right", ["w1", "w2", "w3"], seed=0)
    assert first == shuffled_choices("Q1", "right", ["w1", "w2", "w3"], seed=0)
    letters = {shuffled_choices(f"Q{i}", "right", ["w1", "w2", "w3"], seed=0)[1] for i in range(40)}
    assert len(letters) == 4  # the correct answer does not always land on the same letter
    seeds = {tuple(shuffled_choices("Q1", "right", ["w1", "w2", "w3"], seed=s)[0]) for s in range(20)}
    assert len(seeds) > 1


@pytest.mark.parametrize(
    "gold", [{"answer": "C"}, {"answer_index": 2}, {"answer": "9.8", "answer_letter": "C"}, {"answer": "9.8"}]
)
def test_options_layouts_mmlu_pro_and_supergpqa(tmp_path, gold):
    row = {
        "question": "g near Earth's surface, in m/s^2?",
        "options": ["1", "3.7", "9.8", "12"],
        "category": "physics",
    } | gold
    problem = load_problems(write_jsonl(tmp_path / "mmlu.jsonl", [row]))[0]
    assert problem.answer == "C" and "C) 9.8" in problem.question and problem.metadata["category"] == "physics"


def test_options_without_a_gold_choice_is_one_clear_line(tmp_path):
    row = {"question": "Q?", "options": ["a", "b"], "answer": "Z"}
    with pytest.raises(InputFileError, match=r"mmlu.jsonl, row 1: no gold choice"):
        load_problems(write_jsonl(tmp_path / "mmlu.jsonl", [row]))
