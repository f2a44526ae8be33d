"""`agentdata view --export` (a static site) and `--sts` (the Hub's Session Trace Simple Format), and the
command itself: its checks before any work, its summary, and the server it starts on 127.0.0.1."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import polars as pl
import pytest

from agentdata.errors import UserError
from agentdata.records import Trajectory, read_records
from agentdata.view.api import ViewerData
from agentdata.view.catalog import open_artifacts
from agentdata.view.export import export_site
from agentdata.view.mask import Tokenizers
from agentdata.view.sts import write_sts
from tests.cli_helpers import run_cli

PREFIX = re.compile(r'^\(window\.AGENTDATA_DATA = window\.AGENTDATA_DATA \|\| \{\}\)\[("[^"]+")\] = ')


@pytest.fixture(scope="module")
def workspace(view_workspace):
    return view_workspace


@pytest.fixture(scope="module")
def data(workspace, tokenizer) -> ViewerData:
    return ViewerData(open_artifacts([workspace.run, workspace.sft]), Tokenizers(tokenizer=tokenizer))


def read_data_file(path: Path) -> tuple[str, object]:
    """A `data/NAME.js` file: the name it stores under and the value (the rest is plain JSON)."""
    text = path.read_text(encoding="utf-8")
    match = PREFIX.match(text)
    assert match, text[:100]
    return json.loads(match.group(1)), json.loads(text[match.end() :].rstrip().removesuffix(";"))


# --------------------------------------------------------------------------- the static site


def test_the_site_holds_the_first_rows_with_their_pages_and_a_strict_policy(data, tmp_path):
    summary = export_site(data, tmp_path / "site", limit=5)
    site = tmp_path / "site"
    page = (site / "index.html").read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in page and "script-src 'self'" in page
    assert re.findall(r"<script[^>]*>([^<]*)</script>", page) == ["", ""]  # no inline script: two src= tags
    name, index = read_data_file(site / "data" / "a0" / "index.js")
    assert name == "a0/index" and index["exported"] == 5 and index["of"] == 24
    assert [row["_row"] for row in index["rows"]] == list(range(5))
    for row in index["rows"]:  # each exported row has its page, its SFT view and its problem's page
        assert read_data_file(site / "data" / "a0" / "r" / f"{row['_row']}.js")[1]["id"] == row["id"]
        assert read_data_file(site / "data" / "a0" / "m" / f"{row['_row']}.js")[1]["tokens"]
        assert row["problem_id"] in index["problems"] and row["_text"]
    for path in (site / "data").rglob("*.js"):
        read_data_file(path)  # every file is one assignment of plain JSON
    tables = [artifact for artifact in data.catalog if artifact.has_rows]  # the run, the SFT set, its rejects
    assert summary.rows == summary.masks == sum(min(5, len(artifact.table())) for artifact in tables)
    assert summary.files == len([path for path in site.rglob("*") if path.is_file()]) - 1  # all but the marker


def test_where_chooses_the_rows_and_a_bad_one_stops_before_writing(data, tmp_path):
    export_site(data, tmp_path / "wrong", limit=100, where={"correct": "false"})
    _, index = read_data_file(tmp_path / "wrong" / "data" / "a0" / "index.js")
    assert index["rows"] and not any(row["correct"] for row in index["rows"])
    with pytest.raises(UserError, match="nonsense: no such column"):
        export_site(data, tmp_path / "never", limit=10, where={"nonsense": "1"})
    assert not (tmp_path / "never").exists()


def test_an_export_never_writes_into_a_folder_of_other_files(data, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="holds other files"):
        export_site(data, tmp_path / "mine", limit=1)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    export_site(data, tmp_path / "site", limit=3)
    export_site(data, tmp_path / "site", limit=1)  # an earlier export is replaced, not mixed in
    assert sorted(p.name for p in (tmp_path / "site" / "data" / "a0" / "r").iterdir()) == ["0.js"]


# --------------------------------------------------------------------------- the Hub's trace format

STS_ROLES = {"user", "assistant", "system", "tool"}
STS_MESSAGE_KEYS = {"role", "content", "reasoningContent", "toolCalls", "toolCallId", "timestamp", "model"}


def check_sts(path: Path) -> list[dict]:
    """The Hub's "Session Traces Format" page, rule by rule: a session header line, then message lines."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    header, *messages = lines
    assert header["type"] == "session"
    assert isinstance(header["harness"], str) and header["harness"] and isinstance(header["id"], str) and header["id"]
    assert isinstance(header.get("name", ""), str)
    assert messages
    call_ids: set[str] = set()
    for line in messages:
        assert set(line) == {"type", "message"} and line["type"] == "message"
        message = line["message"]
        assert message["role"] in STS_ROLES and isinstance(message["content"], str)
        assert set(message) <= STS_MESSAGE_KEYS
        for call in message.get("toolCalls", []):
            assert message["role"] == "assistant" and set(call) == {"id", "function"}
            assert set(call["function"]) == {"name", "arguments"} and isinstance(call["function"]["arguments"], str)
            assert isinstance(json.loads(call["function"]["arguments"]), dict)  # a JSON string
            call_ids.add(call["id"])
        if "toolCallId" in message:
            assert message["role"] == "tool" and message["toolCallId"] in call_ids  # answers an earlier call
    return lines


