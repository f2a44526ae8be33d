"""train checks what GRPO will need before SFT trains: a mistake in the rl: section (a reward or tool
plug-in, the pool, the raw or held-out problems, the sandbox service) is one line, exit 2, and SFT
never starts."""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from tests.cli_helpers import run_cli
from tests.train_fixtures import write_sft_set

CASES = [
    ("rewards: [nope]", "unknown reward 'nope'"),
    ('tools: ["missing.py:f"]', "missing.py does not exist"),
    ("rl_problems: {fifo}", "named pipe (FIFO)"),
    ("rl_pool: {fifo}", "named pipe (FIFO)"),
    ("eval_problems: {folder}", "not a dataset saved with save_to_disk"),
    ("sandbox: http://127.0.0.1:9", "cannot be reached"),
]


@pytest.mark.parametrize(("entry", "says"), CASES, ids=[case[0].split(":")[0] for case in CASES])
def test_a_mistake_in_the_rl_section_stops_train_before_sft(entry, says, tmp_path, monkeypatch):
    import agentdata.train.run as run

    def sft_started(config):
        raise AssertionError("SFT started before the rl: section was checked")

    monkeypatch.setattr(run, "_run_sft", sft_started)
    fifo, folder = tmp_path / "fifo", tmp_path / "folder"
    os.mkfifo(fifo)
    folder.mkdir()
    config = tmp_path / "train.yaml"
    config.write_text("rl:\n  " + entry.format(fifo=fifo, folder=folder) + "\n")
    sft_set = write_sft_set(tmp_path / "sft.jsonl")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(["train", "--sft-data", str(sft_set), "--config", str(config), "--out", str(tmp_path / "o")])
    lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and says in lines[0], err.getvalue()
    assert not (tmp_path / "o" / "sft").exists()


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb"])
def test_a_tracker_that_is_not_installed_is_one_line_before_sft(tracker, tmp_path, monkeypatch):
    """Issue 41: train --report-to tensorboard without tensorboard crashed inside TRL once the model had loaded;
    collect, eval and filter refuse it in one line before any work, and so does train."""
    import importlib.util

    import agentdata.train.run as run

    def sft_started(config):
        raise AssertionError("SFT started before the trackers were checked")

    monkeypatch.setattr(run, "_run_sft", sft_started)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == tracker else real_find_spec(name))
    sft_set = write_sft_set(tmp_path / "sft.jsonl")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(
            [
                "train",
                "--stage",
                "sft",
                "--sft-data",
                str(sft_set),
                "--report-to",
                tracker,
                "--out",
                str(tmp_path / "o"),
            ]
        )
    lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1, err.getvalue()
    assert f"train --report-to {tracker}: the {tracker} package is not installed" in lines[0]
    assert not (tmp_path / "o").exists()
