"""The search index `agentdata view` keeps beside a run dir (view/search_index.py): it finds exactly what a
brute-force scan of every question, message and call finds; it is built again when the run changes; a build
killed or stopped half-way leaves nothing a later open trusts."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentdata.agent.rundir import RunDir
from agentdata.records import Trajectory, read_records, write_records
from agentdata.view import search_index
from agentdata.view.api import ViewerData
from agentdata.view.catalog import open_artifacts
from agentdata.view.index_cache import CACHE_DIR
from agentdata.view.search_index import SEARCH_FILE

ROOT = Path(__file__).resolve().parents[1]


def tricky(base: Trajectory, number: int, question: str, reply: str, code: str) -> Trajectory:
    """A trajectory of its own problem whose texts hold what a tokenizer could get wrong."""
    messages = [dict(message) for message in base.messages]
    messages[1] = {"role": "user", "content": question}
    call = {"id": "call_0", "type": "function", "function": {"name": "code_interpreter", "arguments": ""}}
    call["function"]["arguments"] = json.dumps({"code": code})
    messages[2] = {"role": "assistant", "content": reply, "tool_calls": [call]}
    return Trajectory(
        **{**base.__dict__, "id": f"tricky-{number}", "problem_id": f"tricky-{number}", "messages": messages}
    )


TRICKY = [
    ("Ünïcode CAFÉ déjà vu?", "Voilà: naïve façade", 'print("caf\\u00e9")\nx = "Déjà"'),
    ('A "quoted" question', "tabs\there and\nnew lines", 'print("hello \\"world\\"")'),
    ("emoji 🙂 and 中文字符", "<script>alert(1)</script>", "for n in range(12):\n    print(n)"),
]


@pytest.fixture
def run(tmp_path, view_workspace) -> Path:
    """The viewer's run dir and a second shard of tricky texts (quotes, new lines, accents, emoji, CJK)."""
    copy = tmp_path / "runs" / "a"
    shutil.copytree(view_workspace.run, copy, ignore=shutil.ignore_patterns(CACHE_DIR))
    base = read_records(RunDir(copy).shards()[0], Trajectory)[0]
    rows = [tricky(base, number, *texts) for number, texts in enumerate(TRICKY)]
    write_records(rows, RunDir(copy).next_shard_path(), Trajectory)
    return copy


def opened(run: Path, keep: bool = True) -> ViewerData:
    data = ViewerData(open_artifacts([run]))
    if keep:
        data.catalog.keep()  # what the server does after printing its URL
    return data


def texts_of(trajectory: Trajectory) -> list[str]:
    """What the search reads, from the record itself: the question, each message's text, each call's arguments."""
    texts = [trajectory.question]
    for message in trajectory.messages:
        texts.append(message.get("content") or "")
        texts += [call["function"]["arguments"] for call in message.get("tool_calls") or []]
    return texts


def brute_force(run: Path, needle: str) -> set[int]:
    """Row numbers (every shard's rows in order) whose texts hold the needle or its JSON form, case folded."""
    forms = {needle.casefold(), json.dumps(needle)[1:-1].casefold()}
    rows = [row for shard in RunDir(run).shards() for row in read_records(shard, Trajectory)]
    return {n for n, row in enumerate(rows) if any(f in text.casefold() for text in texts_of(row) for f in forms)}


def needles(run: Path) -> list[str]:
    """Pieces of the run's own texts (any length, any place, case flipped at random) and some that are absent."""
    rng = random.Random(0)
    texts = [
        text for shard in RunDir(run).shards() for row in read_records(shard, Trajectory) for text in texts_of(row)
    ]
    found = []
    for _ in range(150):
        text = rng.choice([text for text in texts if text])
        start = rng.randrange(len(text))
        piece = text[start : start + rng.randint(3, 24)]
        found.append("".join(c.upper() if rng.random() < 0.3 else c for c in piece))
    fixed = ["café", "CAFÉ", "déjà", '"quoted"', 'hello \\"world', 'hello "world', "\\u00e9", "\n    print(n)"]
    fixed += ["for n in range(12)", "🙂 and 中文", "<script>", "12 * 13", "no such text anywhere", "xyz"]
    return fixed + found


