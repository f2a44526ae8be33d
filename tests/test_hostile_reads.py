"""Bounded reads: an input that is no regular file (a FIFO, a link to /dev/zero or /dev/urandom, a loop of
links, a broken link, a folder that is no dataset) or is over the size bound is refused at once by every
command that reads one, in one line saying what it is; settings files refuse YAML alias bombs, keys
given twice and keys that are not text; an error line cuts a huge value; a question or answer of the
wrong type is named as such, not as missing; `inspect` on a killed run reads what its journal kept."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from agentdata.errors import InputFileError
from agentdata.problems import load_problems
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.fakes import InProcessSandbox, ScriptedEngine

pytestmark = pytest.mark.timeout(120)  # a read that waits on a FIFO must fail the test, not hang the suite

GOOD = {"question": "What is 6 * 7?", "answer": "42"}


@pytest.fixture(autouse=True)
def scripted_peers(monkeypatch):
    monkeypatch.setattr("agentdata.engines.load_engine", lambda spec, **options: ScriptedEngine())
    monkeypatch.setattr("agentdata.sandbox.open_sandbox", lambda spec="local", **options: InProcessSandbox())


def run_quietly(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(args)
    return code, err.getvalue()


def one_error_line(args: list[str]) -> str:
    code, err = run_quietly(args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, code, err)
    assert "unexpected" not in lines[0]
    return lines[0]


def hostile_paths(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (a path that is no input, what the message must say)."""
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    zero, urandom = folder / "zero.jsonl", folder / "urandom.parquet"
    zero.symlink_to("/dev/zero")
    urandom.symlink_to("/dev/urandom")
    loop_a, loop_b = folder / "loop_a.jsonl", folder / "loop_b.jsonl"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    broken = folder / "broken.jsonl"
    broken.symlink_to(folder / "gone.jsonl")
    return {
        "fifo": (fifo, "is a named pipe (FIFO), not a regular file"),
        "dev_zero": (zero, "is a character device (through the link to /dev/zero)"),
        "dev_urandom": (urandom, "is a character device (through the link to /dev/urandom)"),
        "loop": (loop_a, "a loop of symbolic links"),
        "broken_link": (broken, "a symbolic link to"),
    }


def commands(path: Path, run: Path) -> dict[str, list[str]]:
    return {
        "collect": ["collect", str(path), "--out", str(run.parent / "c")],
        "filter": ["filter", str(path), "--out", str(run.parent / "pool.parquet")],
        "eval": ["eval", "smollm2", str(path), "--out", str(run.parent / "e")],
        "curate": ["curate", str(path), "--out", str(run.parent / "sft.parquet")],
        "curate --decontam": ["curate", str(run), "--decontam", str(path), "--out", str(run.parent / "sft.parquet")],
        "filter --decontam": ["filter", "--decontam", str(path), "--out", str(run.parent / "pool.parquet")],
        "inspect": ["inspect", str(path)],
        "synth stitch": ["synth", "stitch", str(path), "--out", str(run.parent / "st.parquet")],
        "sandbox run": ["sandbox", "run", str(path)],
        "--judge-rubric": [
            "curate",
            str(run),
            "--judge",
            "smollm2",
            "--judge-rubric",
            str(path),
            "--out",
            str(run.parent / "j.parquet"),
        ],  # fmt: skip
        "--config": ["collect", "--config", str(path), "--out", str(run.parent / "c")],
    }


def test_every_reader_refuses_what_is_no_regular_file_at_once(tmp_path):
    run = write_run(tmp_path / "run", [trajectory("t1")])
    for name, (path, says) in hostile_paths(tmp_path).items():
        for command, args in commands(path, run).items():
            line = one_error_line(args)
            assert says in line and str(path.name) in line, (name, command, line)


