"""`curate`: run dirs of crafted trajectories -> SFT set, one test per drop reason, rejects, report, CLI."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from agentdata.cli.app import app
from agentdata.curate import CurateConfig, curate
from agentdata.curate.sft import SFT_COLUMNS
from agentdata.errors import InputFileError
from agentdata.records import CODE_TOOL, Trajectory, write_records
from agentdata.settings import build
from tests.curate_fixtures import trajectory, write_run

CODE = "print(sum([2,3,5,7,11,13,17,19,23,29]))"  # the crafted trajectories' call
OTHER_QUESTION = "Find the area of a triangle whose sides measure 3, 4 and 5 units."


def run_curate(tmp_path, trajectories, **settings):
    config = build(CurateConfig, settings)  # flat names, as on the command line
    result = curate(
        [write_run(tmp_path / "run", trajectories)],
        tmp_path / "sft.parquet",
        config,
        rejects=tmp_path / "rejects.parquet",
    )
    rejects = pl.read_parquet(tmp_path / "rejects.parquet")
    return result, dict(rejects.select("id", "drop_reason").iter_rows())


@pytest.mark.parametrize(
    "bad, reason",
    [
        (dict(correct=False), "incorrect"),
        (dict(final_answer=None, correct=False), "no_answer"),
        (dict(bad_arguments=True), "malformed_tool_call"),
        (dict(code=["1/0", "x", "print(1)"], num_tool_errors=2), "tool_error_ratio"),
        (dict(code=[]), "no_tool_call"),
        (dict(code=["print(1)"] * 9), "too_many_tool_calls"),
        (dict(tokens=40_000), "too_long"),
    ],
)
def test_each_rule_drop_reason(tmp_path, bad, reason):
    good = trajectory("good", problem_id="p1")
    dropped = trajectory("bad", problem_id="p2", question=OTHER_QUESTION, **bad)
    result, rejects = run_curate(tmp_path, [good, dropped])
    assert rejects == {"bad": reason}
    assert result.counts == {reason: 1} and result.kept_rows == 1


def test_a_trajectory_the_model_wrote_nothing_of_is_never_an_sft_row(tmp_path):
    # a harness that printed its own answer without asking its model (recorded so before that run was an error)
    user_only = trajectory("user_only", problem_id="p2", question=OTHER_QUESTION, code=[])
    user_only.messages = user_only.messages[:1]
    result, rejects = run_curate(tmp_path, [trajectory("good"), user_only], tool_calls="0,8")
    assert rejects == {"user_only": "no_model_turn"} and result.kept_rows == 1


def test_keep_incorrect(tmp_path):
    wrong = trajectory("wrong", correct=False)
    result, rejects = run_curate(tmp_path, [wrong], keep_incorrect=True)
    assert result.kept_rows == 1 and rejects == {}


def test_malformed_count_from_the_parser_metadata(tmp_path):
    unparsed = trajectory("unparsed")
    unparsed.metadata = {"malformed_tool_calls": 1}
    _, rejects = run_curate(tmp_path, [trajectory("ok", problem_id="p2", question=OTHER_QUESTION), unparsed])
    assert rejects == {"unparsed": "malformed_tool_call"}


def test_duplicate_on_normalised_text(tmp_path):
    first = trajectory("first")
    spaced = trajectory("spaced", answer_text="The   answer is \\BOXED{129}.")
    _, rejects = run_curate(tmp_path, [first, spaced])
    assert rejects == {"spaced": "duplicate"}


def test_near_duplicate_problem_dropped_whole(tmp_path):
    question = "A farmer has a rectangular field whose length is three times its width; the perimeter is 200 m."
    copies = [
        trajectory("a", problem_id="p1", question=question),
        trajectory("b", problem_id="p2", question=question.replace("200 m.", "200 metres.")),
        trajectory("c", problem_id="p2", question=question.replace("200 m.", "200 metres."), code=["print(129)"]),
    ]
    _, rejects = run_curate(tmp_path, copies, near_dup_threshold=0.7)
    assert rejects == {"b": "near_duplicate", "c": "near_duplicate"}


def test_near_duplicate_on_solution_text(tmp_path):
    long_answer = (
        "We add the primes two three five seven eleven thirteen seventeen nineteen twenty-three "
        "and twenty-nine to get one hundred and twenty-nine, so the answer is \\boxed{129}."
    )
    rows = [
        trajectory("a", answer_text=long_answer),
        trajectory("b", answer_text=long_answer.replace("We add", "Let us add")),
        trajectory("c", problem_id="p2", question=OTHER_QUESTION, answer_text="Area is \\boxed{6}."),
    ]
    _, rejects = run_curate(tmp_path, rows, near_dup_field="solution", near_dup_threshold=0.7)
    assert rejects == {"b": "near_duplicate"}


def test_contaminated_against_benchmark_file(tmp_path):
    benchmark = tmp_path / "bench.jsonl"
    benchmark.write_text(json.dumps({"question": OTHER_QUESTION, "answer": "6"}) + "\n")
    rows = [trajectory("clean"), trajectory("dirty", problem_id="p2", question=OTHER_QUESTION)]
    _, rejects = run_curate(tmp_path, rows, decontam_files=[str(benchmark)])
    assert rejects == {"dirty": "contaminated"}


def test_max_per_problem_prefers_distinct_solutions_and_fewer_calls(tmp_path):
    rows = [
        trajectory("three_calls", code=["a = 1", "b = 2", "print(129)"]),
        trajectory("one_call"),
        trajectory("same_code_again", answer_text="So: \\boxed{129}."),  # same code as one_call
        trajectory("two_calls", code=["x = 129", "print(x)"]),
    ]
    result, rejects = run_curate(tmp_path, rows, max_per_problem=2)
    kept = pl.read_parquet(tmp_path / "sft.parquet")
    assert sorted(kept["num_tool_calls"].to_list()) == [1, 2]
    assert rejects == {"three_calls": "max_per_problem", "same_code_again": "max_per_problem"}


def test_balance_sources_caps_share(tmp_path):
    rows = [
        trajectory(f"m{i}", problem_id=f"m{i}", question=f"Math question number {i} about primes.", source="math")
        for i in range(6)
    ]
    rows += [
        trajectory(f"s{i}", problem_id=f"s{i}", question=f"Science question {i} about gases.", source="science")
        for i in range(2)
    ]
    result, rejects = run_curate(tmp_path, rows, balance_sources=0.5, near_dup_threshold=None)
    kept = pl.read_parquet(tmp_path / "sft.parquet")
    assert kept["source"].value_counts().sort("source").rows() == [("math", 2), ("science", 2)]
    assert set(rejects.values()) == {"source_share"} and len(rejects) == 4


def test_output_is_the_canonical_form_and_says_so(tmp_path):
    from agentdata.formats.forms import file_form

    result, _ = run_curate(tmp_path, [trajectory("a")])
    table = pl.read_parquet(result.output)
    assert tuple(table.columns) == SFT_COLUMNS and file_form(result.output) == "canonical"
    assert json.loads(table["tools"][0]) == [CODE_TOOL]  # as collect stores it: a JSON string
    messages = table["messages"][0].to_list()
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == {"code": CODE}
    report = json.loads(result.report.read_text())
    assert report["kept_rows"] == 1 and report["input_rows"] == 1
    assert report["rejects"] == str(tmp_path / "rejects.parquet")  # where the viewer finds the dropped rows


def test_sft_set_loads_in_datasets_and_renders_with_tools(tmp_path):
    from agentdata.records import load_as_dataset

    result, _ = run_curate(tmp_path, [trajectory("a")], target="trl")
    row = load_as_dataset(result.output)[0]
    assert row["messages"][1]["tool_calls"][0]["function"]["name"] == "code_interpreter"
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"code": CODE}
    assert row["tools"] == [CODE_TOOL]


def test_several_run_dirs_and_rejects_hold_whole_rows(tmp_path):
    write_run(tmp_path / "one", [trajectory("a")])
    write_run(tmp_path / "two", [trajectory("b", correct=False)])
    result = curate([tmp_path / "one", tmp_path / "two"], tmp_path / "sft.parquet", rejects=tmp_path / "rej.parquet")
    rejects = pl.read_parquet(tmp_path / "rej.parquet")
    assert result.input_rows == 2 and rejects["drop_reason"].to_list() == ["incorrect"]
    assert "messages" in rejects.columns and "_row" not in rejects.columns


def test_bad_input_is_one_line_error(tmp_path):
    with pytest.raises(InputFileError, match="no trajectory shards"):
        curate([tmp_path], tmp_path / "sft.parquet")
    wrong = tmp_path / "wrong.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(wrong)
    with pytest.raises(InputFileError, match="missing columns"):
        curate([wrong], tmp_path / "sft.parquet")


def test_trajectory_file_input(tmp_path):
    path = write_records([trajectory("a")], tmp_path / "t.parquet", Trajectory)
    assert curate([path], tmp_path / "sft.parquet").kept_rows == 1


def test_cli_curate_prints_reason_table(tmp_path):
    run = write_run(tmp_path / "run", [trajectory("a"), trajectory("b", correct=False)])
    out = tmp_path / "sft.parquet"
    result = CliRunner().invoke(
        app, ["curate", str(run), "--out", str(out), "--rejects", str(tmp_path / "r.parquet"), "--tool-calls", "1,4"]
    )
    assert result.exit_code == 0, result.output
    assert "dropped_incorrect" in result.output and out.exists()


def test_cli_curate_bad_band(tmp_path):
    run = write_run(tmp_path / "run", [trajectory("a")])
    result = CliRunner().invoke(app, ["curate", str(run), "--tool-calls", "5"])
    assert result.exit_code == 2 and "--tool-calls" in result.output


@pytest.mark.parametrize("out", ["sft.parquet", "sft"])
def test_a_rerun_that_keeps_no_row_leaves_no_earlier_set_looking_current(tmp_path, monkeypatch, capsys, out):
    """Issue 41: curate whose steps kept no row left the last sft.parquet and its card in place."""
    from tests.cli_helpers import run_cli

    monkeypatch.chdir(tmp_path)
    write_run(
        tmp_path / "good", [trajectory(f"t{i}", problem_id=f"p{i}", question=f"Add {i} and {i}?") for i in range(3)]
    )
    write_run(tmp_path / "bad", [trajectory(f"w{i}", problem_id=f"q{i}", correct=False) for i in range(3)])
    assert run_cli(["curate", "good", "--out", out]) == 0
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    capsys.readouterr()
    assert run_cli(["curate", "bad", "--out", out]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the SFT set is empty (none of 3 trajectories kept)" in err and "the earlier set there was removed" in err
    left = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    gone = sorted(set(written) - set(left))
    assert gone == (
        ["sft.README.md", "sft.parquet"] if out == "sft.parquet" else ["sft/README.md", "sft/data/train.parquet"]
    )
    report = json.loads((tmp_path / "sft.report.json").read_text())
    assert report["kept_rows"] == 0 and report["output"] is None and report["card"] is None
