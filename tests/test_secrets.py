"""Secret redaction before a set is written: detect-secrets' detectors catch planted secrets of several kinds
in user turns, tool outputs, reasoning and tool-call arguments; redacted or dropped, counted in the report."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from agentdata.publish.provenance import read_provenance
from agentdata.publish.secrets import SecretScanner, without_lookarounds
from agentdata.records import ToolCall, assistant_message, tool_message
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

# Secrets of the kinds trajectories leak, in the formats their issuers use (none is a live credential).
AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
OPENAI = "sk-proj-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnopqrst"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
URL_PASSWORD = "s3cr3tPassw0rd"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAwJ3\nq9Rk2ZLl\n-----END RSA PRIVATE KEY-----"
PLANTED = [AWS, GITHUB, OPENAI, STRIPE, URL_PASSWORD, "MIIEowIBAAKCAQEAwJ3"]


def leaky(id: str, where: str, secret_text: str):
    """A correct trajectory with `secret_text` in one place: the user turn, a tool output, the reasoning or the
    code the model ran."""
    row = trajectory(id, problem_id=f"p-{id}", question=f"Problem {id}: what is the sum of the first ten primes?")
    messages = [dict(message) for message in row.messages]
    if where == "user":
        messages[0]["content"] += f" (my key: {secret_text})"
    elif where == "tool":
        messages[2] = tool_message("call_0", f"129\nenv: {secret_text}")
    elif where == "reasoning":
        messages[-1] = {**assistant_message("The answer is \\boxed{129}."), "reasoning_content": f"use {secret_text}"}
    elif where == "code":
        call = ToolCall(f"token = '{secret_text}'\nprint(129)", id="call_0").to_message()
        messages[1] = {"role": "assistant", "content": "Step 0: compute.", "tool_calls": [call]}
    return replace(row, messages=messages)


PLACES = [
    ("user", f"AWS_ACCESS_KEY_ID={AWS}"),
    ("tool", f"GITHUB_TOKEN={GITHUB}\nOPENAI_API_KEY={OPENAI}"),
    ("reasoning", f"the stripe key {STRIPE} from the prompt"),
    ("code", f"postgres://admin:{URL_PASSWORD}@db.internal:5432/app"),
    ("tool", PEM),
]


def leaky_run(folder: Path) -> Path:
    rows = [leaky(f"leak{i}", where, text) for i, (where, text) in enumerate(PLACES)]
    rows += [
        trajectory(f"clean{i}", problem_id=f"clean{i}", question=f"Clean problem {i}: add {i} and {i}?")
        for i in range(3)
    ]
    return write_run(folder, rows)


def all_text(table) -> str:
    return json.dumps(table.to_pylist(), ensure_ascii=False)


def test_every_planted_secret_is_redacted_wherever_it_sits(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    leaky_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft", "--json"]) == 0
    written = pq.read_table("sft/data/train.parquet")
    assert written.num_rows == 8  # redact keeps every row
    text = all_text(written)
    for secret in PLANTED:
        assert secret not in text
    for kind in ("AWS Access Key", "GitHub Token", "OpenAI Token", "Stripe Access Key", "Basic Auth Credentials"):
        assert f"[REDACTED {kind}]" in text
    assert "postgres://admin:[REDACTED Basic Auth Credentials]@db.internal" in text  # only the password goes
    leak3 = next(row for row in written.to_pylist() if row["problem_id"] == "p-leak3")
    arguments = json.loads(leak3["messages"][1]["tool_calls"][0]["function"]["arguments"])  # still JSON of the code
    assert arguments["code"].startswith("token = 'postgres://admin:[REDACTED Basic Auth Credentials]@db.internal")
    report = json.loads(Path("sft.report.json").read_text())
    assert report["secrets"]["rows"] == 5 and report["secrets"]["mode"] == "redact"
    assert report["secrets"]["found"] == {
        "AWS Access Key": 1,
        "Basic Auth Credentials": 1,
        "GitHub Token": 1,
        "OpenAI Token": 1,
        "Private Key": 1,
        "Stripe Access Key": 1,
    }
    assert read_provenance("sft")["secrets"] == report["secrets"]
    assert "Secrets found before writing" in Path("sft/README.md").read_text()
    clean = [row for row in written.to_pylist() if row["problem_id"].startswith("clean")]
    assert all("REDACTED" not in json.dumps(row) for row in clean)


def test_drop_moves_the_rows_to_the_rejects_and_keep_scans_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    leaky_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "dropped.parquet", "--secrets", "drop", "--rejects", "r.parquet"]) == 0
    assert sorted(pl.read_parquet("dropped.parquet")["problem_id"]) == ["clean0", "clean1", "clean2"]
    rejects = pl.read_parquet("r.parquet")
    assert sorted(rejects.filter(pl.col("drop_reason") == "secret")["id"]) == [f"leak{i}" for i in range(5)]
    assert json.loads(Path("dropped.report.json").read_text())["dropped"]["dropped_secret"] == 5
    assert run_cli(["curate", "run", "--out", "kept.parquet", "--secrets", "keep"]) == 0
    assert AWS in all_text(pq.read_table("kept.parquet"))
    assert json.loads(Path("kept.report.json").read_text())["secrets"] == {"mode": "keep"}


def test_the_openai_form_is_redacted_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    leaky_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft.jsonl", "--for", "openai"]) == 0
    text = Path("sft.jsonl").read_text()
    assert all(secret not in text for secret in PLANTED) and "[REDACTED GitHub Token]" in text


@pytest.mark.parametrize(
    "text",
    [
        "print(sum([2, 3, 5, 7]))  # 17",
        "sha256 = 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # a hash is no secret
        'password = input("Enter a password: ")',
        "The answer is \\boxed{129}.",
        "https://example.com/search?q=primes&page=2",
        'requests.get(url + "?key=" + key)',
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert SecretScanner().redact(text) == text


def test_the_candidate_pass_never_misses_what_the_library_finds():
    scanner = SecretScanner()
    texts = [text for _, text in PLACES] + ["nothing here", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"]
    flags = pl.DataFrame({"t": texts}).select(scanner.candidates(pl.col("t")))["t"].to_list()
    for text, flag in zip(texts, flags):
        counts = Counter()
        scanner.redact(text, counts)
        assert flag or not counts
    assert flags[-2] is False and flags[-1] is True


def test_lookarounds_are_removed_and_nothing_else():
    assert without_lookarounds(r"(?:(?<=\W)|(?<=^))key(?!\w)[a-z(]{2}\(x\)") == r"(?:|)key[a-z(]{2}\(x\)"


def test_the_session_trace_export_is_redacted_or_leaves_the_session_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    leaky_run(Path("run"))
    assert run_cli(["view", "run", "--sts", "traces", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["sts"]
    assert summary["sessions"] == 8 and summary["secrets"]["rows"] == 5
    text = "".join(path.read_text() for path in Path("traces").rglob("*.jsonl"))
    assert all(secret not in text for secret in PLANTED) and "[REDACTED AWS Access Key]" in text
    assert run_cli(["view", "run", "--sts", "dropped", "--secrets", "drop", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sts"]["sessions"] == 3
    assert len(list(Path("dropped").rglob("*.jsonl"))) == 3
