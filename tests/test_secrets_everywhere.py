"""Issue 41: no planted secret leaves through any file a command writes for sharing.

Each kind (an AWS key id, a GitHub token, a private-key block, a JWT, a Stripe key, a password in a URL, a token in
a URL's query) is planted in each place a user puts one: a trajectory's messages and its fields outside them (id,
source, teacher, answers), a problem's question, answer and source, and the command line itself (the judge's and the
student's engine spec carry `user:PASSWORD@`). Then curate (with a judge), filter (with a student), validate,
view (`--export` and `--sts`), eval (a model with a password in its URL) and synth stitch run on loopback stub
servers, and every file they wrote for sharing is read back, a Parquet file decoded (its pages are compressed) with
its metadata, every other file as bytes: no planted secret is in any of them, nor in a file's name. Probes of the
issue answered: view --export (every kind), view --sts (headers, file names), curate's card and report (a source
URL's password), filter --student / curate --judge with `user:PASSWORD@` (pool, card, settings, report).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.fake_openai_server import FINAL_ANSWER_TEXT, FakeOpenAIServer, codeblock_script
from tests.cli_helpers import run_cli
from tests.curate_fixtures import write_run
from tests.test_judge import server_judge
from tests.test_secrets import AWS, GITHUB, PEM, STRIPE, URL_PASSWORD, leaky
from tests.train_fixtures import tiny_model_dir, tokenizer  # noqa: F401 (fixtures)

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
QUERY_TOKEN = "qT0k3nV4lu3x9Zr2"
PEM_BODY = "MIIEowIBAAKCAQEAwJ3"
PLANTED = [AWS, GITHUB, PEM_BODY, JWT, STRIPE, URL_PASSWORD, QUERY_TOKEN]
KINDS = [
    f"AWS_ACCESS_KEY_ID={AWS}",
    f"GITHUB_TOKEN={GITHUB}",
    PEM,
    f"Authorization: Bearer {JWT}",
    f"stripe key {STRIPE}",
    f"postgres://admin:{URL_PASSWORD}@db.internal:5432/app",
    f"https://data.example/export.csv?api_key={QUERY_TOKEN}&page=2",
]


def leaky_trajectories() -> list:
    """One trajectory per kind and place in the messages (the code a model ran too: the viewer highlights it in
    pieces), then each kind in the fields outside them."""
    places = ("user", "tool", "code")
    rows = [leaky(f"m{i}-{where}", where, text) for i, text in enumerate(KINDS) for where in places]
    fields = [
        {"id": f"run-{GITHUB}"},  # an id names the session's file in --sts
        {"id": f"run-{GITHUB[:-1]}X"},  # the same id once the token is cut: its file must not replace the other's
        {"source": f"https://user:{URL_PASSWORD}@hub.internal/data?token={QUERY_TOKEN}"},
        {"teacher": f"openai:http://agent:{URL_PASSWORD}@10.0.0.1:8000/v1"},
        {"problem_id": f"p-{AWS}"},
        {"final_answer": JWT, "answer": STRIPE},
    ]
    rows += [
        replace(leaky(f"f{i}", "user", f"nothing secret in place {i}"), **{"problem_id": f"pf{i}", **field})
        for i, field in enumerate(fields)
    ]
    return rows


def leaky_problems(path: Path) -> Path:
    rows = [{"question": f"Compute 6 times 7, given {text}.", "answer": "42", "source": "s"} for text in KINDS]
    rows += [
        {"question": "What is 6 times 7 here?", "answer": "42", "source": f"https://u:{URL_PASSWORD}@src.internal/x"},
        {"question": "What is 7 times 6 there?", "answer": "42", "source": f"s3://bucket/{AWS}?sig={QUERY_TOKEN}"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def half_right() -> callable:
    """A student that answers each question right once, then wrong: every problem's pass rate is 0.5 at k=2,
    inside the default band, whatever order the rollouts come in."""
    answered: Counter = Counter()
    lock = threading.Lock()

    def script(body: dict) -> str:
        reply = codeblock_script(body)  # the rollout loop's protocol: a ```python block, then the answer
        if FINAL_ANSWER_TEXT not in reply:
            return reply
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        with lock:
            answered[question] += 1
            first = answered[question] == 1
        return reply if first else reply.replace(FINAL_ANSWER_TEXT, "The answer is \\boxed{41}.")

    return script


def with_password(url: str) -> str:
    return url.replace("http://", f"http://agent:{URL_PASSWORD}@")


def leaks(folder: Path) -> list[str]:
    """`name: secret` for every planted secret in a file's name or content under `folder`."""
    found = []
    for path in sorted(folder.rglob("*")):
        text = str(path.relative_to(folder))
        if path.is_file():
            text += path.read_bytes().decode("utf-8", "replace")
            if path.suffix == ".parquet":
                file = pq.ParquetFile(path)
                metadata = {key.decode(): value.decode() for key, value in (file.schema_arrow.metadata or {}).items()}
                text += json.dumps([file.read().to_pylist(), metadata], default=str, ensure_ascii=False)
        found += [f"{path.relative_to(folder)}: {secret}" for secret in PLANTED if secret in text]
    return found


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Inputs in `in/`, everything the commands write for sharing in `shared/`, the command run from `work/`."""
    for name in ("in", "shared", "work"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "in", tmp_path / "shared"


def test_the_planted_secrets_are_really_there_to_find(places):
    inputs, _ = places
    write_run(inputs / "run", leaky_trajectories())
    leaky_problems(inputs / "problems.jsonl")
    assert sorted({found.split(": ")[1] for found in leaks(inputs)}) == sorted(PLANTED)


def test_curate_with_a_judge_whose_url_holds_a_password_writes_no_secret(places, capsys):
    inputs, shared = places
    write_run(inputs / "run", leaky_trajectories())
    with FakeOpenAIServer(script=server_judge) as judge:
        spec = f"openai:{with_password(judge.url)}"
        for out in ("sft.parquet", "sftdir"):
            flags = ["--judge", spec, "--judge-option", "model=fake-model", f"score_cache={inputs / 'cache'}"]
            code = run_cli(["curate", str(inputs / "run"), "--out", str(shared / out), *flags, "--json"])
            assert code == 0, capsys.readouterr().err
            assert json.loads(capsys.readouterr().out)["kept_rows"] == len(leaky_trajectories())
        code = run_cli(["curate", str(inputs / "run"), "--out", str(shared / "openai.jsonl"), "--for", "openai"])
        assert code == 0
    assert leaks(shared) == []
    card = (shared / "sft.README.md").read_text()
    assert f"openai:http://agent:[REDACTED Basic Auth Credentials]@{judge.url.removeprefix('http://')}" in card
    report = json.loads((shared / "sft.report.json").read_text())
    assert report["secrets"]["found"]["JSON Web Token"] >= 1 and report["secrets"]["rows"] >= len(KINDS)


def test_filter_with_a_student_whose_url_holds_a_password_writes_no_secret(places, capsys):
    inputs, shared = places
    problems = leaky_problems(inputs / "problems.jsonl")
    with FakeOpenAIServer(script=half_right()) as student:
        spec = f"openai:{with_password(student.url)}"
        flags = ["--student", spec, "--k", "2", "--profile-dir", str(inputs / "profile"), "embedding=tfidf"]
        code = run_cli(["filter", str(problems), "--out", str(shared / "pool"), *flags, "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["selected"] == len(KINDS) + 2
    assert leaks(shared) == []
    assert "[REDACTED Basic Auth Credentials]" in (shared / "pool" / "README.md").read_text()


def test_validate_writes_no_secret_in_its_report(places):
    inputs, shared = places
    problems = leaky_problems(inputs / "problems.jsonl")
    problems.write_text(problems.read_text() + problems.read_text())  # every row twice: each copy is listed
    assert run_cli(["validate", str(problems), "--out", str(shared / "clean.jsonl")]) == 0
    assert json.loads((shared / "clean.report.json").read_text())["broken"] == len(KINDS) + 2
    leaked = leaks(shared)
    # the clean problems are the user's own input, checked and handed back, not a set made for sharing
    assert [line for line in leaked if not line.startswith("clean.jsonl:")] == []


def test_view_export_and_sts_write_no_secret_in_any_field_or_file_name(places, capsys, tiny_model_dir):  # noqa: F811
    inputs, shared = places
    write_run(inputs / "run", leaky_trajectories())
    assert run_cli(["curate", str(inputs / "run"), "--out", str(inputs / "sft.parquet"), "--secrets", "keep"]) == 0
    capsys.readouterr()
    code = run_cli(
        [
            "view",
            str(inputs / "run"),
            str(inputs / "sft.parquet"),
            "--export",
            str(shared / "site"),
            "--sts",
            str(shared / "sts"),
            "--tokenizer",
            str(tiny_model_dir),
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["sts"]["sessions"] == 2 * len(leaky_trajectories())
    assert len(list((shared / "sts").rglob("*.jsonl"))) == summary["sts"]["sessions"]
    assert summary["export"]["secrets"]["found"]["GitHub Token"] >= 1
    assert leaks(shared) == []


def test_a_crash_log_holds_no_secret(places):
    """The log of an unexpected error is what gets pasted into a bug report: an engine URL in its message is cut."""
    from agentdata.cli.crash import write_crash_log

    _, shared = places
    error = RuntimeError(f"POST openai:http://agent:{URL_PASSWORD}@10.0.0.1/v1?token={QUERY_TOKEN} with {JWT} failed")
    log = write_crash_log(error, shared)
    assert log.parent == shared and "RuntimeError" in log.read_text()
    assert leaks(shared) == []


def test_eval_of_a_model_whose_url_holds_a_password_names_no_folder_or_report_after_it(places, capsys):
    """The default label of `openai:http://user:PASSWORD@host/v1` named eval's run folders, its plots and report."""
    inputs, shared = places
    benchmark = inputs / "bench.jsonl"
    benchmark.write_text(
        "".join(json.dumps({"question": f"6 times 7, case {i}?", "answer": "42"}) + "\n" for i in range(2))
    )
    with FakeOpenAIServer(script="codeblock") as model:
        spec = f"openai:{with_password(model.url)}"
        assert run_cli(["eval", spec, str(benchmark), "--k", "1", "--out", str(shared / "eval"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"][0]["model"] == f"openai-{model.url.removeprefix('http://').split('/')[0]}"
    run_dirs = shared / "eval" / "runs"  # collect's run dirs: local working files, their manifests record the spec
    names = [str(path.relative_to(shared)) for path in shared.rglob("*")]
    assert [name for name in names if URL_PASSWORD in name] == []
    assert [line for line in leaks(shared) if not line.startswith(str(run_dirs.relative_to(shared)))] == []


def test_synth_stitch_writes_no_secret_in_its_sft_set(places):
    inputs, shared = places
    solutions = inputs / "solutions.jsonl"
    rows = [
        {"question": f"Q{i} with {text}?", "answer": "3*4 = <<3*4=12>>12 apples.\n#### 12"}
        for i, text in enumerate(KINDS)
    ]
    solutions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    flags = ["--solution-field", "answer", "--trajectories", str(inputs / "stitched")]
    assert run_cli(["synth", "stitch", str(solutions), "--out", str(shared / "stitched.parquet"), *flags]) == 0
    assert pq.read_table(shared / "stitched.parquet").num_rows == len(KINDS)
    assert leaks(shared) == []


def test_an_experiments_report_holds_no_secret(places):
    """The recipe (a teacher's spec with `user:PASSWORD@`) is recorded in experiment.json and report.md."""
    from types import SimpleNamespace

    from agentdata.experiment import load_recipe
    from agentdata.experiment.report import build_report
    from tests.test_experiment import write_recipe

    inputs, shared = places
    teacher = f"http://agent:{URL_PASSWORD}@127.0.0.1:9/v1?api_key={QUERY_TOKEN}"
    recipe = load_recipe(write_recipe(inputs, teacher, inputs / "no-model", {"a": {"sft.data": "real"}, "b": {}}))
    build_report(recipe, [], SimpleNamespace(train=inputs / "train.jsonl", held_out=inputs / "held_out.jsonl"), shared)
    assert sorted(path.name for path in shared.iterdir()) == ["experiment.json", "report.md", "report.png"]
    assert "[REDACTED Basic Auth Credentials]" in (shared / "experiment.json").read_text()
    assert leaks(shared) == []
