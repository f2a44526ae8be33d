"""The index `agentdata view` keeps beside a run dir (view/index_cache.py): read back on the next open with the
same rows and numbers, built again when a shard changes, is added (a redone row) or goes, or when the file is
damaged; a run dir that cannot take it is indexed in memory and left as it was."""

from __future__ import annotations

import errno
import io
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from agentdata.agent.rundir import RunDir
from agentdata.records import Trajectory, read_records, write_records
from agentdata.view import trajectories
from agentdata.view.api import ViewerData
from agentdata.view.artifacts import folder_entries
from agentdata.view.catalog import open_artifacts
from agentdata.view.index_cache import CACHE_DIR, CACHE_FILE

NEEDLE = "print(12 * 13)"  # the code of one problem's samples


@pytest.fixture
def run(tmp_path, view_workspace) -> Path:
    copy = tmp_path / "runs" / "a"
    shutil.copytree(view_workspace.run, copy, ignore=shutil.ignore_patterns(CACHE_DIR))
    return copy


def opened(run: Path) -> tuple[ViewerData, dict]:
    """What `agentdata view RUN` does before it prints its URL, and the home page's answer; then what it keeps
    beside the run after the URL (the index, the search index), as the server's background thread does."""
    data = ViewerData(open_artifacts([run]))
    home = data.artifacts()
    data.catalog.keep()
    return data, home


def never_built(monkeypatch) -> None:
    def build(source):
        raise AssertionError("the index was built, not read from beside the run")

    monkeypatch.setattr(trajectories, "index_frame", build)


def listing(run: Path) -> dict[str, tuple[int, int]]:
    """Every file the run dir held before the viewer (its own folder left out), with size and modification time."""
    files = [path for path in run.rglob("*") if path.is_file() and CACHE_DIR not in path.relative_to(run).parts]
    return {str(path.relative_to(run)): (path.stat().st_size, path.stat().st_mtime_ns) for path in files}


def terminal_table(data: ViewerData) -> str:
    from rich.console import Console

    from agentdata.cli.view import artifacts_table

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(artifacts_table(data.catalog, 0.1))
    return console.export_text()


def shards(run: Path) -> list[Path]:
    return RunDir(run).shards()


def test_the_index_is_kept_beside_the_run_and_read_back_with_the_same_rows(run, monkeypatch):
    before = listing(run)
    built, home = opened(run)
    assert (run / CACHE_DIR / CACHE_FILE).is_file()
    assert listing(run) == before  # nothing the run dir held was touched
    never_built(monkeypatch)
    kept, kept_home = opened(run)
    assert_frame_equal(kept.artifact("a0").table().index, built.artifact("a0").table().index)
    assert kept_home == home  # the facet menus and the run's stats too
    assert (built.artifact("a0").table().origin, kept.artifact("a0").table().origin) == ("built, kept", "read back")
    assert "read back" in terminal_table(kept)  # the terminal says so
    for params in ({}, {"correct": "false", "sort": "completion_tokens", "desc": "1"}, {"q": NEEDLE}):
        assert kept.rows("a0", params) == built.rows("a0", params)
    assert kept.artifact("a0").table().search_index is not None  # the search index kept with it, read back
    assert kept.rows("a0", {"q": NEEDLE})["total"] == 4
    row = kept.rows("a0", {"q": NEEDLE})["rows"][0]["_row"]
    assert kept.record("a0", row) == built.record("a0", row)


def test_a_fresh_build_and_a_kept_index_give_the_numbers_the_index_holds(run):
    fresh, home = opened(run)
    index = fresh.artifact("a0").table().index
    stats = opened(run)[1]["artifacts"][0]["stats"]
    assert stats == home["artifacts"][0]["stats"]
    assert stats["trajectories"] == index.height and stats["problems"] == index["problem_id"].n_unique()
    assert stats["solved_problems"] == index.filter(pl.col("correct"))["problem_id"].n_unique()