def test_the_search_index_finds_what_a_brute_force_scan_finds(run):
    data = opened(run)
    table = data.artifact("a0").table()
    assert table.search_index is not None and (run / CACHE_DIR / SEARCH_FILE).is_file()
    for needle in needles(run):
        found = table.search_index.rows(needle)
        assert (found is None) == (len(needle) < 3), needle  # the index answers every needle of 3 characters or more
        assert set(table.search(needle)) == brute_force(run, needle), needle
    assert brute_force(run, "café") == brute_force(run, "CAFÉ") != set()  # case folded, accents kept
    live = set(table.index["_row"])
    for needle in ("What is", "print(", "Voilà", "\t"):  # the list's answer: the index's rows among those found
        rows = data.rows("a0", {"q": needle, "limit": "500"})["rows"]
        assert {row["_row"] for row in rows} == brute_force(run, needle.strip()) & live, needle


def test_a_needle_too_short_for_the_index_is_searched_by_scanning(run):
    table = opened(run).artifact("a0").table()
    for needle in ("é", "12", "🙂", '"'):
        assert table.search_index.rows(needle) is None  # the index has no trigram for it
        assert set(table.search(needle)) == brute_force(run, needle), needle


@pytest.mark.parametrize("needle", ["ab\x00cd", "print(\x00", "\x00\x00\x00"])
def test_a_search_holding_nul_bytes_is_answered_by_scanning(run, needle):
    """Probe (issue 41): FTS5 ends a quoted string at a NUL, so the index's query failed (HTTP 500)."""
    from starlette.testclient import TestClient

    from agentdata.view.server import create_app

    data = opened(run)
    assert data.artifact("a0").table().search_index is not None
    answer = TestClient(create_app(data), base_url="http://127.0.0.1").get("/api/a/a0/rows", params={"q": needle})
    assert answer.status_code == 200 and answer.json()["total"] == len(brute_force(run, needle)), answer.text
    assert data.artifact("a0").table().search_index is not None  # the index still serves the next search


def test_until_the_search_index_is_built_a_search_scans_and_finds_the_same(run):
    waiting = opened(run, keep=False).artifact("a0").table()
    assert waiting.search_index is None and waiting.pending
    ready = opened(run).artifact("a0").table()
    for needle in ("CAFÉ", "print(12", "no such text anywhere"):
        assert set(waiting.search(needle)) == set(ready.search(needle)) == brute_force(run, needle)


def test_a_new_shard_builds_the_search_index_again(run):
    opened(run)
    first = read_records(RunDir(run).shards()[0], Trajectory)[0]
    messages = [*first.messages[:-1], {"role": "assistant", "content": "A redone answer: Zebra-Quokka."}]
    write_records([Trajectory(**{**first.__dict__, "messages": messages})], RunDir(run).next_shard_path(), Trajectory)
    stale = opened(run, keep=False)  # the kept one was built from other shards: not trusted
    assert stale.artifact("a0").table().search_index is None
    assert stale.rows("a0", {"q": "zebra-quokka"})["total"] == 1  # found by scanning meanwhile
    again = opened(run)
    table = again.artifact("a0").table()
    assert set(table.search_index.rows("zebra-quokka")) == brute_force(run, "zebra-quokka") != set()
    (row,) = again.rows("a0", {"q": "zebra-quokka"})["rows"]
    assert row["id"] == first.id  # the redone row, which replaced the first


def test_a_damaged_search_index_is_built_again(run):
    opened(run)
    kept = run / CACHE_DIR / SEARCH_FILE
    kept.write_bytes(kept.read_bytes()[:2000])
    assert opened(run, keep=False).artifact("a0").table().search_index is None
    table = opened(run).artifact("a0").table()
    assert set(table.search_index.rows("print(")) == brute_force(run, "print(")