def test_a_folder_that_is_no_dataset_is_named_as_a_folder(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("hello")
    assert "not a dataset saved with save_to_disk" in one_error_line(
        ["collect", str(folder), "--out", str(tmp_path / "c")]
    )
    assert "is a folder, not a config file" in one_error_line(["collect", "--config", str(folder)])
    assert "is a folder: give a Python file" in one_error_line(["sandbox", "run", str(folder)])
    package = tmp_path / "tools.py"
    package.mkdir()
    assert "is a folder: give a Python file" in one_error_line(["collect", "--tool", f"{package}:f", "--limit", "1"])


def test_an_input_over_the_size_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(GOOD) + "\n" * 5000)
    monkeypatch.setattr("agentdata.inputs.MAX_INPUT_BYTES", 1000)
    with pytest.raises(InputFileError, match=r"is 4.9 KiB, more than the 1000 bytes an input may be: split it"):
        load_problems(problems)
    monkeypatch.setattr("agentdata.settings.files.MAX_SETTINGS_BYTES", 100)
    config = tmp_path / "c.yaml"
    config.write_text("max_turns: 3\n" + "#" * 200 + "\n")
    assert "more than the 100 bytes" in one_error_line(["collect", "--config", str(config)])


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi")
)


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("bomb.yaml", BOMB, "more than 100,000 values once YAML aliases are expanded"),
        ("dup.yaml", "max_turns: 3\nmax_turns: 4\n", "line 2: the key 'max_turns' is given twice"),
        ("dup_nested.yaml", "loop:\n  temperature: 0.5\n  temperature: 0.9\n", "line 3: the key 'temperature'"),
        ("dup.json", '{"max_turns": 3, "loop": {"top_p": 1, "top_p": 0.5}}', "the key 'top_p' is given twice"),
        ("int_key.yaml", "1: 3\n", "top level: the key 1 is int, not text"),
        ("null_key.yaml", "engine_options:\n  null: 3\n", "engine_options: the key None is NoneType"),
        ("bool_key.yaml", "loop:\n  yes: 1\n", "loop: the key True is bool"),
    ],
)
def test_settings_files_refuse_bombs_duplicates_and_keys_that_are_not_text(tmp_path, name, text, says):
    config = tmp_path / name
    config.write_text(text)
    assert says in one_error_line(["collect", "--config", str(config), "--limit", "1"])


def test_merge_keys_may_override_what_they_merge(tmp_path):
    from agentdata.settings import read_settings_file

    config = tmp_path / "merge.yaml"
    config.write_text("base: &base {max_turns: 2, temperature: 0.1}\nrun:\n  <<: *base\n  temperature: 0.9\n")
    assert read_settings_file(config)["run"] == {"max_turns": 2, "temperature": 0.9}


def test_an_error_line_cuts_a_huge_value(tmp_path):
    config = tmp_path / "huge.yaml"
    config.write_text(f"max_turns: {'9' * 10_000_000}x\n")
    line = one_error_line(["collect", "--config", str(config), "--limit", "1"])
    assert "max_turns" in line and "10,000,001 characters" in line and len(line) < 500


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"question": 12, "answer": "1"}, "the question in column 'question' is a number, not text"),
        ({"question": {"text": "hi"}, "answer": "1"}, "the question in column 'question' is an object, not text"),
        ({"question": [{"role": "system", "content": "x"}], "answer": "1"}, "is a list with no user message"),
        ({"question": "  ", "answer": "1"}, "empty or missing question in column 'question'"),
        ({"question": "q?", "answer": {"value": 3}}, "the answer in column 'answer' is an object; expected text"),
        ({"question": "q?", "answer": [1, 2]}, "the answer in column 'answer' is a list; expected text"),
        ({"question": "q?", "answer": True}, "the answer in column 'answer' is a boolean; expected text"),
        ({"question": "q?", "answer": None}, "empty or missing answer in column 'answer'"),
    ],
)
def test_a_question_or_answer_of_the_wrong_type_is_named(tmp_path, row, says):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(GOOD) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputFileError, match="row 2") as caught:
        load_problems(problems)
    assert says in str(caught.value)


def test_a_number_answer_is_its_text(tmp_path):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": "6 * 7?", "answer": 42}) + "\n")
    assert load_problems(problems)[0].answer == "42"


