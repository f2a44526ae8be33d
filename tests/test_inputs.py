"""The one input reader (agentdata/inputs.py), the output-path check (agentdata/outputs.py) and the
CLI's error mapping: each rule of docs/input-files.md, one test each."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentdata.errors import InputFileError, UserError
from agentdata.inputs import read_nonempty_rows
from agentdata.outputs import check_output_dir, check_output_file
from agentdata.problems import load_problems
from agentdata.records import Trajectory, to_row, write_records
from tests.cli_helpers import run_cli
from tests.test_records import make_trajectory

TEXT = {
    ".jsonl": '{"question": "Qu\'est-ce que é?", "answer": "1"}\n',
    ".json": '[{"question": "é?", "answer": "1"}]',
    ".csv": "question,answer\né?,1\n",
}


@pytest.mark.parametrize("suffix", sorted(TEXT))
def test_latin1_is_refused_naming_line_and_byte(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    path.write_bytes(TEXT[suffix].encode("latin-1"))
    with pytest.raises(InputFileError, match=r"not UTF-8 text \(byte 0xE9 at line \d, column \d+\); save it as UTF-8"):
        load_problems(path)


@pytest.mark.parametrize("suffix", sorted(TEXT))
def test_utf8_byte_order_mark_is_dropped(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + TEXT[suffix].encode("utf-8"))
    assert load_problems(path)[0].answer == "1"


@pytest.mark.parametrize("suffix", sorted(TEXT))
def test_utf16_is_refused_by_name(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    path.write_bytes(TEXT[suffix].encode("utf-16"))
    with pytest.raises(InputFileError, match="UTF-16 text"):
        load_problems(path)


def test_csv_row_with_more_fields_than_the_header(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("question,answer\nQ1,1\nQ2,2,surplus\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="row 2: 1 more field"):
        load_problems(path)


def test_csv_field_longer_than_the_csv_module_default(tmp_path):
    path = tmp_path / "p.csv"
    question = "x" * 300_000  # csv's default limit is 131,072 characters
    path.write_text(f"question,answer\n{question},1\n", encoding="utf-8")
    assert load_problems(path)[0].question == question


def test_unpaired_surrogate_escape_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"question": "ok"}\n{"question": "half \\ud800 pair", "answer": "1"}\n', encoding="utf-8")
    with pytest.raises(InputFileError, match="row 2: .*surrogate"):
        read_nonempty_rows(path)


def test_json_nested_too_deeply(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(InputFileError, match="nested too deeply"):
        load_problems(path)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("num_tool_calls", "three", "row 2: field 'num_tool_calls' should be int, got str"),
        ("messages", ["not a message"], "row 2: field 'messages' should be a list of message objects"),
        ("metadata", "{not json", "row 2: field 'metadata' is not valid JSON"),
        ("finish_reason", "exploded", "row 2: not a trajectory: finish_reason"),
    ],
)
def test_inspect_names_the_row_and_field_of_a_bad_trajectory(tmp_path, capsys, field, value, message):
    rows = [to_row(make_trajectory(0)), {**to_row(make_trajectory(1)), field: value}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert run_cli(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_inspect_on_a_cut_parquet_file(tmp_path, capsys):
    path = write_records([make_trajectory(0)], tmp_path / "t.parquet", Trajectory)
    path.write_bytes(path.read_bytes()[:100])
    assert run_cli(["inspect", str(path)]) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err


def test_curate_names_the_shard_whose_data_is_damaged(tmp_path, capsys):
    good = write_records([make_trajectory(0)], tmp_path / "a.parquet", Trajectory)
    bad = write_records([make_trajectory(1)], tmp_path / "b.parquet", Trajectory)
    data = bytearray(bad.read_bytes())
    data[4:200] = b"\xff" * 196  # the column pages, not the footer: the schema still reads
    bad.write_bytes(bytes(data))
    assert pq.read_schema(bad).names
    assert run_cli(["curate", str(good), str(bad), "--out", str(tmp_path / "sft.parquet")]) == 2
    assert f"{bad}: damaged Parquet data" in capsys.readouterr().err


def test_curate_refuses_a_shard_with_a_column_of_another_type(tmp_path, capsys):
    rows = [{**to_row(make_trajectory(0)), "num_tool_calls": "1"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    assert run_cli(["curate", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "sft.parquet")]) == 2
    assert "column 'num_tool_calls' is string, expected int64" in capsys.readouterr().err
    assert not (tmp_path / "sft.parquet").exists()


# --------------------------------------------------------------------------- outputs


def test_output_file_checks(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="--out .*folder is a folder"):
        check_output_file(tmp_path / "folder", "--out", (".parquet",))
    with pytest.raises(UserError, match=r"expected a file name ending in \.parquet"):
        check_output_file(tmp_path / "x.csv", "--out", (".parquet",))
    with pytest.raises(UserError, match="file is a file, so no folder can be made under it"):
        check_output_file(tmp_path / "file" / "deeper" / "x.parquet", "--out", (".parquet",))
    assert check_output_file(tmp_path / "new" / "x.parquet", "--out", (".parquet",)).name == "x.parquet"


def test_output_dir_checks(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="--trajectories .*file is a file"):
        check_output_dir(tmp_path / "file", "--trajectories")
    assert check_output_dir(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"


@pytest.mark.parametrize(
    "args",
    [
        ["curate", "RUN", "--out", "{tmp}"],
        ["synth", "problems", "--out", "{tmp}"],
        ["synth", "problems", "--out", "{tmp}/x.csv"],
        ["synth", "stitch", "S.jsonl", "--out", "{tmp}"],
        ["synth", "stitch", "S.jsonl", "--trajectories", "{tmp}/afile"],
        ["collect", "--out", "{tmp}/afile"],
        ["eval", "smollm2", "B.jsonl", "--out", "{tmp}/afile/x"],
    ],
)
def test_every_command_checks_its_output_path_first(tmp_path, capsys, args):
    (tmp_path / "afile").write_text("x")
    assert run_cli([arg.format(tmp=tmp_path) for arg in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --") and len(err.strip().splitlines()) == 1


def test_synth_problems_json_output_is_a_json_list_that_loads(tmp_path):
    out = tmp_path / "p.json"
    assert run_cli(["synth", "problems", "--n", "3", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())) == 3 and len(load_problems(out)) == 3


# --------------------------------------------------------------------------- CLI error mapping


def test_unexpected_error_is_one_line_naming_a_log_in_the_output_folder(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something inside broke")

    monkeypatch.setattr("agentdata.synth.generators.generate_problems", broken)
    assert run_cli(["synth", "problems", "--out", str(tmp_path / "out" / "p.jsonl")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "unexpected RuntimeError: something inside broke" in err
    log = next((tmp_path / "out").glob("agentdata-error-*.log"))
    assert str(log) in err and "Traceback" in log.read_text() and "something inside broke" in log.read_text()


def test_bad_flag_value_is_one_line(capsys):
    assert run_cli(["collect", "--temperature", "warm"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--temperature" in err and "agentdata collect --help" in err


def test_rich_markup_in_a_message_is_printed_as_is(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"[/bold]": "Q?"}) + "\n", encoding="utf-8")
    assert run_cli(["inspect", str(path)]) == 2
    assert "[/bold]" in capsys.readouterr().err


# --------------------------------------------------------------------------- services and bounds


def test_dead_sandbox_url_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    def no_engine(*args, **kwargs):
        raise AssertionError("the engine was loaded before the sandbox was checked")

    monkeypatch.setattr("agentdata.engines.load_engine", no_engine)
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": "Q?", "answer": "1"}) + "\n", encoding="utf-8")
    code = run_cli(["collect", str(problems), "--sandbox", "http://127.0.0.1:9", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "sandbox http://127.0.0.1:9: cannot be reached" in err


def test_stitch_with_a_dead_sandbox_url_is_one_line(tmp_path, capsys):
    solutions = tmp_path / "s.jsonl"
    solutions.write_text(json.dumps({"question": "Q?", "solution": "1 + 1 = 2", "answer": "2"}) + "\n")
    code = run_cli(
        ["synth", "stitch", str(solutions), "--sandbox", "http://127.0.0.1:9", "--out", str(tmp_path / "s.parquet")]
    )
    assert code == 2 and "cannot be reached" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,message",
    [
        (["collect", "--samples", str(10**23)], f"--samples {10**23}: must be in [1, 100000]"),
        (["synth", "problems", "--n", "100000000"], "--n 100000000: must be in [1, 1000000]"),
        (["eval", "smollm2", "B.jsonl", "--k", str(10**9)], f"--k {10**9}: must be in [1, 100000]"),
    ],
)
def test_work_that_cannot_finish_is_refused(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert run_cli(args) == 2
    assert message in capsys.readouterr().err


def test_too_many_trajectories_in_one_run_are_refused(tmp_path, monkeypatch):
    from agentdata.agent import runner
    from agentdata.agent.config import CollectConfig

    monkeypatch.setattr(runner, "MAX_TRAJECTORIES", 10)
    problems = load_problems(_problems_file(tmp_path, 3))
    with pytest.raises(UserError, match="3 problems × 4 samples is more than one run takes"):
        runner.collect(problems, tmp_path / "run", CollectConfig(samples=4))


def _problems_file(tmp_path, count):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"question": f"Q{i}?", "answer": "1"}) + "\n" for i in range(count)))
    return path


def test_a_name_too_long_for_the_system_is_one_line_naming_the_flag(tmp_path, capsys):
    assert run_cli(["synth", "problems", "--n", "2", "--out", str(tmp_path / ("x" * 300 + ".jsonl"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "File name too long" in err and len(err.strip().splitlines()) == 1


def test_a_write_the_system_refuses_is_one_line_not_a_crash(tmp_path, capsys, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "p.jsonl"))

    monkeypatch.setattr("agentdata.records.atomic_write", refused)
    assert run_cli(["synth", "problems", "--n", "2", "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "p.jsonl: Permission denied" in err and "unexpected" not in err and len(err.strip().splitlines()) == 1
