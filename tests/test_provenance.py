"""Dataset cards and provenance: every SFT set and pool is written with a card the Hub and `datasets` read, the
same record in its Parquet metadata, `inspect` shows it, and its command rebuilds the same rows."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from agentdata.agent.config import CollectConfig
from agentdata.agent.rundir import RunDir
from agentdata.errors import UserError
from agentdata.filter.build import PoolConfig
from agentdata.filter.profile import profile_dir_for
from agentdata.filter.run import run_filter
from agentdata.inputs import read_rows
from agentdata.publish.card import check_card, size_category
from agentdata.publish.provenance import PROVENANCE_KEY, read_provenance
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.test_filter import crafted_problems, write_profile

TEACHER_SETTINGS = {"teacher": "hf:teacher-dir", "protocol": "hermes", "temperature": 0.7, "seed": 0}


def made_run(folder: Path, rows: int = 8, teacher: str = "hf:teacher-dir") -> Path:
    """A run dir as collect leaves it: shards and a manifest recording the teacher, versions and fingerprint."""
    trajectories = [
        trajectory(
            f"{folder.name}-{i}",
            problem_id=f"{folder.name}-p{i}",
            question=f"In {folder.name}: what is {i} times {i + 3}? " * 3,
        )
        for i in range(rows)
    ]
    trajectories[0].correct = False  # dropped as `incorrect`: the card's drop report counts it
    write_run(folder, trajectories)
    RunDir(folder).write_manifest(
        {
            "settings": {**TEACHER_SETTINGS, "teacher": teacher},
            "agentdata_version": "0.1.0",
            "versions": {"math-verify": "0.9.0"},
            "model_fingerprint": "abc123",
        }
    )
    return folder


def test_a_curated_folder_loads_in_datasets_and_its_card_passes_the_hubs_readers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run_a"))
    made_run(Path("run_b"), rows=4, teacher="openai:http://127.0.0.1:1")
    assert run_cli(["curate", "run_a", "run_b", "--out", "sft", "--license", "apache-2.0"]) == 0
    assert sorted(p.name for p in Path("sft").iterdir()) == ["README.md", "data"]  # the report stays beside it
    assert Path("sft.report.json").is_file()

    loaded = datasets.load_dataset("sft", split="train")  # as it is: no data_files, no builder name
    written = pq.read_table("sft/data/train.parquet")
    assert loaded.num_rows == written.num_rows == 10  # 12 trajectories, one incorrect in each run
    assert loaded[0]["messages"] == written.slice(0, 1).to_pylist()[0]["messages"]

    card = check_card("sft/README.md")
    assert card.data.license == "apache-2.0" and card.data.size_categories == ["n<1K"]
    assert "text-generation" in card.data.task_categories
    assert card.data.configs[0]["data_files"][0]["path"] == "data/train.parquet"
    features = card.data.dataset_info["features"]
    assert [feature["name"] for feature in features][:2] == ["messages", "tools"]
    assert datasets.Features.from_arrow_schema(written.schema) == datasets.load_dataset("sft", split="train").features

    record = read_provenance("sft")
    assert record == json.loads(pq.read_metadata("sft/data/train.parquet").metadata[PROVENANCE_KEY.encode()])
    by_path = {source["path"]: source for source in record["sources"]}
    assert by_path["run_a"]["teacher"] == "hf:teacher-dir" and by_path["run_a"]["protocol"] == "hermes"
    assert by_path["run_a"]["model_fingerprint"] == "abc123" and by_path["run_a"]["versions"]["math-verify"]
    assert (by_path["run_a"]["rows"], by_path["run_a"]["kept"]) == (8, 7)
    assert (by_path["run_b"]["rows"], by_path["run_b"]["kept"]) == (4, 3)
    assert record["dropped"]["dropped_incorrect"] == 2
    assert record["counts"]["by_source"] == {"math": 10}
    assert record["settings"]["publish"]["license"] == "apache-2.0"
    text = Path("sft/README.md").read_text()
    assert record["command"] in text and "openai:http://127.0.0.1:1" in text and "| dropped_incorrect | 2 |" in text


def test_the_cards_command_rebuilds_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft", "--max-per-problem", "2", "--keep-incorrect"]) == 0
    command = DatasetCard.load("sft/README.md").text.split("```bash\n")[1].split("\n```")[0]
    assert command == read_provenance("sft")["command"]
    shutil.move("sft", "first")
    arguments = shlex.split(command)
    assert arguments[0] == "agentdata"
    assert run_cli(arguments[1:]) == 0
    first, again = pq.read_table("first/data/train.parquet"), pq.read_table("sft/data/train.parquet")
    assert again.num_rows == 8 and again.to_pylist() == first.to_pylist()
    assert read_provenance("sft")["settings"] == read_provenance("first")["settings"]


def test_a_file_keeps_its_old_form_with_the_card_beside_it_and_both_forms_read_alike(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft.parquet"]) == 0
    assert run_cli(["curate", "run", "--out", "folder"]) == 0
    card = check_card("sft.README.md")  # the card of the file form names the file beside it
    assert card.data.configs[0]["data_files"][0]["path"] == "sft.parquet" and card.data.license == "unknown"
    assert read_provenance("sft.parquet")["stage"] == "curate"
    # train --sft-data, --rl-pool and every other reader go through inputs.read_rows: a folder reads as its file
    assert list(read_rows("folder")) == list(read_rows("sft.parquet"))


def test_a_folder_of_other_files_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    Path("notes").mkdir()
    (Path("notes") / "mine.txt").write_text("keep me")
    assert run_cli(["curate", "run", "--out", "notes"]) == 2
    assert "holding other files" in capsys.readouterr().err
    assert sorted(p.name for p in Path("notes").iterdir()) == ["mine.txt"] and not Path("notes.report.json").exists()


def test_inspect_shows_an_sft_sets_provenance(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft"]) == 0
    capsys.readouterr()
    assert run_cli(["inspect", "sft", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "sft set" and shown["rows"] == 7
    assert shown["provenance"]["sources"][0]["teacher"] == "hf:teacher-dir"
    assert run_cli(["inspect", "sft/data/train.parquet"]) == 0
    out = capsys.readouterr().out
    assert "provenance" in out and "agentdata curate run --out sft" in out


def test_a_pools_folder_records_its_band_and_profile(tmp_path):
    problems = crafted_problems(2)
    out = tmp_path / "pool"
    write_profile(profile_dir_for(out, CollectConfig(samples=4)), problems, 4, [0, 1, 2, 3, 4, 2])
    run = run_filter(problems, out, PoolConfig(embedding="tfidf", band=(0.2, 0.8)), CollectConfig(samples=4))
    assert run.card == out / "README.md" and (tmp_path / "pool.report.json").is_file()
    card = check_card(run.card)
    assert card.data.size_categories == [size_category(4)] and "question-answering" in card.data.task_categories
    assert datasets.load_dataset(str(out), split="train").num_rows == 4
    record = read_provenance(out)
    assert record["stage"] == "filter" and record["band"] == "0.2,0.8"
    assert record["profile"]["k"] == 4 and record["dropped"]["dropped_out_of_band"] == 2
    assert "Pass-rate band and profile" in run.card.read_text()
    assert len(list(read_rows(out))) == 4  # train --rl-pool DIR reads it


def test_check_card_refuses_what_the_hub_would(tmp_path):
    (tmp_path / "data").mkdir()
    pq.write_table(pq.read_table(_tiny_parquet(tmp_path)), tmp_path / "data" / "train.parquet")
    good = "---\nlicense: mit\nsize_categories:\n- n<1K\nconfigs:\n- config_name: default\n  data_files:\n"
    card = tmp_path / "README.md"
    card.write_text(good + "  - split: train\n    path: data/train.parquet\n---\n# a set\n")
    check_card(card)
    card.write_text(good + "  - split: train\n    path: data/missing.parquet\n---\n")
    with pytest.raises(UserError, match="missing.parquet, which is not there"):
        check_card(card)
    card.write_text("---\n- just\n- a list\n---\n")
    with pytest.raises(UserError, match="not a dataset card"):
        check_card(card)
    card.write_text(good.replace("license: mit\n", "") + "  - split: train\n    path: data/train.parquet\n---\n")
    with pytest.raises(UserError, match="no size_categories or license"):
        check_card(card)


def _tiny_parquet(folder: Path) -> Path:
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1, 2]}), folder / "tiny.parquet")
    return folder / "tiny.parquet"


def test_size_categories_follow_the_hubs_bounds():
    assert [size_category(n) for n in (0, 999, 1_000, 99_999, 100_000, 5_000_000)] == [
        "n<1K",
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
    ]


def test_collect_records_the_versions_and_the_weights_a_card_cites(tmp_path):
    from agentdata.agent.runner import run_record

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    record = run_record(CollectConfig(model=f"hf:{model}"), RunDir(tmp_path / "run"), problems=3)
    assert record["versions"]["agentdata"] and record["versions"]["math-verify"] and record["problems"] == 3
    (model / "model.safetensors").write_bytes(b"other weights")
    assert run_record(CollectConfig(model=f"hf:{model}"), RunDir(tmp_path / "run"), 3)["model_fingerprint"] not in (
        None,
        record["model_fingerprint"],
    )
    assert run_record(CollectConfig(model="smollm2"), RunDir(tmp_path / "run"), 3)["model_fingerprint"] is None