def test_inspect_on_a_killed_run_reads_its_journal(tmp_path, capsys):
    """A run killed between shards has finished trajectories only in journal.jsonl: inspect counts them."""
    from agentdata.agent.journal import Journal

    run_dir = write_run(tmp_path / "run", [trajectory(f"t{i}", problem_id=f"p{i}") for i in range(4)], per_shard=2)
    journal = Journal(run_dir / "journal.jsonl", {"teacher": "crafted"})
    for index in range(3):
        journal.append(trajectory(f"j{index}", problem_id=f"q{index}"))
    journal.append(trajectory("t0"))  # already in a shard too (killed between the shard and the journal reset)
    journal.handle.close()  # the process died here: no close(), the journal stays
    assert run_cli(["inspect", str(run_dir), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["trajectories"] == 4 + 3 and stats["only_in_journal"] == 3
    assert run_cli(["inspect", str(run_dir)]) == 0
    assert "3 of them are only in" in " ".join(capsys.readouterr().out.split())


def test_a_recipe_that_is_no_regular_file_is_named_as_what_it_is(tmp_path):
    fifo, zero, folder = tmp_path / "r.yaml", tmp_path / "z.yaml", tmp_path / "d.yaml"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    folder.mkdir()
    assert "is a named pipe (FIFO)" in one_error_line(["experiment", str(fifo)])  # was "no such recipe file"
    assert "is a named pipe (FIFO)" in one_error_line(["experiment", str(fifo), "--show"])  # was a wait for ever
    assert "is a character device" in one_error_line(["experiment", str(zero)])
    assert "is a folder" in one_error_line(["experiment", str(folder)])
    assert "no such recipe file" in one_error_line(["experiment", str(tmp_path / "none.yaml")])


def run_in_subprocess(args: list[str], cwd: Path) -> tuple[int, str]:
    """`agentdata ARGS` in its own process, waited on for a bounded time: a read that blocks on a FIFO fails
    this test instead of hanging the suite (the wait is far above the seconds a refusal takes)."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "agentdata.cli.app", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`agentdata {' '.join(args)}` waited on a FIFO for 90 s")
    return done.returncode, done.stderr


def test_a_run_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """Probe (issue 41): a FIFO as the viewer's kept index, as a run's shard (view, curate) and as a run's
    manifest (regrade) made each command wait for a writer for ever."""
    trajectories = [trajectory(f"t{i}", problem_id=f"p{i}") for i in range(4)]
    indexed = write_run(tmp_path / "indexed", trajectories, per_shard=2)
    (indexed / ".agentdata-view").mkdir()
    os.mkfifo(indexed / ".agentdata-view" / "index.parquet")
    code, err = run_in_subprocess(["view", str(indexed), "--export", str(tmp_path / "site")], tmp_path)
    assert code == 0 and (tmp_path / "site" / "index.html").is_file(), err  # the index is built again instead
    assert (indexed / ".agentdata-view" / "index.parquet").is_file()  # and kept in the FIFO's place

    piped = write_run(tmp_path / "piped", trajectories, per_shard=2)
    os.mkfifo(piped / "trajectories" / "part-00002.parquet")
    says = "part-00002.parquet: is a named pipe (FIFO), not a regular file; move it aside"
    code, err = run_in_subprocess(["curate", str(piped), "--out", str(tmp_path / "sft.parquet")], tmp_path)
    assert code == 2 and says in err, err
    code, err = run_in_subprocess(["view", str(piped), "--export", str(tmp_path / "site2")], tmp_path)
    assert says in err, err  # the viewer shows the run as damaged, with that line
    os.mkfifo(tmp_path / "given.parquet")  # a FIFO given to the viewer itself: its columns were read by pyarrow
    code, err = run_in_subprocess(["view", str(tmp_path / "given.parquet"), "--sts", str(tmp_path / "t")], tmp_path)
    assert "given.parquet: is a named pipe (FIFO), not a regular file" in err, err

    manifested = write_run(tmp_path / "manifested", trajectories, per_shard=2)
    os.mkfifo(manifested / "manifest.json")
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps({"id": f"p{i}", **GOOD}) + "\n" for i in range(4)))
    args = ["regrade", str(manifested), "--problems", str(problems), "--out", str(tmp_path / "regraded")]
    code, err = run_in_subprocess(args, tmp_path)
    assert code == 2 and "manifest.json: is a named pipe (FIFO), not a regular file" in err, err