def redo_a_row(run: Path) -> str:
    """A resumed run's redone row: the same id in a new shard, with another answer."""
    first = read_records(shards(run)[0], Trajectory)[0]
    redone = Trajectory(**{**first.__dict__, "final_answer": "redone", "correct": False})
    write_records([redone], RunDir(run).next_shard_path(), Trajectory)
    return first.id


def change_a_shard(run: Path) -> str:
    """A shard rewritten in place (as `RunDir.remove_rows` or a hand edit does), one answer changed."""
    rows = read_records(shards(run)[0], Trajectory)
    rows[0] = Trajectory(**{**rows[0].__dict__, "final_answer": "redone"})
    write_records(rows, shards(run)[0], Trajectory)
    return rows[0].id


@pytest.mark.parametrize("change", [redo_a_row, change_a_shard])
def test_a_changed_or_added_shard_builds_the_index_again(run, monkeypatch, change):
    opened(run)
    changed_id = change(run)
    index = opened(run)[0].artifact("a0").table().index
    assert index.filter(pl.col("id") == changed_id)["final_answer"].to_list() == ["redone"]
    assert index.height == pl.read_parquet(shards(run))["id"].n_unique()
    never_built(monkeypatch)  # and what was built then is what the next open reads
    kept = opened(run)[0].artifact("a0").table().index
    assert_frame_equal(kept, index)


def test_a_removed_shard_builds_the_index_again(run):
    rows = read_records(shards(run)[0], Trajectory)
    write_records(rows[: len(rows) // 2], shards(run)[0], Trajectory)  # two shards, the second to go
    write_records(rows[len(rows) // 2 :], RunDir(run).next_shard_path(), Trajectory)
    first, _ = opened(run)
    gone = shards(run)[-1]
    gone_ids = set(pl.read_parquet(gone)["id"])
    gone.unlink()
    index = opened(run)[0].artifact("a0").table().index
    assert gone_ids and not gone_ids & set(index["id"])
    assert index.height == first.artifact("a0").table().index.height - len(gone_ids)


def test_a_damaged_index_file_is_built_again(run, monkeypatch):
    built, home = opened(run)
    kept = run / CACHE_DIR / CACHE_FILE
    kept.write_bytes(kept.read_bytes()[:300])  # cut off
    again, again_home = opened(run)
    assert again_home == home
    assert_frame_equal(again.artifact("a0").table().index, built.artifact("a0").table().index)
    never_built(monkeypatch)  # the damaged file was replaced by a whole one
    assert opened(run)[1] == home


def read_only(run: Path, monkeypatch) -> None:
    """A read-only file system: the system refuses to create the temporary file."""
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)


def a_file_of_that_name(run: Path, monkeypatch) -> None:
    (run / CACHE_DIR).write_text("the user's own file\n")


def a_link_to_another_folder(run: Path, monkeypatch) -> None:
    elsewhere = run.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / CACHE_FILE).write_text("the user's own file\n")
    (run / CACHE_DIR).symlink_to(elsewhere)


@pytest.mark.parametrize("obstacle", [read_only, a_file_of_that_name, a_link_to_another_folder])
def test_a_run_dir_that_cannot_take_the_index_is_indexed_in_memory_and_left_as_it_was(run, monkeypatch, obstacle):
    expected = trajectories.index_frame(trajectories.TrajectorySource(run))
    obstacle(run, monkeypatch)
    before = {path: path.read_bytes() for path in run.parent.rglob("*") if path.is_file()}
    table = opened(run)[0].artifact("a0").table()
    assert_frame_equal(table.index, expected)
    assert table.origin == "built"
    assert {path: path.read_bytes() for path in run.parent.rglob("*") if path.is_file()} == before


def test_the_kept_index_is_not_read_as_data(run):
    opened(run)
    assert [path.name for path in shards(run)] == sorted(p.name for p in (run / "trajectories").iterdir())
    assert folder_entries(run.parent) == [run]  # a folder of runs lists the run, not the index beside it
    assert opened(run.parent)[0].catalog.get("a1").path == run
