"""collect, filter and eval --report-to (filter's report_to=): their summary's numbers and a table of sampled
trajectories in each tracker, written offline and read back with the tracker's own reader (training/trackers.py).

The commands run for real on test_cli_results' plug-in engine (it adds the two numbers of a question,
wrong the first time it sees one and right after: with k=2 every pass rate is 0.5).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agentdata.training.trackers import sample_trajectories, summary_scalars
from tests.cli_helpers import run_cli
from tests.test_cli_results import ADDER, problems_file


@pytest.fixture
def setup(tmp_path, monkeypatch):
    for name in ("TENSORBOARD_LOGGING_DIR", "WANDB_PROJECT", "WANDB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "adder.py").write_text(ADDER)
    return tmp_path, f"{tmp_path / 'adder.py'}:Adder", problems_file(tmp_path / "problems.jsonl", range(1, 4))


@pytest.fixture
def trackio_store(tmp_path, monkeypatch):
    """trackio's local store in tmp_path. trackio reads TRACKIO_DIR once, at import, into module constants
    (utils.TRACKIO_DIR, MEDIA_DIR, ...; copied by name into other modules): set for its first import, and
    for a later test each loaded module's copy, so nothing reaches ~/.cache/huggingface/trackio."""
    pytest.importorskip("trackio")
    store = tmp_path / "trackio"
    monkeypatch.setenv("TRACKIO_DIR", str(store))
    import trackio  # noqa: F401  (its first import reads the variable)

    paths = {"TRACKIO_DIR": store, "MEDIA_DIR": store / "media", "ARTIFACTS_DIR": store / "artifacts"}
    for name, module in list(sys.modules.items()):
        for constant, path in paths.items():
            if name.startswith("trackio") and isinstance(getattr(module, constant, None), Path):
                monkeypatch.setattr(module, constant, path)
    return store


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """wandb offline, its files under tmp_path/wandb. Its process-wide settings are read once (wandb.setup):
    torn down before and after, so each test's WANDB_DIR is read afresh."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    wandb.teardown()
    yield tmp_path / "wandb"
    wandb.teardown()


def run_commands(tmp_path, engine, problems, capsys, *tracking):
    """collect, filter and eval with `tracking` overrides (report_to= is a flag of collect and eval, not of
    filter); each one's --json document."""
    benchmark = problems_file(tmp_path / "bench.jsonl", range(10, 13))
    # questions the engine has not seen (it is right from the second time on): every pass rate is 0.5
    pool_problems = problems_file(tmp_path / "pool_problems.jsonl", range(4, 7))
    commands = {
        "collect": ["collect", str(problems), "--teacher", engine, "--samples", "2", "--out", str(tmp_path / "run")],
        "filter": ["filter", str(pool_problems), "--student", engine, "--k", "2", "--out", str(tmp_path / "pool")],
        "eval": ["eval", f"adder={engine}", str(benchmark), "--k", "2", "--out", str(tmp_path / "eval")],
    }
    documents = {}
    for name, args in commands.items():
        code = run_cli([*args, *tracking, "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        documents[name] = json.loads(captured.out)  # the trackers' chatter never reaches stdout
    return documents


def tensorboard_run(folder: Path):
    """Scalars and texts of the TensorBoard run in `folder`, read with tensorboard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
    texts = {  # add_text's tag is TAG/text_summary
        tag.removesuffix("/text_summary"): events.Tensors(tag)[-1].tensor_proto.string_val[0].decode()
        for tag in events.Tags()["tensors"]
    }
    return scalars, texts


def test_each_command_logs_its_summary_and_sampled_trajectories_to_tensorboard(setup, capsys):
    pytest.importorskip("tensorboard")
    tmp_path, engine, problems = setup
    documents = run_commands(tmp_path, engine, problems, capsys, "report_to=tensorboard")
    scalars, texts = tensorboard_run(tmp_path / "run.tensorboard")  # beside the run dir, never in it
    assert scalars["collect/total"] == 6 and scalars["collect/accuracy"] == pytest.approx(0.5)
    assert scalars["collect/finish_reasons/answer"] == 6 and texts["collect/run_name"] == "run-collect"
    table = texts["collect/trajectories"].splitlines()
    assert table[0] == "| question | conversation | tool_calls | num_tool_calls | verdict | model | source |"
    assert len(table) == 2 + 6 and sum("| correct |" in row for row in table) == 3
    assert any("What is 1 + 2?" in row for row in table)

    scalars, texts = tensorboard_run(tmp_path / "pool.tensorboard")  # beside the dataset folder: not on the Hub
    assert (scalars["filter/problems"], scalars["filter/selected"]) == (3, documents["filter"]["selected"])
    assert len(texts["filter/trajectories"].splitlines()) == 2 + 6  # the student's profile
    assert not any(path.name.endswith("tensorboard") for path in (tmp_path / "pool").iterdir())

    scalars, texts = tensorboard_run(tmp_path / "eval.tensorboard")
    (result,) = documents["eval"]["results"]
    assert scalars["eval/adder/bench/tools-4/avg@2"] == pytest.approx(result["avg@2"]) == pytest.approx(0.5)
    assert scalars["eval/adder/bench/tools-4/pass@k/2"] == pytest.approx(result["pass@k"]["2"])
    assert "What is 10 + 11?" in texts["eval/trajectories"]


def test_one_logging_dir_holds_every_command_as_one_tensorboard_run(setup, capsys, monkeypatch):
    pytest.importorskip("tensorboard")
    tmp_path, engine, problems = setup
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb" / "shared"))  # as train's integration reads it
    run_commands(tmp_path, engine, problems, capsys, "report_to=tensorboard", "run_name=shared")
    scalars, texts = tensorboard_run(tmp_path / "tb" / "shared")
    assert {"collect/total", "filter/selected", "eval/adder/bench/tools-4/avg@2"} <= set(scalars)
    assert {texts[f"{name}/run_name"] for name in ("collect", "filter", "eval")} == {"shared"}


def test_trackio_local_store_holds_every_command_in_one_run(setup, capsys, trackio_store):
    from trackio.sqlite_storage import SQLiteStorage

    tmp_path, engine, problems = setup

    run_commands(tmp_path, engine, problems, capsys, "report_to=trackio", "run_name=shared")
    assert SQLiteStorage.get_runs("huggingface") == ["shared"]  # TRL's default project, the one run
    logs = SQLiteStorage.get_logs("huggingface", "shared")
    values = {key: value for log in logs for key, value in log.items()}
    assert values["collect/total"] == 6 and values["filter/problems"] == 3
    assert values["eval/adder/bench/tools-4/avg@2"] == pytest.approx(0.5)
    table = values["collect/trajectories"]
    assert table["_type"] == "trackio.table" and len(table["_value"]) == 6
    assert {row["verdict"] for row in table["_value"]} == {"correct", "wrong"}
    assert json.loads(table["_value"][0]["conversation"])[-1]["role"] == "assistant"


def wandb_records(run_dir: Path) -> list:
    """The protobuf records of an offline run's `.wandb` file (a LevelDB-style log of wandb's own Record
    messages: 32 KiB blocks, each chunk with a 7-byte header), parsed with wandb's own proto module."""
    import struct

    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("run-*.wandb")
    data, position, pending, records = path.read_bytes(), 7, b"", []  # 7: the file's own header
    while position + 7 <= len(data):
        left = 32768 - position % 32768
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_wandb_offline_run_files_hold_the_summary_and_the_table(setup, capsys, monkeypatch, wandb_offline):
    tmp_path, engine, problems = setup
    monkeypatch.setenv("WANDB_PROJECT", "agentdata-test")
    collect = ["collect", str(problems), "--teacher", engine, "--samples", "2", "--out", str(tmp_path / "run")]
    code = run_cli([*collect, "--report-to", "wandb"]) + run_cli(collect)  # the resume, not reported: no second run
    assert code == 0
    (run_dir,) = wandb_offline.glob("offline-run-*")
    records = wandb_records(run_dir)
    (run,) = [record.run for record in records if record.WhichOneof("record_type") == "run"]
    assert (run.display_name, run.project, run.job_type) == ("run-collect", "agentdata-test", "collect")
    history = {
        item.key or "/".join(item.nested_key): json.loads(item.value_json)
        for record in records
        if record.WhichOneof("record_type") == "history"
        for item in record.history.item
    }
    assert history["collect/total"] == 6 and history["collect/accuracy"] == pytest.approx(0.5)
    (table_file,) = (run_dir / "files" / "media" / "table" / "collect").glob("trajectories_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"][:2] == ["question", "conversation"] and len(table["data"]) == 6


def test_a_tracker_that_cannot_be_logged_to_is_one_line_before_any_work(setup, capsys, monkeypatch):
    tmp_path, engine, problems = setup
    out = tmp_path / "run"
    code = run_cli(["collect", str(problems), "--teacher", engine, "--out", str(out), "--report-to", "mlflow"])
    error = capsys.readouterr().err
    assert code == 2 and "collect --report-to mlflow" in error and "train's only" in error and not out.exists()
    code = run_cli(["filter", str(problems), "--student", engine, "--out", str(out / "pool"), "report_to=mlflow"])
    error = capsys.readouterr().err
    assert code == 2 and "filter report_to=mlflow: " in error and "--report-to" not in error and not out.exists()
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name))
    code = run_cli(["eval", engine, str(problems), "--out", str(tmp_path / "eval"), "--report-to", "wandb"])
    error = capsys.readouterr().err
    assert code == 2 and "the wandb package is not installed" in error and not (tmp_path / "eval").exists()


