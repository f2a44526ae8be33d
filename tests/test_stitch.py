"""The stitched baseline: calculations cut from text solutions, run in the real local sandbox."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from agentdata.errors import InputFileError, UserError
from agentdata.records import Problem, message_tool_calls, validate_messages
from agentdata.synth.stitch import (
    StitchConfig,
    find_calculations,
    load_solutions,
    plan_steps,
    split_steps,
    split_top_level_equals,
    stitch_file,
    stitch_solution,
)

LATEX_SOLUTION = (
    "Let $a = 3 \\cdot 4 = 12$. Then half of it is $\\frac{a}{2} = 6$.\n"
    "Summing,\n$$\\sum_{k=1}^{10} k^2 = 385$$\n"
    "Also $\\frac{3}{4} \\cdot 12 = 9$, and $x^2 = 9$ gives $x = 3$.\n"
    "So the answer is $\\boxed{9}$."
)
GSM8K_SOLUTION = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)


@pytest.fixture(scope="module")
def sandbox():
    from agentdata.sandbox import Sandbox

    with Sandbox() as local:
        yield local


# --------------------------------------------------------------------------- finding calculations


def test_split_steps_keeps_display_math_whole_and_loses_no_text():
    solution = "First line.\n$$a =\n 1 + 2 = 3$$\nLast."
    steps = split_steps(solution)
    assert "".join(steps) == solution
    assert steps[1] == "$$a =\n 1 + 2 = 3$$\n"


def test_equals_inside_braces_is_not_a_split():
    assert split_top_level_equals("\\sum_{k=1}^{3} k = 6") == ["\\sum_{k=1}^{3} k ", " 6"]
    assert split_top_level_equals("a \\le b") == ["a \\le b"]


def test_plain_arithmetic_chains_become_python():
    calculations = find_calculations("So (3 + 4) * 2 = 14 and 2^10 = 1024, then total = 5 × 6 = 30.", set())
    assert [c.code() for c in calculations] == [
        ["print((3 + 4) * 2)"],
        ["print(2**10)"],
        ["total = 5 * 6", "print(total)"],
    ]
    assert [c.claimed for c in calculations] == ["14", "1024", "30"]


def test_latex_calculations_use_exact_sympy():
    calculations = find_calculations("Then $\\frac{3}{4} \\cdot 12 = 9$ and $\\sum_{k=1}^{4} k = 10$.", set())
    assert calculations[0].code() == ["print((Rational(3, 4))*12)"]
    assert calculations[1].code() == ["k = symbols('k')", "print((Sum(k, (k, 1, 4))).doit())"]
    assert all(c.uses_sympy for c in calculations)


def test_algebra_on_unknowns_is_not_a_calculation():
    assert find_calculations("We get $x^2 = 9$, so $x = 3$; also $2 = 2$.", set()) == []


def test_a_name_assigned_earlier_can_be_used():
    steps = plan_steps("Let $a = 3 \\cdot 4 = 12$.\nThen $a + 1 = 13$.", max_cells=8)
    assert steps[1].calculations[0].code() == ["print(a + 1)"]


def test_gsm8k_notes_are_the_calculations_and_are_removed_from_the_prose():
    steps = plan_steps(GSM8K_SOLUTION, max_cells=8)
    assert [s.source() for s in steps] == ["print(48/2)", "print(48+24)", ""]
    assert steps[0].prose == "Natalia sold 48/2 = 24 clips in May.\n"
    assert steps[2].prose == "The final answer is $\\boxed{72}$."


def test_gsm8k_dollars_are_money_not_math():
    steps = plan_steps("He pays $5 each, so 3 * 5 = <<3*5=15>>15 dollars.\n#### 15", max_cells=8)
    assert steps[0].source() == "print(3*5)"


def test_sympy_is_imported_once_in_the_first_cell():
    steps = [s for s in plan_steps(LATEX_SOLUTION, max_cells=8) if s.calculations]
    assert steps[0].source().startswith("from sympy import *\n")
    assert not any("import" in s.source() for s in steps[1:])


def test_max_cells_limits_the_code_cells():
    steps = plan_steps("1 + 1 = 2.\n2 + 2 = 4.\n3 + 3 = 6.", max_cells=2)
    assert [bool(s.calculations) for s in steps] == [True, True, False]


# --------------------------------------------------------------------------- trajectories (real sandbox)


def test_stitched_trajectory_has_real_outputs(sandbox):
    problem = Problem("What is it?", "9")
    trajectory = stitch_solution(
        problem, LATEX_SOLUTION, sandbox, StitchConfig(protocol="hermes")
    )  # the tool schema in the prompt
    validate_messages(trajectory.messages)
    roles = [m["role"] for m in trajectory.messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
    assert "code_interpreter" in trajectory.messages[0]["content"]
    outputs = [m["content"] for m in trajectory.messages if m["role"] == "tool"]
    assert outputs == ["12\n6", "385", "9"]  # printed by the sandbox, not copied from the text
    assert trajectory.num_tool_calls == 3 and trajectory.num_tool_errors == 0
    assert trajectory.correct and trajectory.final_answer == "9"
    assert "\\boxed{9}" in trajectory.messages[-1]["content"]
    assert trajectory.metadata["calculations_matching_text"] == trajectory.metadata["calculations"] == 4
    assert trajectory.teacher == "stitched"


def test_cells_of_one_solution_share_state(sandbox):
    trajectory = stitch_solution(
        Problem("q", "13"), "Let $a = 3 \\cdot 4 = 12$.\nThen $a + 1 = 13$.", sandbox, StitchConfig()
    )
    assert [m["content"] for m in trajectory.messages if m["role"] == "tool"] == ["12", "13"]


def test_a_wrong_claim_keeps_the_real_output(sandbox):
    trajectory = stitch_solution(
        Problem("q", "15"), "So 7 * 2 = 15.\nThe answer is $\\boxed{15}$.", sandbox, StitchConfig()
    )
    assert [m["content"] for m in trajectory.messages if m["role"] == "tool"] == ["14"]
    assert trajectory.metadata["calculations_matching_text"] == 0


def test_a_failing_cell_is_counted_not_raised(sandbox):
    trajectory = stitch_solution(Problem("q", "0"), "Then 1/0 = 0.\n", sandbox, StitchConfig())
    assert trajectory.num_tool_errors == 1
    assert "ZeroDivisionError" in next(m["content"] for m in trajectory.messages if m["role"] == "tool")
    assert "\\boxed{0}" in trajectory.messages[-1]["content"]


def test_a_solution_without_calculations_is_dropped_unless_kept(sandbox):
    problem = Problem("q", "yes")
    assert stitch_solution(problem, "It is obvious.", sandbox, StitchConfig()) is None
    kept = stitch_solution(problem, "It is obvious.", sandbox, StitchConfig(keep_without_calculations=True))
    assert kept.num_tool_calls == 0 and kept.messages[-1]["content"].endswith("\\boxed{yes}$.")


def test_codeblock_protocol_gives_its_own_system_prompt(sandbox):
    hermes = stitch_solution(Problem("q", "2"), "1 + 1 = 2.", sandbox, StitchConfig(protocol="hermes"))
    codeblock = stitch_solution(Problem("q", "2"), "1 + 1 = 2.", sandbox, StitchConfig(protocol="codeblock"))
    assert hermes.messages[0]["content"] != codeblock.messages[0]["content"]
    assert codeblock.format == "codeblock"
    assert message_tool_calls(codeblock.messages[2])[0].code == "print(1 + 1)"


# --------------------------------------------------------------------------- files


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_load_solutions_default_layout_and_answers(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"problem": "p1", "solution": "1 + 1 = 2, so $\\boxed{2}$.", "answer": "2"},
            {"problem": "p2", "solution": "2 + 2 = 4, so $\\boxed{4}$."},  # no answer: from the box
            {"problem": "p3", "solution": "No idea."},  # no answer anywhere: dropped, counted
        ],
    )
    rows, no_answer = load_solutions(path)
    assert [(r.problem.question, r.problem.answer) for r in rows] == [("p1", "2"), ("p2", "4")]
    assert no_answer == 1


def test_load_solutions_gsm8k_layout(tmp_path):
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [{"question": "Natalia?", "answer": GSM8K_SOLUTION}])
    rows, _ = load_solutions(path, solution_field="answer")
    assert rows[0].problem.answer == "72" and rows[0].solution == GSM8K_SOLUTION


def test_load_solutions_names_a_missing_solution_column(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(InputFileError, match="--solution-field"):
        load_solutions(path)
    with pytest.raises(InputFileError, match="'steps'"):
        load_solutions(path, solution_field="steps")


def test_stitch_file_writes_curates_sft_schema(tmp_path, sandbox):
    from agentdata.curate.sft import SFT_COLUMNS

    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"question": "Natalia?", "solution": GSM8K_SOLUTION},
            {"question": "Sum?", "solution": LATEX_SOLUTION, "answer": "9"},
            {"question": "Why?", "solution": "Because. $\\boxed{1}$"},
        ],
    )
    out = tmp_path / "sft.parquet"
    summary = stitch_file(
        path, out, StitchConfig(protocol="hermes"), trajectories_dir=tmp_path / "traj", sandbox=sandbox
    )  # hermes rows carry the tool schema
    assert summary.written == 2 and summary.dropped == {"no_answer": 0, "no_calculation": 1}
    table = pq.read_table(out)
    assert table.column_names == list(SFT_COLUMNS)
    rows = table.to_pylist()
    assert json.loads(rows[0]["tools"])[0]["function"]["name"] == "code_interpreter"  # canonical, as curate's
    assert [m["role"] for m in rows[0]["messages"]][:3] == ["system", "user", "assistant"]
    assert rows[0]["teacher"] == "stitched" and rows[0]["num_tool_calls"] == 2
    assert list((tmp_path / "traj" / "trajectories").glob("*.parquet"))
    from agentdata.curate import curate

    curated = curate([tmp_path / "traj"], tmp_path / "curated.parquet")
    assert curated.kept_rows == 2
    assert pq.read_schema(tmp_path / "curated.parquet").equals(pq.read_schema(out))  # one schema, both ways
    with pytest.raises(UserError, match="already holds"):
        stitch_file(path, out, trajectories_dir=tmp_path / "traj", sandbox=sandbox)


def test_stitch_file_with_nothing_to_stitch_says_why(tmp_path, sandbox):
    path = write_jsonl(tmp_path / "s.jsonl", [{"question": "q", "solution": "Plain words. $\\boxed{1}$"}])
    with pytest.raises(UserError, match="no solution had a calculation"):
        stitch_file(path, tmp_path / "o.parquet", sandbox=sandbox)
