"""No command destroys what it reads: an output path that is an input (by name, a link or a hard link),
lies inside an input folder, or sits in a run dir's trajectories/ is refused before any work."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from agentdata.errors import UserError
from agentdata.outputs import check_output_dir, check_output_file
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

PROBLEM = {"question": "What is 6 * 7?", "answer": "42"}


def run_quietly(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(args)
    return code, err.getvalue()


def digest(path: Path) -> bytes:
    if path.is_dir():
        return b"".join(p.name.encode() + p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())
    return path.read_bytes()


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return write_run(tmp_path / "run", [trajectory(f"t{i}", problem_id=f"p{i}") for i in range(4)], per_shard=2)


@pytest.fixture
def problems(tmp_path) -> Path:
    path = tmp_path / "problems.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([PROBLEM]), path)
    return path


def refused(args: list[str], *watched: Path, says: str) -> None:
    before = [digest(path) for path in watched]
    code, err = run_quietly(args)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], err
    assert [digest(path) for path in watched] == before, "an input changed"


def test_curate_refuses_to_write_over_one_of_its_shards(run_dir):
    shard = run_dir / "trajectories" / "part-00000.parquet"
    refused(["curate", str(run_dir), "--out", str(shard)], run_dir, says="trajectories/ folder")
    refused(["curate", str(shard), "--out", str(shard)], run_dir, says="is the input")


def test_curate_refuses_any_file_in_a_run_dirs_trajectories_folder(run_dir, tmp_path):
    other = write_run(tmp_path / "other", [trajectory("o1")])
    for out in (run_dir / "trajectories" / "sft.parquet", other / "trajectories" / "sft.parquet"):
        refused(["curate", str(run_dir), "--out", str(out)], run_dir, other, says="trajectories/ folder")
    refused(["curate", str(run_dir), "--rejects", str(other / "trajectories" / "r.parquet")], other, says="--rejects")


def test_curate_may_write_beside_the_shards_of_its_run_dir(run_dir):
    code, err = run_quietly(["curate", str(run_dir), "--out", str(run_dir / "sft.parquet"), "--tool-calls", "0,8"])
    assert code == 0, err
    assert (run_dir / "sft.parquet").is_file()


def test_curate_refuses_its_journal_and_a_decontam_file_and_rejects_on_top_of_out(run_dir, tmp_path):
    (run_dir / "journal.jsonl").write_text('{"settings": {}}\n')
    refused(
        ["curate", str(run_dir), "--for", "openai", "--out", str(run_dir / "journal.jsonl")],
        run_dir,
        says="journal.jsonl of the input",
    )
    bench = tmp_path / "bench.parquet"
    bench.write_bytes((run_dir / "trajectories" / "part-00001.parquet").read_bytes())
    refused(["curate", str(run_dir), "--decontam", str(bench), "--out", str(bench)], bench, says="is the input")
    out = tmp_path / "sft.parquet"
    refused(["curate", str(run_dir), "--out", str(out), "--rejects", str(out)], run_dir, says="is also --out")


def test_filter_refuses_its_problems_as_the_pool(problems):
    refused(["filter", str(problems), "--out", str(problems)], problems, says="is the input")


def test_a_link_or_a_hard_link_to_an_input_is_that_input(problems, tmp_path):
    link = tmp_path / "link.parquet"
    link.symlink_to(problems)
    refused(["filter", str(problems), "--out", str(link)], problems, says="is the input")
    hard = tmp_path / "hard.parquet"
    os.link(problems, hard)
    refused(["filter", str(problems), "--out", str(hard)], problems, says="is the input")
    folder_link = tmp_path / "elsewhere"
    folder_link.symlink_to(tmp_path)
    refused(["filter", str(problems), "--out", str(folder_link / problems.name)], problems, says="is the input")


def test_outputs_inside_a_dataset_dir_input_are_refused(tmp_path):
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_list([PROBLEM]).save_to_disk(str(folder))
    refused(["filter", str(folder), "--out", str(folder / "pool.parquet")], folder, says="lies inside the input")
    refused(["collect", str(folder), "--out", str(folder / "run")], folder, says="lies inside the input")
    refused(["collect", str(folder), "--out", str(folder)], folder, says="is the input")


def test_synth_stitch_and_eval_refuse_their_inputs(tmp_path):
    solutions = tmp_path / "solutions.parquet"
    solutions.write_bytes(b"PAR1")
    refused(["synth", "stitch", str(solutions), "--out", str(solutions)], solutions, says="is the input")
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "b.jsonl").write_text(json.dumps(PROBLEM) + "\n")
    refused(["eval", "smollm2", str(bench), "--out", str(bench / "report")], bench, says="lies inside the input")


def test_an_output_folder_in_a_run_dirs_trajectories_is_refused(run_dir, problems):
    refused(["collect", str(problems), "--out", str(run_dir / "trajectories")], run_dir, says="trajectories/ folder")


def test_the_checks_as_a_library_call(run_dir, tmp_path):
    shard = run_dir / "trajectories" / "part-00000.parquet"
    with pytest.raises(UserError, match="--out .* is the input"):
        check_output_file(shard, "--out", (".parquet",), inputs=[shard])
    with pytest.raises(UserError, match="trajectories/ folder"):
        check_output_file(run_dir / "trajectories" / "new.parquet", "--out", (".parquet",))
    (tmp_path / "in").mkdir()
    with pytest.raises(UserError, match="lies inside the input"):
        check_output_dir(tmp_path / "in" / "out", "--out", inputs=[tmp_path / "in", None])
    # an input that does not exist yet, or an output beside the inputs, is fine
    assert check_output_file(tmp_path / "pool.parquet", "--out", (".parquet",), inputs=[tmp_path / "none.jsonl"])
    assert check_output_dir(tmp_path / "next", "--out", inputs=[shard, run_dir])


def test_train_never_writes_over_the_weights_or_data_it_reads(tiny_model_dir, tmp_path):
    refused(
        ["train", "--stage", "rl", "--model", f"hf:{tiny_model_dir}", "--out", str(tiny_model_dir)],
        tiny_model_dir,
        says="is the input",
    )
    import datasets

    problems = tmp_path / "saved"
    datasets.Dataset.from_list([PROBLEM]).save_to_disk(str(problems))
    refused(
        ["train", "--stage", "rl", "--model", f"hf:{tiny_model_dir}", "--rl-problems", str(problems),
         "--out", str(problems / "run")],
        problems,
        says="lies inside the input",
    )  # fmt: skip


def test_an_input_inside_an_output_folder_is_refused(tmp_path):
    # collect writes its run dir whole: a problems file named like one of its files was replaced by stats.json
    folder = tmp_path / "d"
    folder.mkdir()
    problems = folder / "stats.json"
    problems.write_text(json.dumps([PROBLEM]))
    refused(["collect", str(problems), "--out", str(folder)], problems, says="lies inside it")
    # eval writes report.json, its plots and runs/ in its --out: a benchmark there is refused, one beside them is not
    report = tmp_path / "report"
    bench = report / "report.json"
    report.mkdir()
    bench.write_text(json.dumps([PROBLEM]))
    refused(["eval", "smollm2", str(bench), "--out", str(report)], bench, says="where it writes report.json")
    from agentdata.evaluation.runner import OUT_NAMES

    beside = report / "aime.jsonl"
    beside.write_text(json.dumps(PROBLEM) + "\n")
    assert check_output_dir(report, "--out", [beside], OUT_NAMES)


def test_an_input_where_a_companion_of_the_output_is_written_is_refused(tmp_path):
    # filter writes POOL.rejects.parquet, POOL.pass_rate.png and POOL.report.json beside --out POOL.parquet
    rejects = tmp_path / "pool.rejects.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([PROBLEM]), rejects)
    out = tmp_path / "pool.parquet"
    refused(["filter", str(rejects), "--out", str(out)], rejects, says="writes pool.rejects.parquet beside it")
    report = tmp_path / "sft.report.json"
    report.write_text("{}")
    with pytest.raises(UserError, match="writes sft.report.json beside it"):
        check_output_file(tmp_path / "sft.parquet", "--out", (".parquet",), inputs=[report])


def test_train_refuses_an_input_where_it_writes_in_out_and_takes_one_beside(tmp_path):
    from agentdata.train import TrainRequest
    from agentdata.train.run import plan_inputs, plan_train, train_writes

    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    inside = out / "checkpoints" / "p.jsonl"  # SFT's and GRPO's checkpoints go there
    inside.write_text(json.dumps(PROBLEM) + "\n")
    refused(["train", "--stage", "rl", "--rl-problems", str(inside), "--out", str(out)], inside, says="checkpoints")
    profiled = out / "pool.parquet"  # the profile of --rl-problems is written there
    profiled.write_text(json.dumps(PROBLEM) + "\n")
    refused(["train", "--rl-problems", str(profiled), "--out", str(out)], profiled, says="where it writes pool.parquet")
    # a pool given beside the stage folders is read, never written: fine
    plan = plan_train(TrainRequest(out=out, settings={"rl_pool": str(profiled)}))
    assert "pool.parquet" not in train_writes(plan)
    assert check_output_dir(out, "--out", plan_inputs(plan), train_writes(plan))