def test_sts_files_follow_the_format_and_hold_the_whole_conversation(data, workspace, tmp_path):
    summary = write_sts(data, tmp_path / "traces", limit=1000)
    trajectories = {
        t.id: t
        for shard in sorted((workspace.run / "trajectories").glob("*.parquet"))
        for t in read_records(shard, Trajectory)
    }
    files = sorted((tmp_path / "traces").rglob("*.jsonl"))
    # the run and the SFT set; not the set's rejects (opened with it), which hold the run's trajectories again
    assert summary.sessions == len(files) == len(trajectories) + pl.read_parquet(workspace.sft).height
    assert sorted(summary.folders) == ["a", "sft"]
    seen = set()
    for path in files:
        header, *messages = check_sts(path)
        assert header["id"] not in seen
        seen.add(header["id"])
        if header["id"] in trajectories:
            trajectory = trajectories[header["id"]]
            assert [m["message"]["role"] for m in messages] == [m["role"] for m in trajectory.messages]
            assert [m["message"]["content"] for m in messages] == [m["content"] for m in trajectory.messages]
            assert header["correct"] == trajectory.correct and header["gold_answer"] == trajectory.answer
            calls = [c for m in messages for c in m["message"].get("toolCalls", [])]
            assert len(calls) == trajectory.num_tool_calls


def test_a_session_id_becomes_a_safe_file_name():
    from agentdata.view.sts import file_name

    assert file_name("p1-0") == "p1-0.jsonl"
    odd = file_name("../../etc/passwd")
    assert "/" not in odd and odd.endswith(".jsonl") and odd != file_name("..-..-etc-passwd")


# --------------------------------------------------------------------------- the command


def test_the_command_exports_both_and_says_what_it_wrote(workspace, tmp_path, capsys, tiny_model_dir):
    code = run_cli(
        [
            "view",
            str(workspace.run),
            "--export",
            str(tmp_path / "site"),
            "--sts",
            str(tmp_path / "sts"),
            "--limit",
            "3",
            "--where",
            "correct=true",
            "--tokenizer",
            str(tiny_model_dir),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["export"]["rows"] == 3 and out["sts"]["sessions"] == 3
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["missing-dir"], "missing-dir: no such file or directory"),
        (["{run}", "--export", "{run}"], "--export"),
        (["{run}", "--export", "{tmp}/x", "--where", "oops"], "--where oops: expected KEY=VALUE"),
        (["{run}", "--band", "0.8,0.2"], "band"),
        (["{run}", "--export", "{tmp}/x", "--sts", "{tmp}/x"], "same folder"),
        # Probes (issue 41): the site was written, then the STS folder refused; the tokenizer was named --model
        (["{run}", "--sts", "{tmp}/x", "--export", "{tmp}/x/site"], "--export is inside the --sts folder"),
        (["{run}", "--export", "{tmp}/x", "--sts", "{tmp}/x/traces"], "--sts is inside the --export folder"),
        (
            ["{run}", "--export", "{tmp}/x", "--tokenizer", "hf:/nonexistent"],
            "--tokenizer hf:/nonexistent: /nonexistent is not a transformers model dir",
        ),
    ],
)
def test_a_mistake_is_one_line_before_any_work(workspace, tmp_path, capsys, arguments, message):
    filled = [part.format(run=workspace.run, tmp=tmp_path) for part in arguments]
    assert run_cli(["view", *filled]) == 2
    error = capsys.readouterr().err.strip()
    assert message in " ".join(error.split()) and len(error.splitlines()) <= 2
    assert not (tmp_path / "x").exists()


def test_an_sts_folder_of_other_files_is_refused_before_the_site_is_written(workspace, tmp_path, capsys):
    taken = tmp_path / "notes"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    assert run_cli(["view", str(workspace.run), "--export", str(tmp_path / "site"), "--sts", str(taken)]) == 2
    assert "--sts" in capsys.readouterr().err and not (tmp_path / "site").exists()


def test_the_server_binds_loopback_prints_its_url_and_stops_on_ctrl_c(workspace):
    command = [sys.executable, "-m", "agentdata.cli.app", "view", str(workspace.run), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line, deadline = "", time.monotonic() + 120
        while "serving at" not in line:
            assert time.monotonic() < deadline and process.poll() is None, line
            line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        artifacts = httpx.get(url + "api/artifacts", timeout=30).json()["artifacts"]
        assert artifacts[0]["kind"] == "run" and artifacts[0]["rows"] == 24
        assert httpx.get(url, timeout=30).headers["content-security-policy"].startswith("default-src 'none'")
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=30)
        assert process.returncode == 0 and "stopped" in rest
    finally:
        if process.poll() is None:
            process.kill()