def zero_all_pages_but_the_header_and_meta(kept: Path) -> None:
    """Damage as a disk does: every page zeroed but the first (the schema) and the one holding `meta` (the key
    that says which shards it was built from), so the file still opens and still names these shards."""
    import sqlite3

    with sqlite3.connect(kept) as con:
        (meta_page,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'meta'").fetchone()
        (page_size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    data = bytearray(kept.read_bytes())
    for page in range(2, len(data) // page_size + 1):
        if page != meta_page:
            data[(page - 1) * page_size : page * page_size] = bytes(page_size)
    kept.write_bytes(bytes(data))


def test_a_search_index_with_zeroed_pages_is_found_damaged_and_built_again(run, caplog):
    """Probe (issue 41): a kept search.sqlite with zeroed pages was trusted by its key, and every search failed."""
    from starlette.testclient import TestClient

    from agentdata.view.server import create_app

    opened(run)
    kept = run / CACHE_DIR / SEARCH_FILE
    zero_all_pages_but_the_header_and_meta(kept)
    data = opened(run, keep=False)
    client = TestClient(create_app(data), base_url="http://127.0.0.1")
    answer = client.get("/api/a/a0/rows", params={"q": "print("})  # before the check: found by scanning
    assert answer.status_code == 200 and answer.json()["total"] == len(brute_force(run, "print(")), answer.text
    with caplog.at_level("WARNING", logger="agentdata.view"):
        data.catalog.keep()  # after the URL: its pages are checked, and it is built again
    assert "is damaged: building it again" in caplog.text
    table = data.artifact("a0").table()
    assert set(table.search_index.rows("print(")) == brute_force(run, "print(") != set()
    assert opened(run).artifact("a0").table().search_index is not None  # the rebuilt file is kept


def test_a_search_index_damaged_while_served_falls_back_to_scanning(run, caplog):
    table = opened(run).artifact("a0").table()
    assert table.search_index is not None
    zero_all_pages_but_the_header_and_meta(run / CACHE_DIR / SEARCH_FILE)
    with caplog.at_level("WARNING", logger="agentdata.view"):
        assert set(table.search("Voilà")) == brute_force(run, "Voilà") != set()
    assert "searching by scanning" in caplog.text and table.search_index is None


KILLED_MID_BUILD = """
import os, signal, sys
from pathlib import Path
from agentdata.view import search_index
from agentdata.view.catalog import open_artifacts

real = search_index.searchable_texts
def one_shard_then_die(frame):
    if frame["_row"][0] > 0:  # the second shard: killed as by the OOM killer or a power cut, no cleanup
        os.kill(os.getpid(), signal.SIGKILL)
    return real(frame)
search_index.searchable_texts = one_shard_then_die
open_artifacts([Path(sys.argv[1])]).keep()
"""


def test_a_viewer_killed_while_building_leaves_no_search_index_a_later_open_trusts(run):
    opened(run, keep=False).catalog.keep(search=False)  # the list index kept, the search index not yet built
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_BUILD, str(run)], cwd=ROOT, env=_env(), check=False)
    assert killed.returncode == -signal.SIGKILL
    folder = run / CACHE_DIR
    assert not (folder / SEARCH_FILE).exists()
    assert [path.name for path in folder.glob(f".{SEARCH_FILE}.*.tmp")]  # its half-written file, under its own name
    table = opened(run, keep=False).artifact("a0").table()
    assert table.search_index is None and set(table.search("café")) == brute_force(run, "café")
    table.keep(search_index.threading.Event())
    assert set(table.search_index.rows("café")) == brute_force(run, "café")


def test_a_viewer_stopped_while_building_removes_its_temporary_file(run, monkeypatch):
    stop = search_index.threading.Event()
    real = search_index.searchable_texts

    def stop_after_the_first_shard(frame):
        stop.set()  # Ctrl-C while the index is built: the next shard is not read
        return real(frame)

    monkeypatch.setattr(search_index, "searchable_texts", stop_after_the_first_shard)
    data = opened(run, keep=False)
    data.catalog.keep(stop)
    assert data.artifact("a0").table().search_index is None
    assert sorted(path.name for path in (run / CACHE_DIR).iterdir()) == ["index.parquet"]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_the_server_keeps_both_in_the_background_after_its_url(run):
    from agentdata.cli.view import keep_in_background

    data = opened(run, keep=False)
    table = data.artifact("a0").table()
    assert table.origin == "built, keeping" and table.search_index is None
    keeper = keep_in_background(data.catalog, search_index.threading.Event(), as_json=True)
    keeper.join(timeout=120)
    assert not keeper.is_alive() and not table.pending
    assert table.origin == "built, kept" and set(table.search("café")) == brute_force(run, "café")
    kept = {path.name: path.stat().st_mtime_ns for path in (run / CACHE_DIR).iterdir()}
    again = opened(run, keep=False)
    keeper = keep_in_background(again.catalog, search_index.threading.Event(), as_json=True)
    keeper.join(timeout=120)  # both read back: only the postings are read, ahead of the first search
    assert again.artifact("a0").table().search_index.warm and not again.artifact("a0").table().pending
    assert {path.name: path.stat().st_mtime_ns for path in (run / CACHE_DIR).iterdir()} == kept
    assert keep_in_background(again.catalog, search_index.threading.Event(), True) is None  # nothing left to do
