"""agentdata validate on a file seeded with every kind of broken problem: each is found (and nothing else is),
the clean file holds exactly the sound problems and reads back as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentdata.errors import UserError
from agentdata.problems import load_problems
from agentdata.sandbox import Sandbox
from agentdata.steps import DedupConfig
from agentdata.validate import CHECKS, ValidateConfig, validate
from tests.cli_helpers import run_cli

LONG = (
    "A farmer plants apple trees in straight rows across a wide valley, each row holding exactly the same number "
    "of trees, and after counting the rows twice she finds there are seventeen rows with nine trees in each row. "
    "How many apple trees did she plant?"
)
BENCHMARK = (
    "Every morning a baker bakes loaves of rye bread in a stone oven that holds twelve loaves at once and he runs "
    "the oven four times before sunrise. How many loaves does he bake?"
)


def code_tests(cases: list[tuple[str, str]]) -> str:
    return json.dumps({"tests": [{"input": given, "output": out, "testtype": "stdin"} for given, out in cases]})


DOUBLING = code_tests([("3\n", "6\n"), ("5\n", "10\n")])
ROWS = [
    # sound problems
    {"question": "What is 6 times 7?", "answer": "42"},
    {"question": LONG, "answer": "153"},
    {
        "question": "Read n and print twice n.",
        "answer": DOUBLING,
        "domain": "code",
        "solution": "print(int(input()) * 2)",
    },
    {"question": "Which is a prime?\nA) 4\nB) 6\nC) 7\nD) 9", "answer": "C"},
    # broken ones, one kind each (the comment names what must be found)
    {"question": "What is the answer to this one?", "answer": None},  # unreadable
    {"question": "What is a half of one?", "answer": "\\frac{1}{"},  # gold_unparseable
    {"question": "Check the worked line 3 \\times 4 = \\boxed{12} and give the product.", "answer": "12"},  # trivial
    {"question": "Which is even?\nA) 3\nB) 5\nC) 8\nD) 9", "answer": "E"},  # choice_not_listed
    {"question": "Read n and print nothing.", "answer": code_tests([("3\n", "")]), "domain": "code"},  # empty passes
    {
        "question": "Read n and print n squared.",
        "answer": code_tests([("3\n", "9\n"), ("4\n", "16\n")]),
        "domain": "code",
        "solution": "print(int(input()) + 6)",  # right for 3, wrong for 4: reference_fails
    },
    {"question": "what is  6 TIMES 7?", "answer": "42"},  # duplicate of row 1
    {"question": LONG.replace("wide valley", "broad valley"), "answer": "153"},  # near_duplicate of row 2
    {"question": BENCHMARK, "answer": "48"},  # contaminated
    {
        "question": "Write double(n), with the help of a library.",
        "answer": json.dumps(
            {
                "tests": [{"input": "assert double(3) == 6", "output": "", "testtype": "check"}],
                "libs": ["agentdata_no_such_library"],
            }
        ),
        "domain": "code",
    },  # ungradable: the sandbox lacks the library
]
EXPECTED = {
    5: ["unreadable"],
    6: ["gold_unparseable"],
    7: ["trivial_gold"],
    8: ["choice_not_listed"],
    9: ["empty_program_passes"],
    10: ["reference_fails"],
    11: ["duplicate"],
    12: ["near_duplicate"],
    13: ["contaminated"],
    14: ["ungradable"],
}


@pytest.fixture()
def seeded(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": BENCHMARK, "answer": "48"}) + "\n")
    return path


def test_every_kind_of_broken_problem_is_found_and_the_rest_is_clean(seeded, tmp_path):
    config = ValidateConfig(dedup=DedupConfig(decontam_files=[str(tmp_path / "bench.jsonl")]))
    result = validate(seeded, tmp_path / "clean.jsonl", config)
    found = {problem["row"]: [finding["check"] for finding in problem["findings"]] for problem in result.broken}
    assert found == EXPECTED
    assert set(result.findings) == set(CHECKS) and result.clean == 4 and result.rows == len(ROWS)
    details = {problem["row"]: problem["findings"][0]["detail"] for problem in result.broken}
    assert "empty or missing answer" in details[5] and "the same question as row 1" in details[11]
    assert "passes 1/2 tests" in details[10] and "is graded correct" in details[7]
    clean = load_problems(tmp_path / "clean.jsonl")
    sound = tmp_path / "sound.jsonl"
    sound.write_text("".join(json.dumps(row) + "\n" for row in ROWS[:4]))
    assert [(p.id, p.question, p.answer, p.domain) for p in clean] == [
        (p.id, p.question, p.answer, p.domain) for p in load_problems(sound)
    ]
    report = json.loads((tmp_path / "clean.report.json").read_text())
    assert report["findings"] == result.findings and report["broken"] == 10
    assert "missing libraries: agentdata_no_such_library" in details[14]


def test_a_file_wide_mistake_is_still_one_error(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"text": "no question column"}) + "\n")
    with pytest.raises(UserError, match="question"):
        validate(path, tmp_path / "clean.jsonl")


def test_the_command_line(seeded, tmp_path, capsys):
    code = run_cli(["validate", str(seeded), "--decontam", str(tmp_path / "bench.jsonl"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["clean"] == 4 and summary["clean_file"] == str(tmp_path / "problems.clean.jsonl")
    code = run_cli(["validate", str(seeded), "--near-dup-threshold", "0"])
    out, err = capsys.readouterr()
    assert code == 0 and "near_duplicate" not in out and "choice_not_listed" in out
    code = run_cli(["validate", str(seeded), "--out", str(seeded)])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--out", "same.json", "--report", "same.json"], "--report same.json is also --out same.json"),
        (["--out", "clean.jsonl", "--report", "clean.report.json", "--decontam", "clean.report.json"], "is the input"),
        (["--report", "keep.json", "--decontam", "keep.json"], "--report keep.json is the input keep.json"),
    ],
)
def test_outputs_naming_each_other_or_an_input_are_refused_before_any_work(
    seeded, tmp_path, monkeypatch, capsys, flags, message
):
    """Issue 41: the report was written over the clean problems, and over a --decontam benchmark."""
    monkeypatch.chdir(tmp_path)
    for name in ("same.json", "keep.json", "clean.report.json"):
        Path(name).write_text(json.dumps({"question": BENCHMARK, "answer": "48"}) + "\n")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert run_cli(["validate", str(seeded), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_a_rerun_with_no_clean_problem_leaves_no_earlier_clean_file_behind(tmp_path, capsys, suffix):
    """Issue 41: the old clean file stayed, so a later `collect P.clean.jsonl` ran the old problems."""
    problems, clean = tmp_path / "p.jsonl", tmp_path / f"p.clean{suffix}"
    problems.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]) + "\n")
    assert run_cli(["validate", str(problems), "--out", str(clean)]) == 0
    assert len(load_problems(clean)) == 2
    capsys.readouterr()
    problems.write_text("".join(json.dumps({**row, "answer": None}) + "\n" for row in ROWS[:2]))  # both broken
    assert run_cli(["validate", str(problems), "--out", str(clean), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["clean"] == 0 and summary["broken"] == 2 and summary["clean_file"] == str(clean)
    if suffix == ".parquet":
        assert pq.read_table(clean).num_rows == 0
    else:
        assert clean.read_text().strip() in ("", "[]")
    assert run_cli(["validate", str(problems), "--out", str(clean)]) == 0
    assert f"no problem is clean: {clean} is written empty" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------ code benchmarks: each keeps its reference its way

CODE_DATA = Path(__file__).parent / "data" / "code"
WRONG_BODY = "    return None\n"
WRONG_PROGRAM = "def nothing():\n    return None\n"
# Per benchmark file: the question's column, and the fields that make a copy's reference solution wrong. Left out
# for CI time (each of their runs costs seconds): KodCode's `solution`, the column tested above, and BigCodeBench's
# code_prompt + canonical_solution, read as HumanEval's is.
BROKEN_REFERENCES = {
    "humaneval.jsonl": ("prompt", {"canonical_solution": WRONG_BODY}),
    "mbpp.jsonl": ("text", {"code": WRONG_PROGRAM}),
    "mbppplus.jsonl": ("prompt", {"code": WRONG_PROGRAM}),
    # the right program first, in C++'s slot: only the Python 3 one (wrong) may be run
    "codecontests.parquet": ("description", {"solutions": None}),
    # EvalPlus's tests expect what its canonical solution returns: one that crashes judges no program
    "humanevalplus_release.jsonl": ("prompt", {"canonical_solution": "    raise RuntimeError('broken')\n"}),
}


@pytest.fixture(scope="module")
def code_sandbox():
    with Sandbox(workers=4, prefork=2, timeout_s=60) as box:
        yield box


def rows_of(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(BROKEN_REFERENCES))
def test_each_code_benchmark_reference_is_found_where_it_keeps_it(name, code_sandbox, tmp_path):
    """The benchmark's own rows pass (their reference solutions are read and pass their tests; an empty program
    passes none), and a copy whose reference was made wrong is found as reference_fails: so the reference was
    read, from the benchmark's own column, and run as the benchmark's harness runs a program."""
    rows = rows_of(CODE_DATA / name)[:1]
    column, broken = BROKEN_REFERENCES[name]
    copy = {**rows[0], **broken, column: "# a copy\n" + rows[0][column]}
    copy.update({key: f"{copy[key]}-copy" for key in ("task_id", "name", "question_id") if key in copy})
    if name == "codecontests.parquet":
        right = rows[0]["solutions"]["solution"][0]
        copy["solutions"] = {"language": [2, 3], "solution": [right, "print(0)\n"]}
    path = tmp_path / name
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist([*rows, copy]), path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in [*rows, copy]))
    config = ValidateConfig(dedup=DedupConfig(near_dup_threshold=0))
    result = validate(path, tmp_path / "clean.jsonl", config, sandbox=code_sandbox)
    found = {problem["row"]: [finding["check"] for finding in problem["findings"]] for problem in result.broken}
    assert found == {len(rows) + 1: ["reference_fails"]}
    assert result.clean == len(rows)
