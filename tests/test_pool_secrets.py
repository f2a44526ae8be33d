"""filter's pool scanned for secrets before it is written or pushed: planted keys, tokens, a URL password
and a private key in a problem's question, answer and source are redacted (or the problem dropped as
`secret`), counted in the report, the card and the provenance, and never reach the uploaded files."""

from __future__ import annotations

import json

import polars as pl

from agentdata.agent.config import CollectConfig
from agentdata.filter.build import PoolConfig
from agentdata.filter.profile import profile_dir_for
from agentdata.filter.run import run_filter
from agentdata.publish.config import PublishConfig
from agentdata.publish.provenance import read_provenance
from agentdata.records import Problem
from tests.test_filter import write_profile
from tests.test_push import hub, online  # noqa: F401  (fixtures: HfApi's network calls recorded)
from tests.test_secrets import AWS, GITHUB, OPENAI, PEM, STRIPE, URL_PASSWORD

LEAKY = [
    Problem(f"Which region does the key {AWS} belong to, given the bucket policy below?", "1", source="cloud"),
    Problem("Count the users of the service whose config reads\n" + PEM, "2", source="config"),
    Problem(f"Connect with postgres://admin:{URL_PASSWORD}@db.internal:5432/app and sum the orders.", "3"),
    Problem("How many characters long is the deploy token in this repository's settings?", GITHUB, source="repo"),
    Problem("What does the billing webhook return for an empty cart?", "4", source=f"export {STRIPE} {OPENAI}"),
]
CLEAN = [
    Problem("What is the sum of the first ten prime numbers?", "129", source="math"),
    Problem("How many edges does a complete graph on seven vertices have?", "21", source="math"),
]
PLANTED = [AWS, GITHUB, OPENAI, STRIPE, URL_PASSWORD, "MIIEowIBAAKCAQEAwJ3"]


def filter_pool(tmp_path, secrets: str, push: str | None = None):
    problems = LEAKY + CLEAN
    write_profile(profile_dir_for(tmp_path / "pool", CollectConfig(samples=4)), problems, 4, [2] * len(problems))
    publish = PublishConfig(secrets=secrets, push_to_hub=push)
    config = PoolConfig(embedding="tfidf", publish=publish)
    return run_filter(problems, tmp_path / "pool", config, CollectConfig(samples=4))


def written_text(path) -> str:
    """Every value of the written pool file, as one text (the prompt's messages, answer, source, ...)."""
    return json.dumps(pl.read_parquet(path).to_dicts(), default=str)


def test_a_pools_secrets_are_redacted_counted_and_never_pushed(tmp_path, hub):  # noqa: F811
    run = filter_pool(tmp_path, "redact", push="me/pool")
    assert run.selected == 7  # every problem kept, its secrets cut out
    text = written_text(run.output)
    assert not [secret for secret in PLANTED if secret in text]
    for kind in ("AWS Access Key", "Private Key", "Basic Auth Credentials", "GitHub Token", "Stripe Access Key"):
        assert f"[REDACTED {kind}]" in text
    assert "postgres://admin:[REDACTED Basic Auth Credentials]@db.internal" in text  # the password alone
    assert "What is the sum of the first ten prime numbers?" in text and "129" in text  # clean ones as they were
    assert run.secrets["rows"] == 5 and run.secrets["mode"] == "redact"
    assert run.secrets["found"]["AWS Access Key"] == 1 and run.secrets["found"]["GitHub Token"] == 1
    report = json.loads(run.report.read_text())
    assert report["secrets"] == run.secrets == read_provenance(run.output)["secrets"]
    assert "Secrets found before writing" in run.card.read_text()
    (commit,) = hub["create_commit"]
    uploaded = commit["files"]["data/train.parquet"]
    assert not [secret for secret in PLANTED if secret in written_text(uploaded)]


def test_drop_moves_the_problems_holding_one_to_the_rejects_as_secret(tmp_path):
    run = filter_pool(tmp_path, "drop")
    assert run.selected == 2 and run.result.counts["secret"] == 5
    assert not [secret for secret in PLANTED if secret in written_text(run.output)]
    rejects = pl.read_parquet(tmp_path / "pool.rejects.parquet")
    held = rejects.filter(pl.col("drop_reason") == "secret")
    assert sorted(held["problem_id"]) == sorted(problem.id for problem in LEAKY)
    assert run.as_dict()["dropped"]["dropped_secret"] == 5


def test_keep_scans_nothing(tmp_path):
    run = filter_pool(tmp_path, "keep")
    assert run.secrets == {"mode": "keep"} and AWS in written_text(run.output)