def test_the_sample_is_spread_over_the_shards_and_the_summary_keeps_its_numbers(setup, capsys):
    tmp_path, engine, problems = setup
    problems = problems_file(tmp_path / "many.jsonl", range(1, 21))
    args = ["collect", str(problems), "--teacher", engine, "--samples", "2", "shard_size=8"]
    assert run_cli([*args, "--out", str(tmp_path / "run")]) == 0
    sampled = sample_trajectories([tmp_path / "run"], 5)
    assert len(sampled) == 5 and len({t.question for t in sampled}) == 5
    assert sampled[0].question == "What is 1 + 2?" and sampled[-1].question != "What is 3 + 4?"  # not the first 5
    assert len(sample_trajectories([tmp_path / "run", tmp_path / "missing"], 5)) == 5
    assert summary_scalars({"a": 1, "b": {"c": 0.5, "d": "x", "e": [1]}, "f": True, "g": float("nan")}) == {
        "a": 1,
        "b/c": 0.5,
    }


def test_train_and_collect_with_one_run_name_are_one_trackio_run_and_wandb_reads_train_offline(
    setup, capsys, tiny_model_dir, trackio_store, wandb_offline
):
    from trackio.sqlite_storage import SQLiteStorage

    from agentdata.settings import build
    from agentdata.sft.config import SFTStageConfig
    from agentdata.sft.run import run_sft
    from tests.test_sft import write_sft_set

    tmp_path, engine, problems = setup
    sft = dict(sft_data=str(write_sft_set(tmp_path / "sft.jsonl", count=4)), out=str(tmp_path / "out"))
    settings = dict(model=f"hf:{tiny_model_dir}", max_steps=2, batch_size=2, logging_steps=1, max_length=512)
    run_sft(build(SFTStageConfig, {**sft, **settings, "report_to": ["trackio", "wandb"], "run_name": "first"}))
    import wandb

    wandb.finish()  # transformers leaves its wandb run open for the process's end: its last records come at finish
    collect = ["collect", str(problems), "--teacher", engine, "--samples", "2", "--out", str(tmp_path / "run")]
    assert run_cli([*collect, "--report-to", "trackio", "run_name=first"]) == 0

    assert SQLiteStorage.get_runs("huggingface") == ["first"]  # TRL's trackio callback and collect: one run
    assert (trackio_store / "huggingface.db").is_file()
    logs = SQLiteStorage.get_logs("huggingface", "first")
    losses = [log["train/loss"] for log in logs if "train/loss" in log]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    assert [log["collect/total"] for log in logs if "collect/total" in log] == [6]
    assert SQLiteStorage.get_run_config("huggingface", "first")["max_steps"] == 2  # train's effective settings

    (run_dir,) = wandb_offline.glob("offline-run-*")  # wandb through TRL's report_to, offline
    records = wandb_records(run_dir)
    (run,) = [record.run for record in records if record.WhichOneof("record_type") == "run"]
    history = [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        for record in records
        if record.WhichOneof("record_type") == "history"
    ]
    assert run.display_name == "first" and [step["train/loss"] for step in history if "train/loss" in step] == losses
